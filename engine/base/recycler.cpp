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

/// True when `name` in `at` is a directory (not a link to one) with no entries. Read through the
/// descriptor just opened, which starts at the directory's beginning (Dir::list() opens a
/// position of its own), until the first entry other than "." and "..".
bool empty_dir(const Dir& at, const std::string& name) {
  auto d = at.sub(name);
  if (!d) return false;
  alignas(struct dirent64) char buf[1024];
  for (;;) {
    const ssize_t n = ::getdents64(d->fd(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    for (ssize_t off = 0; off < n;) {
      const auto* e = reinterpret_cast<const struct dirent64*>(buf + off);
      off += e->d_reclen;
      if (std::string_view name_of(e->d_name); name_of != "." && name_of != "..") return false;
    }
  }
}

/// shared()'s Recyclers by pool path.
std::map<std::string, std::unique_ptr<Recycler>, std::less<>>& registry() {
  static std::map<std::string, std::unique_ptr<Recycler>, std::less<>> pools;
  return pools;
}

}  // namespace

Recycler& Recycler::shared(const Dir& parent, std::string_view name) {
  auto& pools = registry();
  if (auto it = pools.find(parent.path_of(name)); it != pools.end()) return *it->second;
  auto pool = parent.sub(name, 0700);
  auto made = pool ? std::make_unique<Recycler>(std::move(*pool)) : std::make_unique<Recycler>();
  return *pools.emplace(parent.path_of(name), std::move(made)).first->second;
}

Recycler& Recycler::shared(const std::string& parent_path, std::string_view name) {
  auto& pools = registry();
  if (auto it = pools.find(parent_path + "/" + std::string(name)); it != pools.end()) return *it->second;
  auto parent = Dir::open(parent_path);
  if (parent) return shared(*parent, name);
  return *pools.emplace(parent_path + "/" + std::string(name), std::make_unique<Recycler>()).first->second;
}

void Recycler::release_shared() { registry().clear(); }

void Recycler::list() {
  listed_ = true;
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

bool Recycler::claim_dir(const Dir& to, std::string_view name) {
  if (!pool_ || !is_path_component(name)) return false;
  return take(to, std::string(name), /*dir=*/true);
}

bool Recycler::recycle_dir(const Dir& from, std::string_view name) {
  if (!pool_ || pooled_ >= max_files_ || !is_path_component(name)) return false;
  const std::string n(name);
  struct stat st {};
  if (::fstatat(from.fd(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) || !empty_dir(from, n)) return false;
  if (!listed_) list();
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

bool Recycler::take(const Dir& to, const std::string& target, bool dir) {
  if (!listed_) list();
  std::vector<std::string>& names = dir ? dir_candidates_ : candidates_;
  for (bool relisted = false, lost = false;;) {
    if (names.empty()) {
      // Listed again only when other processes took names this one knew: they may also have
      // recycled others since. A pool found empty is not listed on every claim (a node filling
      // with pods, no DEL, would pay a listing per file).
      if (relisted || !lost) return false;
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
    if (dir ? empty_dir(to, target) : lone_regular_file(to.fd(), target.c_str(), st)) return true;
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
      if (!listed_) list();
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
  if (!listed_) list();
  const std::string pooled_name = std::to_string(st.st_ino);
  if (pooled_ < max_files_ && ::linkat(from.fd(), n.c_str(), pool_->fd(), pooled_name.c_str(), 0) == 0) {
    ++pooled_;
    candidates_.push_back(pooled_name);
  }
}

}  // namespace plumb
