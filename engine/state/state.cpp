// The state directory (state.hpp): keys, locks, reading records whole, removal, quarantine.
#include "engine/state/state.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

namespace plumb::state {
namespace {

constexpr const char* kContainers = "containers";
constexpr const char* kLocks = "locks";
constexpr const char* kQuarantine = "quarantine";
constexpr const char* kRecycled = "recycled";
/// A record's spare file ("<record>.spare", beside it): Dir::write_via_spare.
constexpr const char* kSpareSuffix = ".spare";

/// "<index>-<ifname>.json", the file name of a record in its key's directory.
std::string record_name(const AttachmentRecord& rec) { return std::to_string(rec.index) + "-" + rec.ifname + ".json"; }

/// A damaged record: `why` with code kDecode unless it says "newer plumb" (kNewerRecord).
DamagedRecord damaged(const std::string& path, const Error& why) {
  Error e = why;
  if (e.cni_code != cni_code::kNewerRecord) e.cni_code = cni_code::kDecode;
  if (e.msg.find(path) == std::string::npos) e = e.within("state record " + path);
  return DamagedRecord{path, std::move(e)};
}

/// The CNI_IFNAME a legacy directory belongs to: the ifname of its index-0 record's file name
/// ("0-<ifname>.json"); "" when it has none (then any key of the container takes it).
std::string legacy_owner(const Dir& legacy) {
  auto entries = legacy.list();
  if (!entries) return {};
  std::vector<std::string> owners;
  for (const auto& e : *entries) {
    if (e.name.size() > 7 && e.name.starts_with("0-") && e.name.ends_with(".json")) owners.push_back(e.name.substr(2, e.name.size() - 7));
  }
  std::sort(owners.begin(), owners.end());
  return owners.empty() ? std::string() : owners.front();
}

/// Checks that a decoded record belongs where it was found.
Status check_place(const AttachmentRecord& r, const Key& key, const std::string& file, bool legacy) {
  if (r.container_id != key.container_id) {
    return fail(cni_code::kDecode, "belongs to container \"" + r.container_id + "\", not " + key.container_id);
  }
  if (!legacy && r.cni_ifname != key.ifname) {
    return fail(cni_code::kDecode, "belongs to interface \"" + r.cni_ifname + "\", not " + key.ifname);
  }
  if (file != std::to_string(r.index) + "-" + r.ifname + ".json") {
    return fail(cni_code::kDecode, "describes attachment " + std::to_string(r.index) + " " + r.ifname + ", not its file name");
  }
  return {};
}

/// Reads every record of directory `name` in `containers` into `out`.
void read_dir(const Dir& containers, const std::string& name, const Key& key, bool legacy, Records& out) {
  const std::string path = containers.path_of(name);
  auto dir = containers.sub(name);
  if (!dir) {
    if (dir.error().cni_code != cni_code::kNotFound) out.damaged.push_back(damaged(path, dir.error()));
    return;
  }
  auto entries = dir->list();
  if (!entries) {
    out.damaged.push_back(damaged(path, entries.error()));
    return;
  }
  for (const auto& e : *entries) {
    if (e.name.find(".json.tmp.") != std::string::npos) {
      // A write killed before its rename: callers hold the key's lock, so no writer is using it.
      (void)dir->remove(e.name);
      continue;
    }
    if (e.name.ends_with(kSpareSuffix)) {
      // A spare whose record is gone (quarantined, or removed by a plumb killed in between).
      const std::string of = e.name.substr(0, e.name.size() - std::string_view(kSpareSuffix).size());
      if (auto there = dir->stat(of); there && !*there) (void)dir->remove(e.name);
      continue;
    }
    if (e.name.size() <= 5 || !e.name.ends_with(".json")) continue;
    const std::string file = dir->path_of(e.name);
    auto text = dir->read(e.name, "state record", kMaxRecordBytes);
    if (!text && text.error().cni_code == cni_code::kNotFound) continue;
    if (!text) {
      out.damaged.push_back(damaged(file, text.error()));
      continue;
    }
    auto rec = decode(*text, file);
    if (rec && legacy) rec->cni_ifname = key.ifname;
    Status placed = rec ? check_place(*rec, key, e.name, legacy) : Status{};
    if (!rec) {
      out.damaged.push_back(damaged(file, rec.error()));
    } else if (!placed) {
      out.damaged.push_back(damaged(file, placed.error()));
    } else {
      out.records.push_back(std::move(*rec));
    }
  }
}

}  // namespace

StateDir::StateDir(std::string root) : root_(std::move(root)) {
  // A daemon worker's invocations share the directories they opened (the root, locks/,
  // containers/, recycled/), kept open from one to the next.
  if (!invocations::keeping()) return;
  static std::map<std::string, std::shared_ptr<OpenDirs>, std::less<>> kept;
  auto& held = kept[root_];
  if (!held) held = std::make_shared<OpenDirs>();
  open_ = held;
}

Result<const Dir*> StateDir::open_dir(std::string_view sub, bool create) const {
  const std::optional<mode_t> mode = create ? std::optional<mode_t>(0700) : std::nullopt;
  OpenDirs& o = *open_;
  // Kept from a worker's earlier invocation: used while the configured path still names the root
  // and the root still holds each subdirectory under its name (checked once per invocation), so
  // nothing is written into a state directory an administrator removed, moved or replaced.
  if (o.root && !o.root->id.still_named(AT_FDCWD, o.root->dir.path())) o = OpenDirs{};
  // A subdirectory opened before is used as it is: the root is checked (its link count) only when
  // something is opened in it, once per subdirectory and invocation, not at every operation. A
  // root removed after that fails the operations below it (ENOENT), never silently.
  if (!sub.empty() && o.root) {
    if (auto it = o.subs.find(sub); it != o.subs.end()) {
      if (it->second->id.still_named(o.root->dir.fd(), it->first)) return &it->second->dir;
      o.subs.erase(it);
    }
  }
  if (o.root) {
    struct stat st {};
    if (::fstat(o.root->dir.fd(), &st) != 0 || st.st_nlink == 0) o = OpenDirs{};
  }
  if (!o.root) {
    auto root = Dir::open(root_, mode);
    if (!root && root.error().cni_code == cni_code::kNotFound && !create) return nullptr;
    o.root.emplace(PLUMB_TRY(std::move(root)));
  }
  if (sub.empty()) return &o.root->dir;
  auto d = o.root->dir.sub(sub, mode);
  if (!d && d.error().cni_code == cni_code::kNotFound && !create) return nullptr;
  auto held = std::make_shared<OpenDir>(PLUMB_TRY(std::move(d)));
  return &o.subs.insert_or_assign(std::string(sub), std::move(held)).first->second->dir;
}

Result<std::shared_ptr<const Dir>> StateDir::shared_dir(std::string_view sub) const {
  PLUMB_TRY(open_dir(sub, true));
  const auto& held = open_->subs.find(sub)->second;
  return std::shared_ptr<const Dir>(held, &held->dir);
}

Result<std::pair<Dir, std::string>> StateDir::containing_dir(const std::string& path) const {
  const std::string prefix = root_ + "/" + kContainers + "/";
  const auto slash = path.find_last_of('/');
  if (!path.starts_with(prefix) || slash == std::string::npos || slash < prefix.size()) {
    return fail(cni_code::kInternal, path + " is not below " + prefix);
  }
  const Dir* containers = PLUMB_TRY(open_dir(kContainers, false));
  if (containers == nullptr) return fail(cni_code::kNotFound, root_ + "/" + kContainers + " does not exist");
  auto dir = PLUMB_TRY(containers->sub(path.substr(prefix.size(), slash - prefix.size())));
  return std::pair{std::move(dir), path.substr(slash + 1)};
}

std::string Key::describe() const { return "container " + container_id + (ifname.empty() ? "" : " interface " + ifname); }

void FileLock::unlink_path() {
  // Only the holder unlinks, before dropping the lock: waiters then notice the inode changed.
  // unlinkat(2) never follows a link at the last component, and the directory is the one held.
  if (fd_.get() >= 0 && dir_fd() >= 0 && !name_.empty()) ::unlinkat(dir_fd(), name_.c_str(), 0);
}

void FileLock::recycle_path(Recycler& pool) {
  // As unlink_path(): only the holder moves it, and waiters notice the name no longer names it.
  if (fd_.get() >= 0 && dir_fd() >= 0 && !name_.empty()) (void)pool.recycle(dir_fd(), "lock directory", name_);
}

Result<FileLock> lock_file(std::shared_ptr<const Dir> shared, const std::string& name) {
  const Dir& dir = *shared;
  // Lock files are unlinked by their holder once nothing is left to serialise, so after taking
  // the lock, make sure the name still names the file we locked; else retry.
  for (;;) {
    int fd = PLUMB_TRY(dir.open_lock(name));
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return fail_errno(err, "lock " + dir.path_of(name));
    }
    struct stat held {};
    auto named = dir.stat(name);
    if (::fstat(fd, &held) == 0 && named && *named && held.st_ino == (*named)->st_ino && held.st_dev == (*named)->st_dev) {
      return FileLock(fd, std::move(shared), name);
    }
    ::close(fd);  // unlinked (or replaced) while we waited: take the current one
  }
}

Result<KeyLock> StateDir::lock(const Key& key) const {
  // locks/ owned shared: the locks hold it (no descriptor of their own), and it stays open for
  // them whatever this StateDir opens again meanwhile.
  const std::shared_ptr<const Dir> held = PLUMB_TRY(shared_dir(kLocks));
  const Dir& locks = *held;
  (void)recycled().claim(locks, key.name());  // a lock file without a new inode (false: it exists)
  KeyLock out{PLUMB_TRY(lock_file(held, key.name())), std::nullopt};
  // Records of an older plumb live in one directory per container, under that container's lock.
  bool legacy = PLUMB_TRY(locks.stat(key.container_id)).has_value();
  if (!legacy) {
    if (auto containers = open_dir(kContainers, false); containers && *containers != nullptr) {
      legacy = PLUMB_TRY((*containers)->stat(key.container_id)).has_value();
    }
  }
  if (legacy) out.legacy = PLUMB_TRY(lock_file(held, key.container_id));
  return out;
}

std::string StateDir::record_path(const AttachmentRecord& rec) const {
  return root_ + "/" + kContainers + "/" + rec.key().name() + "/" + record_name(rec);
}

Result<const Dir*> StateDir::key_dir(const Key& key) const {
  // Records are written holding the key's lock (spec 7.3): no other process removes the key's
  // directory meanwhile. This one may have (remove() once it was empty): recycled, the cache was
  // cleared; removed (by hand, or by a remove() that could not recycle it), its link count is 0.
  if (key_dir_ && key_dir_->name == key.name()) {
    struct stat st {};
    if (::fstat(key_dir_->dir.fd(), &st) == 0 && st.st_nlink > 0) return &key_dir_->dir;
  }
  key_dir_.reset();
  const Dir& containers = *PLUMB_TRY(open_dir(kContainers, true));
  // A directory without a new inode, opened as it was found empty (none pooled, or the key's
  // directory exists: opened, or created).
  auto claimed = recycled().claim_dir(containers, key.name());
  Dir dir = claimed ? std::move(*claimed) : PLUMB_TRY(containers.sub(key.name(), 0700));
  key_dir_ = std::make_shared<KeyDirCache>(KeyDirCache{key.name(), std::move(dir), {}, {}});
  return &key_dir_->dir;
}

Recycler& StateDir::recycled() const {
  // The root opened by an earlier call of this invocation (or of a worker's earlier one, while
  // the path still names it), without checking that it is still linked: a pool reached through a
  // removed root only fails its renames (claims find nothing, recycling unlinks), and every write
  // or read opens the root through open_dir(), which checks.
  if (open_->root && open_->root->id.still_named(AT_FDCWD, open_->root->dir.path())) {
    return Recycler::shared(open_->root->dir, kRecycled);
  }
  auto root = open_dir("", true);
  return root ? Recycler::shared(**root, kRecycled) : Recycler::shared(root_, kRecycled);
}

Status StateDir::write(AttachmentRecord& rec) const {
  const std::string name = record_name(rec);
  const std::string spare = name + kSpareSuffix;
  const std::string encoded = encode(rec);
  // A later version of a record already in `dir`, the key's directory: the journal rewrites it at
  // every intent of an ADD (phase "adding"). Those versions are swapped in through the record's
  // spare file (no new inode, flush or freed blocks per intent), both files kept open from one
  // intent to the next (the key's lock is held: nothing else renames them); the complete record
  // ("ready") is renamed over, which ext4 orders after its data.
  auto next_version = [&](const Dir& dir) {
    const bool last = rec.phase == "ready";
    SpareFds& held = key_dir_->spares[name];
    // A spare claimed unless held (false: none pooled, or a spare is there); the version a final
    // rename replaces goes to the pool.
    if (held.spare.get() < 0) (void)recycled().claim(dir, spare);
    if (last) recycled().keep(dir, name);
    auto st = dir.write_via_spare(name, spare, encoded, 0600, last, &held);
    if (last || !st) key_dir_->spares.erase(name);
    return st;
  };
  if (key_dir_ && key_dir_->name == rec.key().name() && rec.origin == key_dir_->dir.path_of(name)) {
    // Both files of the record open from its previous versions: swapped in through the directory
    // kept open, its link count not asked first. A directory removed meanwhile fails the swap
    // (ENOENT; the descriptors are dropped): written again below, through the one key_dir() finds.
    auto it = key_dir_->spares.find(name);
    if (it != key_dir_->spares.end() && it->second.named.get() >= 0 && it->second.spare.get() >= 0) {
      auto st = next_version(key_dir_->dir);
      if (st || st.error().sys_errno != ENOENT) return st;
    }
  }
  const Dir& dir = *PLUMB_TRY(key_dir(rec.key()));
  if (rec.origin == dir.path_of(name)) return next_version(dir);
  // The record's first version here: written into a recycled file claimed as its spare and
  // renamed into place (held open for the versions the journal writes next, none after a
  // complete record), or else a new unnamed file linked in place (a killed writer leaves at most
  // the spare, which read() removes).
  key_dir_->spares.erase(name);
  if (recycled().claim(dir, spare)) {
    SpareFds* held = rec.phase == "ready" ? nullptr : &key_dir_->spares[name];
    auto st = dir.write_via_spare(name, spare, encoded, 0600, /*last=*/true, held);
    if (!st) key_dir_->spares.erase(name);
    PLUMB_TRY(std::move(st));
  } else {
    PLUMB_TRY(dir.write_atomic(name, encoded));
  }
  rec.origin = dir.path_of(name);
  return {};
}

Result<Records> StateDir::read(const Key& key) const {
  Records out;
  const Dir* containers = PLUMB_TRY(open_dir(kContainers, false));
  if (containers == nullptr) return out;
  read_dir(*containers, key.name(), key, /*legacy=*/false, out);
  if (auto legacy = containers->sub(key.container_id)) {
    const std::string owner = legacy_owner(*legacy);
    if (owner.empty() || owner == key.ifname) read_dir(*containers, key.container_id, key, /*legacy=*/true, out);
  } else if (legacy.error().cni_code != cni_code::kNotFound) {
    out.damaged.push_back(damaged(containers->path_of(key.container_id), legacy.error()));
  }
  std::sort(out.records.begin(), out.records.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  return out;
}

bool StateDir::has_records(const std::string& container_id) const {
  auto containers = open_dir(kContainers, false);
  if (!containers || *containers == nullptr) return false;
  auto entries = (*containers)->list();
  if (!entries) return true;  // cannot tell: keep
  return std::any_of(entries->begin(), entries->end(), [&](const Dir::Entry& e) {
    if (e.name != container_id && !e.name.starts_with(container_id + ":")) return false;
    // An empty record directory (an ADD killed before its first record) holds nothing.
    auto dir = (*containers)->sub(e.name);
    if (!dir) return true;  // not a directory: damaged, which counts
    auto inside = dir->list();
    return !inside || !inside->empty();
  });
}

Status StateDir::remove(const AttachmentRecord& rec) const {
  if (rec.origin.empty()) return {};  // never written
  auto [dir, name] = PLUMB_TRY(containing_dir(rec.origin));
  if (key_dir_) key_dir_->spares.erase(name);
  (void)recycled().recycle(dir, name + kSpareSuffix);  // an ADD undone (or killed) before its record was complete
  auto st = recycled().recycle(dir, name);
  if (!st) return std::unexpected(st.error().within("remove state record"));
  const Dir& containers = *PLUMB_TRY(open_dir(kContainers, true));
  const std::string dir_name = dir.path().substr(containers.path().size() + 1);
  // Once empty, the key's directory goes to the recycled files (else it is removed; kept while it
  // holds other records). Gone, the directory this process kept open for its writes (key_dir())
  // is forgotten for every copy of this StateDir (a recycled one keeps its link count), and
  // release() knows the key has nothing left.
  const bool recycled_dir = recycled().recycle_dir(containers, dir_name);
  if (!recycled_dir && !PLUMB_TRY(containers.remove_dir(dir_name))) return {};
  if (!key_dir_) key_dir_ = std::make_shared<KeyDirCache>();
  key_dir_->name.clear();
  key_dir_->emptied = dir_name;
  return {};
}

Result<std::string> StateDir::quarantine(const Key& key, const std::string& path) const {
  key_dir_.reset();  // records move out of (or with) the key's directory
  auto to = PLUMB_TRY(PLUMB_TRY(open_dir(kQuarantine, true))->sub(key.name(), 0700));
  const Dir& containers = *PLUMB_TRY(open_dir(kContainers, true));
  // A damaged record (its directory named by the path), or a record directory that is itself
  // the damage (a link or file where a directory should be).
  const bool whole_dir = path.find('/', containers.path().size() + 1) == std::string::npos;
  std::optional<Dir> held;
  if (!whole_dir) held = PLUMB_TRY(containing_dir(path)).first;
  const Dir& from = whole_dir ? containers : *held;
  const std::string name = path.substr(path.find_last_of('/') + 1);
  std::string target = name;
  for (int n = 1; PLUMB_TRY(to.stat(target)).has_value(); ++n) target = name + "." + std::to_string(n);
  PLUMB_TRY(from.move(name, to, target));
  (void)from.remove(name + kSpareSuffix);
  if (!whole_dir) (void)containers.remove_dir(from.path().substr(containers.path().size() + 1));
  return to.path_of(target);
}

void StateDir::release(KeyLock& lock, const Key& key) const {
  // A key whose record directory remove() took away (every record of it was there, under the
  // lock) has nothing left to read or remove, unless an older plumb's directory of its container
  // is there too (then it holds the legacy lock).
  if (lock.legacy || !key_dir_ || key_dir_->emptied != key.name()) {
    auto left = read(key);
    if (!left || !left->empty()) return;
    // The key's directory, when an ADD killed before its first record left it empty (read() has
    // removed the temporary files a killed writer leaves); kept when anything else is in it.
    if (auto containers = open_dir(kContainers, false); containers && *containers != nullptr) {
      if (auto there = (*containers)->stat(key.name()); there && *there && S_ISDIR((*there)->st_mode)) {
        if (key_dir_ && key_dir_->name == key.name()) key_dir_->name.clear();
        if (!recycled().recycle_dir(**containers, key.name())) (void)(*containers)->remove_dir(key.name());
      }
    }
  }
  lock.own.recycle_path(recycled());
  if (!lock.legacy) return;
  auto containers = open_dir(kContainers, false);
  if (containers && *containers != nullptr) {
    auto removed = (*containers)->remove_dir(key.container_id);  // the legacy directory, once empty
    if (!removed || !*removed) return;
  }
  lock.legacy->unlink_path();
}

Result<std::vector<Key>> StateDir::keys() const {
  std::set<Key> out;
  const Dir* containers = PLUMB_TRY(open_dir(kContainers, false));
  if (containers != nullptr) {
    for (const auto& e : PLUMB_TRY(containers->list())) {
      const auto colon = e.name.find(':');
      if (colon != std::string::npos) {
        out.insert(Key{e.name.substr(0, colon), e.name.substr(colon + 1)});
      } else if (auto legacy = containers->sub(e.name)) {
        out.insert(Key{e.name, legacy_owner(*legacy)});
      } else {
        out.insert(Key{e.name, ""});  // not a directory: reported as damaged by read()
      }
    }
  }
  const Dir* locks = PLUMB_TRY(open_dir(kLocks, false));
  if (locks != nullptr) {
    for (const auto& e : PLUMB_TRY(locks->list())) {
      if (e.name.find(".tmp.") != std::string::npos) continue;
      const auto colon = e.name.find(':');
      if (colon != std::string::npos) {
        out.insert(Key{e.name.substr(0, colon), e.name.substr(colon + 1)});
      } else if (std::none_of(out.begin(), out.end(), [&](const Key& k) { return k.container_id == e.name; })) {
        out.insert(Key{e.name, ""});  // an older plumb's lock file without records
      }
    }
  }
  return std::vector<Key>(out.begin(), out.end());
}

}  // namespace plumb::state
