#include "engine/state/state.hpp"
#include "engine/base/file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace plumb::state {
namespace {


json::Value str(std::string_view s, json::Document::AllocatorType& a) {
  return json::Value(s.data(), static_cast<rapidjson::SizeType>(s.size()), a);
}

}  // namespace

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the flock
}

void FileLock::unlink_path() {
  // Only the holder unlinks, before dropping the lock: waiters then notice the inode changed.
  if (fd_ >= 0 && !path_.empty()) ::unlink(path_.c_str());
}

Result<FileLock> lock_file(const std::string& path) {
  // Lock files are unlinked by their holder once a container is gone (see StateDir::unlock_and_remove),
  // so after taking the lock, make sure the path still names the file we locked; else retry.
  for (;;) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EROFS) {
      fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // flock works on a read-only descriptor
      if (fd < 0) errno = EROFS;                        // report why it could not be created
    }
    if (fd < 0) return fail_errno(errno, "open lock file " + path);
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return fail_errno(err, "lock " + path);
    }
    struct stat held {}, named {};
    if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev) {
      return FileLock(fd, path);
    }
    ::close(fd);  // unlinked (or replaced) while we waited: take the current one
  }
}


Result<FileLock> StateDir::lock_container(const std::string& container_id) const {
  PLUMB_TRY(mkdir_p(root_ + "/locks"));
  return lock_file(root_ + "/locks/" + container_id);
}

std::string StateDir::record_path(const AttachmentRecord& rec) const {
  return root_ + "/containers/" + rec.container_id + "/" + std::to_string(rec.index) + "-" + rec.ifname + ".json";
}

Status StateDir::write(const AttachmentRecord& rec) const {
  // The journal rewrites a record at every intent of an ADD (phase "adding"): those versions are
  // swapped in through one spare file per record (write_via_spare: no new inode, flush or freed
  // blocks per intent); the complete record ("ready") is renamed over, which ext4 orders after its
  // data (old or new after a power loss).
  // A record's first version goes through a temporary file in its directory (read() removes one
  // a killed writer left), so the spare only exists beside a record, whose removal removes it.
  const std::string path = record_path(rec);
  const std::string data = encode(rec);
  if (::access(path.c_str(), F_OK) == 0) return write_via_spare(path, spare_path(rec), data, 0600, rec.phase == "ready");
  auto st = write_atomic(path, data);
  if (st || st.error().sys_errno != ENOENT) return st;
  PLUMB_TRY(mkdir_p(root_ + "/containers/" + rec.container_id));  // the container's first record
  return write_atomic(path, data);
}

std::string StateDir::spare_path(const AttachmentRecord& rec) const {
  // Beside the container directories, not in one: a spare a killed ADD left is no record file
  // (remove() deletes it with its record); ".tmp." keeps containers() from listing it.
  return root_ + "/containers/" + rec.container_id + "." + std::to_string(rec.index) + "-" + rec.ifname + ".json.tmp.spare";
}

Result<std::vector<AttachmentRecord>> StateDir::read(const std::string& container_id) const {
  std::vector<AttachmentRecord> out;
  std::string dir = root_ + "/containers/" + container_id;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return out;
    return fail_errno(errno, "read state directory " + dir);
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > 5 && n.ends_with(".json")) {
      names.push_back(n);
    } else if (n.find(".json.tmp.") != std::string::npos) {
      // A write_atomic() killed before its rename: callers hold the container lock, so no
      // writer is using it.
      ::unlink((dir + "/" + n).c_str());
    }
  }
  ::closedir(d);
  for (auto& n : names) {
    std::string path = dir + "/" + n;
    auto text = read_file(path, "state record");
    if (!text && text.error().sys_errno == ENOENT) continue;
    if (!text) return std::unexpected(text.error());
    out.push_back(PLUMB_TRY(decode(*text, path)));
  }
  std::sort(out.begin(), out.end(), [](const AttachmentRecord& a, const AttachmentRecord& b) { return a.index < b.index; });
  return out;
}

Status StateDir::remove(const AttachmentRecord& rec) const {
  std::string path = record_path(rec);
  ::unlink(spare_path(rec).c_str());  // an ADD undone (or killed) before its record was complete
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return fail_errno(errno, "remove state record " + path);
  std::string dir = root_ + "/containers/" + rec.container_id;
  if (::rmdir(dir.c_str()) != 0 && errno != ENOTEMPTY && errno != EEXIST && errno != ENOENT) {
    return fail_errno(errno, "remove state directory " + dir);
  }
  return {};
}

Result<std::vector<std::string>> StateDir::containers() const {
  std::vector<std::string> out;
  for (const char* sub : {"/containers", "/locks"}) {
    std::string dir = root_ + sub;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      if (errno == ENOENT) continue;
      return fail_errno(errno, "read state directory " + dir);
    }
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != ".." && n.find(".tmp.") == std::string::npos) out.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string encode(const AttachmentRecord& rec) {
  json::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  d.AddMember("format", kRecordFormat, a);
  d.AddMember("containerID", str(rec.container_id, a), a);
  d.AddMember("index", rec.index, a);
  d.AddMember("ifname", str(rec.ifname, a), a);
  d.AddMember("network", str(rec.network, a), a);
  d.AddMember("selection", str(rec.selection, a), a);
  d.AddMember("default", rec.is_default, a);
  d.AddMember("podNamespace", str(rec.pod_namespace, a), a);
  d.AddMember("podName", str(rec.pod_name, a), a);
  d.AddMember("netns", str(rec.netns, a), a);
  d.AddMember("phase", str(rec.phase, a), a);
  if (!rec.ipam_owner.empty()) d.AddMember("ipamOwner", str(rec.ipam_owner, a), a);
  if (rec.disable_check) d.AddMember("disableCheck", true, a);
  if (rec.disable_gc) d.AddMember("disableGC", true, a);
  json::Value v;
  v.CopyFrom(rec.config, a);
  d.AddMember("config", v, a);
  v.CopyFrom(rec.result, a);
  d.AddMember("result", v, a);
  v.CopyFrom(rec.status, a);
  d.AddMember("status", v, a);
  if (rec.undo.IsArray()) {
    v.CopyFrom(rec.undo, a);
  } else {
    v.SetArray();
  }
  d.AddMember("undo", v, a);
  return json::dump(d);
}

Result<AttachmentRecord> decode(std::string_view text, const std::string& origin) {
  json::Document d = PLUMB_TRY(json::parse(text, "state record " + origin));
  if (!d.IsObject()) return fail(cni_code::kDecode, "state record " + origin + " is not an object");
  AttachmentRecord r;
  // Records without "format" were written before formats were numbered: format 1, whose fields and
  // undo operations format 2 kept (it added "format" and "ipamOwner").
  r.format = static_cast<int>(PLUMB_TRY(json::get_int(d, "format", origin)).value_or(1));
  if (r.format < 1 || r.format > kRecordFormat) {
    return fail(cni_code::kDecode, "state record " + origin + " has format " + std::to_string(r.format) +
                                       ", this plumb reads formats 1.." + std::to_string(kRecordFormat) +
                                       " (written by a newer plumb? DEL it with that version)");
  }
  auto s = [&](const char* k, std::string& out) -> Status {
    auto v = PLUMB_TRY(json::get_string(d, k, origin));
    if (v) out = *v;
    return {};
  };
  PLUMB_TRY(s("containerID", r.container_id));
  PLUMB_TRY(s("ifname", r.ifname));
  PLUMB_TRY(s("network", r.network));
  PLUMB_TRY(s("selection", r.selection));
  PLUMB_TRY(s("podNamespace", r.pod_namespace));
  PLUMB_TRY(s("podName", r.pod_name));
  PLUMB_TRY(s("netns", r.netns));
  PLUMB_TRY(s("phase", r.phase));
  PLUMB_TRY(s("ipamOwner", r.ipam_owner));
  r.index = static_cast<int>(PLUMB_TRY(json::get_int(d, "index", origin)).value_or(0));
  r.is_default = PLUMB_TRY(json::get_bool(d, "default", origin)).value_or(false);
  r.disable_check = PLUMB_TRY(json::get_bool(d, "disableCheck", origin)).value_or(false);
  r.disable_gc = PLUMB_TRY(json::get_bool(d, "disableGC", origin)).value_or(false);
  if (auto it = d.FindMember("config"); it != d.MemberEnd()) r.config.CopyFrom(it->value, r.config.GetAllocator());
  if (auto it = d.FindMember("result"); it != d.MemberEnd()) r.result.CopyFrom(it->value, r.result.GetAllocator());
  if (auto it = d.FindMember("status"); it != d.MemberEnd()) r.status.CopyFrom(it->value, r.status.GetAllocator());
  if (auto it = d.FindMember("undo"); it != d.MemberEnd() && it->value.IsArray()) {
    r.undo.CopyFrom(it->value, r.undo.GetAllocator());
  } else {
    r.undo.SetArray();
  }
  return r;
}

}  // namespace plumb::state
