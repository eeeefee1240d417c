// plumb's on-node state: one record per attachment, written atomically (temp file + rename) under
// <root>/containers/<containerID>:<ifname>/ — the attachments of one CNI invocation, keyed by
// (CNI_CONTAINERID, CNI_IFNAME) as the CNI spec identifies an attachment — and one lock file per
// key under <root>/locks/. Records are written ahead of every kernel change (see txn::Journal),
// so a DEL after a crash finds everything the ADD may have done.
//
// Every record is verifiable as a whole (format 3: its length and checksum written last) and is
// read through engine/base/file's Dir: never through a symbolic link, only from a regular file,
// bounded in size and nesting. A record that fails any check is a DamagedRecord: reported by path,
// never trusted, moved to <root>/quarantine/ by the verb that gives up on it.
//
// Records of older plumbs stay readable: format 1 (no "format" key) and 2 (adds "format",
// "ipamOwner"), which sit in one directory per container (<root>/containers/<containerID>/, the
// "legacy" directory, under the lock <root>/locks/<containerID>); they belong to the key whose
// ifname their index-0 record names (its file "0-<ifname>.json").
#pragma once

#include <map>
#include <optional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/file.hpp"
#include "engine/base/json.hpp"
#include "engine/base/recycler.hpp"
#include "engine/base/result.hpp"

namespace plumb::state {

/// The record format this plumb writes: 3 adds "cniIfname" and the "integrity" trailer.
/// Formats 1 and 2 are read (see the file comment).
inline constexpr int kRecordFormat = 3;
/// Records are small (a few KiB); anything larger is not one of ours.
inline constexpr size_t kMaxRecordBytes = 4u << 20;
/// Records embed configs, results and device-info read with json::kMaxDepth a few levels down.
inline constexpr unsigned kRecordMaxDepth = 2 * json::kMaxDepth;

/// The attachments of one CNI invocation: (CNI_CONTAINERID, CNI_IFNAME).
struct Key {
  std::string container_id;
  std::string ifname;  ///< CNI_IFNAME; "" only for a legacy directory whose owner is unknown
  /// "<containerID>:<ifname>", the name of its record directory and lock file (':' is allowed in
  /// neither a container ID nor an interface name).
  [[nodiscard]] std::string name() const { return container_id + ":" + ifname; }
  /// "container <id> interface <ifname>", for messages.
  [[nodiscard]] std::string describe() const;
  bool operator==(const Key&) const = default;
  bool operator<(const Key& o) const { return name() < o.name(); }
};

/// One attachment of one container.
struct AttachmentRecord {
  int format = kRecordFormat;    // the format it was read in (written: always kRecordFormat)
  std::string container_id;
  std::string cni_ifname;        // CNI_IFNAME of the invocation that made it (its key's ifname)
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
  json::Document extra;          // members this plumb does not know (a newer plumb's): an object, written back unchanged; null: none
  std::string origin;            // the file it was read from or written to (not encoded)

  [[nodiscard]] Key key() const { return Key{container_id, cni_ifname}; }
};

/// A record that cannot be trusted: its path and why (kDecode: damaged — not a regular file, too
/// large, not JSON, not whole, a field of the wrong type; kNewerRecord: written by a newer plumb).
struct DamagedRecord {
  std::string path;
  Error error;
};

/// What read() found for one key: the usable records ordered by index, and the damaged ones.
struct Records {
  std::vector<AttachmentRecord> records;
  std::vector<DamagedRecord> damaged;
  [[nodiscard]] bool empty() const { return records.empty() && damaged.empty(); }
};

/// Holds an exclusive flock on a lock file until destroyed (closing the descriptor drops it).
class FileLock {
 public:
  FileLock() = default;
  /// Holds the locked descriptor `fd` (owned from now on) of file `name` in the directory `dir`,
  /// which it keeps open (shared).
  FileLock(int fd, std::shared_ptr<const Dir> dir, std::string name)
      : fd_(fd), dir_(std::move(dir)), name_(std::move(name)) {}
  /// Removes the lock file while still holding the lock (nothing left to serialise), so lock
  /// files do not accumulate; lock_file() retries when its file was unlinked. Relative to the
  /// directory the lock was taken in (unlinkat), never through a link planted since.
  void unlink_path();
  /// unlink_path(), the file moved into `pool` instead (engine/base/recycler.hpp).
  void recycle_path(Recycler& pool);

 private:
  /// The descriptor of the directory the lock was taken in (-1: none).
  [[nodiscard]] int dir_fd() const { return dir_ ? dir_->fd() : -1; }

  UniqueFd fd_;
  std::shared_ptr<const Dir> dir_;
  std::string name_;
};

/// Takes an exclusive flock on `name` in `dir` (created 0600 if missing, never through a link),
/// blocking, and verifies the name still names the locked file (holders unlink it when done).
/// The lock keeps `dir` open (shared: no descriptor of its own). Errors: errno naming the path.
[[nodiscard]] Result<FileLock> lock_file(std::shared_ptr<const Dir> dir, const std::string& name);

/// The locks of one key: its own and, while a legacy directory of its container exists, that
/// directory's lock (the one older plumbs take).
struct KeyLock {
  FileLock own;
  std::optional<FileLock> legacy;
};

/// A state directory (default /var/lib/cni/plumb).
class StateDir {
 public:
  /// The state directory at `root`; in a daemon worker, the directories its earlier
  /// invocations opened there (engine/base/file.hpp, invocations).
  explicit StateDir(std::string root);
  const std::string& root() const { return root_; }

  /// Serialises operations on one key (spec 7.3): flock on <root>/locks/<key name>, then the
  /// legacy lock of its container when a legacy directory exists.
  [[nodiscard]] Result<KeyLock> lock(const Key& key) const;
  /// Writes the record atomically to <root>/containers/<key name>/<index>-<ifname>.json and sets
  /// rec.origin.
  [[nodiscard]] Status write(AttachmentRecord& rec) const;
  /// The records of a key (call with its lock held), ordered by index, each checked whole;
  /// removes temporary files a killed writer left. Errors: only when the state directory itself
  /// cannot be read (each bad record is in Records::damaged instead).
  [[nodiscard]] Result<Records> read(const Key& key) const;
  /// True when container `container_id` has a record (or a damaged one) under any key; an empty
  /// record directory (an ADD killed before its first record) is none.
  [[nodiscard]] bool has_records(const std::string& container_id) const;
  /// Removes one record (missing is fine) and its directory once empty (both into the recycled
  /// files).
  [[nodiscard]] Status remove(const AttachmentRecord& rec) const;
  /// Moves a damaged record (or a directory where a record should be) to
  /// <root>/quarantine/<key name>/<file name>[.<n>], so nothing it described is forgotten and
  /// the key can be removed. Returns the new path. Errors: I/O naming both paths.
  [[nodiscard]] Result<std::string> quarantine(const Key& key, const std::string& path) const;
  /// Removes the key's lock files and its record directory when it has no records left (call
  /// holding `lock`); its own lock file and the directory go to the recycled files.
  void release(KeyLock& lock, const Key& key) const;
  /// Every key that has a record directory or a lock file (GC bounds both), sorted.
  [[nodiscard]] Result<std::vector<Key>> keys() const;

  /// Where write() puts the record (named in errors).
  [[nodiscard]] std::string record_path(const AttachmentRecord& rec) const;

 private:
  /// The directory of the key write() wrote last, kept open across the journal's versions of
  /// one ADD (otherwise each version opens the root, containers/ and the key's directory).
  struct KeyDirCache {
    std::string name;
    Dir dir;
    std::map<std::string, SpareFds> spares;  ///< record file name -> its write_via_spare descriptors
    /// The record directory remove() took away last (empty: recycled or removed), until a write
    /// opens a key's directory again: release() of that key has nothing left to read.
    std::string emptied;
  };
  /// A directory opened by open_dir() and its identity, to tell a later invocation of a worker
  /// whether its name still names it.
  struct OpenDir {
    explicit OpenDir(Dir d) : dir(std::move(d)), id(dir.fd()) {}
    Dir dir;
    KeptIdentity id;
  };
  /// The root and the subdirectories opened so far, kept for the StateDir's life (one
  /// invocation; a daemon worker's invocations share them): each operation otherwise opens them
  /// again by path.
  struct OpenDirs {
    std::optional<OpenDir> root;
    std::map<std::string, std::shared_ptr<OpenDir>, std::less<>> subs;  ///< shared with the FileLocks taken in them
  };
  /// <root>/<sub> (sub "": the root), opened once per invocation, or in a daemon worker once
  /// while its name still names it (checked once per invocation); again when the root was found
  /// removed, its link count 0, as another subdirectory or the root itself is opened. Created
  /// (0700) with `create`; nullptr when missing and not `create`.
  /// Errors: the I/O error naming the path.
  [[nodiscard]] Result<const Dir*> open_dir(std::string_view sub, bool create) const;
  /// open_dir(sub, true), owned shared (a FileLock holds it).
  [[nodiscard]] Result<std::shared_ptr<const Dir>> shared_dir(std::string_view sub) const;
  /// The directory holding `path` (a record written below <root>/containers) and the file's
  /// name there.
  [[nodiscard]] Result<std::pair<Dir, std::string>> containing_dir(const std::string& path) const;
  /// The key's record directory (created when missing): the cached one while it still exists.
  [[nodiscard]] Result<const Dir*> key_dir(const Key& key) const;
  /// <root>/recycled/ (created when missing): the files records, spares and lock files, and the
  /// directories of keys, are claimed from and go back to instead of new inodes and unlinks
  /// (engine/base/recycler.hpp), one Recycler per path and invocation (Recycler::shared).
  /// Without it (cannot be opened), a Recycler without a pool: files are created and unlinked.
  [[nodiscard]] Recycler& recycled() const;

  std::string root_;
  mutable std::shared_ptr<OpenDirs> open_ = std::make_shared<OpenDirs>();  // shared by copies: they name the same root
  mutable std::shared_ptr<KeyDirCache> key_dir_;  // shared by copies
};

/// Encodes a record in format kRecordFormat, its integrity trailer last (exposed for tests).
[[nodiscard]] std::string encode(const AttachmentRecord& rec);
/// Decodes and checks a record. Errors: kDecode naming `origin` and what is wrong (not JSON,
/// nested too deep, integrity check failed, a field missing or of the wrong type); kNewerRecord
/// for a format above kRecordFormat.
[[nodiscard]] Result<AttachmentRecord> decode(std::string_view text, const std::string& origin);

}  // namespace plumb::state
