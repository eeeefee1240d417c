#include "engine/base/recycler.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <memory>

namespace plumb {
namespace {

/// lstat of `name` in the directory open as `at`: a regular file of one link.
bool lone_regular_file(int at, const char* name, struct stat& st) {
  return ::fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1;
}

/// The directory `name` in `at` (not a link to one), opened, when it has no entries. Read through
/// the descriptor just opened, which starts at the directory's beginning (Dir::list() opens a
/// position of its own), until the first entry other than "." and "..".
std::optional<Dir> empty_dir(const Dir& at, const std::string& name) {
  auto d = at.sub(name);
  if (!d) return std::nullopt;
  alignas(struct dirent64) char buf[1024];
  for (;;) {
    const ssize_t n = ::getdents64(d->fd(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return std::move(*d);
    for (ssize_t off = 0; off < n;) {
      const auto* e = reinterpret_cast<const struct dirent64*>(buf + off);
      off += e->d_reclen;
      if (std::string_view name_of(e->d_name); name_of != "." && name_of != "..") return std::nullopt;
    }
  }
}

/// A shared() Recycler and the identity of its pool, kept across a worker's invocations.
struct SharedPool {
  std::unique_ptr<Recycler> recycler;
  KeptIdentity id;  ///< of its pool; without one, the invocation that could not open it
};

/// shared()'s Recyclers by pool path.
std::map<std::string, SharedPool, std::less<>>& registry() {
  static std::map<std::string, SharedPool, std::less<>> pools;
  return pools;
}

/// The Recycler kept for `path` when its pool may still be used: in this invocation, or in a
/// worker's later one while `name` in the directory open as `at` (AT_FDCWD: `name` is `path`)
/// still names the pool (a pool removed or replaced since is opened again, as is one that could
/// not be opened). nullptr: there is none to use.
Recycler* kept(const std::string& path, int at, const std::string& name) {
  auto& pools = registry();
  auto it = pools.find(path);
  if (it == pools.end()) return nullptr;
  if (it->second.id.still_named(at, name)) return it->second.recycler.get();
  pools.erase(it);
  return nullptr;
}

/// Keeps the Recycler of `pool` (nullopt: none could be opened) as shared() Recycler of `path`.
Recycler& keep_pool(const std::string& path, std::optional<Dir> pool) {
  SharedPool entry;
  entry.id = KeptIdentity(pool ? pool->fd() : -1);
  entry.recycler = pool ? std::make_unique<Recycler>(std::move(*pool)) : std::make_unique<Recycler>();
  return *registry().insert_or_assign(path, std::move(entry)).first->second.recycler;
}

}  // namespace

Recycler& Recycler::shared(const Dir& parent, std::string_view name) {
  const std::string path = parent.path_of(name);
  if (Recycler* r = kept(path, parent.fd(), std::string(name))) return *r;
  auto pool = parent.sub(name, 0700);
  return keep_pool(path, pool ? std::optional<Dir>(std::move(*pool)) : std::nullopt);
}

Recycler& Recycler::shared(const std::string& parent_path, std::string_view name) {
  const std::string path = parent_path + "/" + std::string(name);
  if (Recycler* r = kept(path, AT_FDCWD, path)) return *r;
  auto parent = Dir::open(parent_path);
  if (parent) return shared(*parent, name);
  return keep_pool(path, std::nullopt);
}

void Recycler::release_shared() { registry().clear(); }

void Recycler::list() {
  listed_ = true;
  listed_in_ = invocations::current();
  candidates_.clear();
  dir_candidates_.clear();
  pooled_ = 0;
  auto entries = pool_->list();
  if (!entries) return;
  for (auto& e : *entries) {
    ++pooled_;
    if (e.type == DT_REG) candidates_.push_back(std::move(e.name));
    if (e.type == DT_DIR) dir_candidates_.push_back(std::move(e.name));
  }
}

void Recycler::count() {
  // A worker's count from an earlier invocation misses what other processes recycled since (and
  // counts what they claimed): listed again before it lets the pool grow past its bound.
  if (!listed_ || (pooled_ + 1 >= max_files_ && listed_in_ != invocations::current())) list();
}

std::optional<Dir> Recycler::claim_dir(const Dir& to, std::string_view name) {
  std::optional<Dir> opened;
  if (pool_ && is_path_component(name) && take(to, std::string(name), /*dir=*/true, &opened)) return opened;
  return std::nullopt;
}

bool Recycler::recycle_dir(const Dir& from, std::string_view name) {
  if (!pool_ || pooled_ >= max_files_ || !is_path_component(name)) return false;
  const std::string n(name);
  struct stat st {};
  if (::fstatat(from.fd(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
      !empty_dir(from, n).has_value())
    return false;
  count();
  const std::string pooled_name = std::to_string(st.st_ino);
  if (pooled_ >= max_files_ || ::renameat2(from.fd(), n.c_str(), pool_->fd(), pooled_name.c_str(), RENAME_NOREPLACE) != 0) return false;
  ++pooled_;
  dir_candidates_.push_back(pooled_name);
  return true;
}

bool Recycler::claim(const Dir& to, std::string_view name) {
  if (!pool_ || !is_path_component(name)) return false;
  return take(to, std::string(name), /*dir=*/false);
}

bool Recycler::take(const Dir& to, const std::string& target, bool dir, std::optional<Dir>* opened) {
  if (!listed_) list();
  std::vector<std::string>& names = dir ? dir_candidates_ : candidates_;
  for (bool relisted = false, lost = false;;) {
    if (names.empty()) {
      // Listed again only when other processes took names this one knew (they may also have
      // recycled others since), or once per invocation of a worker that kept the listing of an
      // earlier one (other processes may have recycled files since). A pool found empty is not
      // listed on every claim (a node filling with pods, no DEL, would pay a listing per file).
      if (relisted || (!lost && listed_in_ == invocations::current())) return false;
      list();
      relisted = true;
      continue;
    }
    const std::string from = std::move(names.back());
    names.pop_back();
    if (::renameat2(pool_->fd(), from.c_str(), to.fd(), target.c_str(), RENAME_NOREPLACE) != 0) {
      if (errno == ENOENT) {  // another process took it
        if (pooled_ > 0) --pooled_;
        lost = true;
        continue;
      }
      if (errno == EEXIST) names.push_back(from);  // `target` is taken: the entry stays pooled
      return false;
    }
    if (pooled_ > 0) --pooled_;
    struct stat st {};
    if (dir) {
      if (auto empty = empty_dir(to, target)) {
        if (opened != nullptr) *opened = std::move(empty);
        return true;
      }
    } else if (lone_regular_file(to.fd(), target.c_str(), st)) {
      return true;
    }
    // Not what plumb may use. A file of a second link (a keep() whose rename has not run yet) or
    // anything but a regular file: this name of it is dropped. A directory with entries, or what
    // cannot be dropped: back where it was, never handed out.
    if (!dir && ::unlinkat(to.fd(), target.c_str(), 0) == 0) continue;
    if (::renameat2(to.fd(), target.c_str(), pool_->fd(), from.c_str(), RENAME_NOREPLACE) != 0) return false;
    ++pooled_;
  }
}

Result<std::optional<bool>> Recycler::place(const Dir& to, std::string_view name, std::string_view data, mode_t mode) {
  if (!pool_ || !is_path_component(name)) return std::optional<bool>{};
  // A name of this process's own in the pool: only one claimer's rename of a pooled file wins. A
  // placer of this pid killed before its last rename left it: a pooled file like any other.
  const std::string own = "claimed." + std::to_string(::getpid());
  if (!repooled_) (void)repool(own);
  repooled_ = true;
  if (!take(*pool_, own, /*dir=*/false)) return std::optional<bool>{};
  if (auto st = pool_->write_in_place(own, data, mode); !st) {
    (void)::unlinkat(pool_->fd(), own.c_str(), 0);
    return std::unexpected(st.error());
  }
  const std::string target(name);
  if (::renameat2(pool_->fd(), own.c_str(), to.fd(), target.c_str(), RENAME_NOREPLACE) == 0) return std::optional<bool>(true);
  const bool taken = errno == EEXIST;
  (void)repool(own);
  return taken ? std::optional<bool>(false) : std::optional<bool>{};
}

bool Recycler::repool(const std::string& own) {
  struct stat st {};
  if (::fstatat(pool_->fd(), own.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  const std::string pooled_name = std::to_string(st.st_ino);
  const bool renamed = ::renameat2(pool_->fd(), own.c_str(), pool_->fd(), pooled_name.c_str(), RENAME_NOREPLACE) == 0;
  ++pooled_;
  candidates_.push_back(renamed ? pooled_name : own);
  return true;
}

Status Recycler::recycle(int from_fd, const std::string& from_path, std::string_view name) {
  const std::string n(name);
  if (pool_ && pooled_ < max_files_) {
    struct stat st {};
    if (::fstatat(from_fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return {};  // missing: nothing to move or unlink
    } else if (S_ISREG(st.st_mode) && st.st_nlink == 1) {
      count();
      // Named by its inode number: unique among the files that exist.
      const std::string pooled_name = std::to_string(st.st_ino);
      if (pooled_ < max_files_ &&
          ::renameat2(from_fd, n.c_str(), pool_->fd(), pooled_name.c_str(), RENAME_NOREPLACE) == 0) {
        ++pooled_;
        candidates_.push_back(pooled_name);
        return {};
      }
    }
  }
  if (::unlinkat(from_fd, n.c_str(), 0) != 0 && errno != ENOENT) {
    return std::unexpected(Error{cni_code::kIo, errno, "remove " + from_path + "/" + n, {}});
  }
  return {};
}

void Recycler::keep(const Dir& from, std::string_view name) {
  if (!pool_ || pooled_ >= max_files_ || !is_path_component(name)) return;
  const std::string n(name);
  struct stat st {};
  if (!lone_regular_file(from.fd(), n.c_str(), st)) return;
  count();
  const std::string pooled_name = std::to_string(st.st_ino);
  if (pooled_ < max_files_ && ::linkat(from.fd(), n.c_str(), pool_->fd(), pooled_name.c_str(), 0) == 0) {
    ++pooled_;
    candidates_.push_back(pooled_name);
  }
}

}  // namespace plumb
