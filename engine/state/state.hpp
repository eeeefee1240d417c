// plumb's on-node state: one record per attachment, written atomically (temp file + rename)
// under <root>/containers/<containerID>/, and per-container locks under <root>/locks/.
// Records are written ahead of every kernel change (see txn::Journal), so a DEL after a crash
// finds everything the ADD may have done.
#pragma once

#include <string>
#include <vector>

#include "engine/base/json.hpp"
#include "engine/base/result.hpp"

namespace plumb::state {

/// The record format this plumb writes. Format 1 (no "format" key): records of plumb before
/// formats were numbered; format 2 adds "format" and "ipamOwner". Both are read.
inline constexpr int kRecordFormat = 2;

/// One attachment of one container.
struct AttachmentRecord {
  int format = kRecordFormat;    // the format it was read in (written: always kRecordFormat)
  std::string container_id;
  int index = 0;                 // order of attachment within the pod (default network = 0)
  std::string ifname;            // interface name inside the pod
  std::string network;           // CNI network name
  std::string selection;         // "namespace/nad" for annotated networks, "" for the default
  bool is_default = false;
  std::string pod_namespace;
  std::string pod_name;
  std::string netns;             // CNI_NETNS at ADD time
  std::string phase = "adding";  // "adding" until the attachment is complete, then "ready"
  std::string ipam_owner;        // IPAMClaim owner its IPAM holds the addresses for ("" = the container)
  bool disable_check = false;    // the network's conflist had "disableCheck" (CNI 1.1.0): CHECK skips it
  bool disable_gc = false;       // the network's conflist had "disableGC": GC leaves it (a DEL removes it)
  json::Document config;         // the resolved conflist as run (cniVersion/name injected)
  json::Document result;         // the attachment's CNI result (1.1.0 shape), null while adding
  json::Document status;         // its network-status entry, null while adding
  json::Document undo;           // array of encoded undo operations (drivers/undo.hpp), in the order registered
};

/// Holds an exclusive flock on a lock file until destroyed.
class FileLock {
 public:
  FileLock() = default;
  FileLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  FileLock(FileLock&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  FileLock& operator=(FileLock&& o) noexcept;
  ~FileLock();
  /// Removes the lock file while still holding the lock (a container whose attachments are all
  /// gone), so lock files do not accumulate; lock_file() retries when its file was unlinked.
  void unlink_path();

 private:
  int fd_ = -1;
  std::string path_;
};

/// Takes an exclusive flock on `path` (created 0600 if missing), blocking, and verifies the path
/// still names the locked file (holders unlink it when done). On a read-only filesystem an
/// existing lock file is opened read-only. Errors: errno naming the path.
[[nodiscard]] Result<FileLock> lock_file(const std::string& path);

/// A state directory (default /var/lib/cni/plumb).
class StateDir {
 public:
  explicit StateDir(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }

  /// Serialises operations on one container (spec 7.3): flock on <root>/locks/<containerID>.
  [[nodiscard]] Result<FileLock> lock_container(const std::string& container_id) const;
  /// Writes the record atomically to <root>/containers/<id>/<index>-<ifname>.json.
  [[nodiscard]] Status write(const AttachmentRecord& rec) const;
  /// All records of a container, ordered by index, removing temporary files a killed writer left
  /// (call with the container lock held). A container without records gives an empty list. Errors: I/O or decode errors naming the file.
  [[nodiscard]] Result<std::vector<AttachmentRecord>> read(const std::string& container_id) const;
  /// Removes one record (missing is fine) and the container directory once it is empty.
  [[nodiscard]] Status remove(const AttachmentRecord& rec) const;
  /// Container IDs that have a record directory or a lock file (GC bounds both).
  [[nodiscard]] Result<std::vector<std::string>> containers() const;

  /// <root>/containers/<id>/<index>-<ifname>.json, the record's file (named in errors).
  [[nodiscard]] std::string record_path(const AttachmentRecord& rec) const;
  /// <root>/containers/<id>.<index>-<ifname>.json.tmp.spare: the file the journal's versions of
  /// the record are written through while an ADD runs (write_via_spare); gone once it is complete.
  [[nodiscard]] std::string spare_path(const AttachmentRecord& rec) const;

 private:
  std::string root_;
};

/// Encodes/decodes a record (exposed for tests).
[[nodiscard]] std::string encode(const AttachmentRecord& rec);
[[nodiscard]] Result<AttachmentRecord> decode(std::string_view text, const std::string& origin);

}  // namespace plumb::state
