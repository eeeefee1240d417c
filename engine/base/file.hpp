// Files plumb reads and writes itself (configs, manifests, tokens, sysctls, state records, status
// files), with errors that name the path. One implementation of each: read whole, write
// atomically, create a directory chain, and Dir: everything plumb creates or writes below a
// directory it owns (stateDir, storeDir, host-local's dataDir, the device-info directory),
// relative to a directory descriptor and never through a symbolic link.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/base/result.hpp"

namespace plumb {

/// Reads the whole file at `path` (at most max_bytes). `what` describes it for messages
/// ("CNI config", "sysctl net.ipv4.ip_forward"). The path may go through symbolic links (configs,
/// kubeconfigs and tokens are often links), but only a regular file is read: a FIFO or device is
/// refused without blocking. Errors: msg "read <what> <path>"; code kNotFound when the file does
/// not exist (sys_errno ENOENT), kIo otherwise (errno kept, EFBIG when larger than max_bytes,
/// EINVAL when not a regular file). `stat_out`, when given, gets the fstat() of the file read.
[[nodiscard]] Result<std::string> read_file(const std::string& path, std::string_view what = {},
                                            size_t max_bytes = 16u << 20, struct stat* stat_out = nullptr);

/// How write_atomic() creates the file.
struct WriteOptions {
  mode_t mode = 0600;  ///< permission bits of the new file, independent of the caller's umask
  bool fsync = false;  ///< fsync the data before the rename (survives power loss, costs a disk flush)
  /// Dir::write_atomic's temporary file, named by a caller whose lock keeps every other writer
  /// of that file out (a killed writer's leftover there is replaced, and a remover finds it by
  /// name instead of listing the directory); empty: "<name>.tmp.<16 hex digits>".
  std::string_view locked_tmp = {};
};

/// Writes `data` to `path` atomically (Dir::write_atomic in the parent directory): readers see
/// the old or the new content, never a part. Errors: kIo with errno naming the path.
[[nodiscard]] Status write_atomic(const std::string& path, std::string_view data, WriteOptions opts = {});

/// Creates `path` and its missing parents with `mode` (independent of the umask), like mkdir -p.
/// Errors: kIo with errno naming the component that failed; ENOTDIR when a component exists and
/// is not a directory.
[[nodiscard]] Status mkdir_p(const std::string& path, mode_t mode = 0700);

/// Names of the entries of directory `dir` (no "." or ".."), unsorted; a missing directory has
/// none. Errors: kIo with errno naming the directory.
[[nodiscard]] Result<std::vector<std::string>> list_dir(const std::string& dir);

/// An owned file descriptor, closed when destroyed (-1: none). Movable.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();
  [[nodiscard]] int get() const { return fd_; }
  /// Gives up ownership: returns the descriptor, which the caller closes.
  [[nodiscard]] int release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

/// The descriptors Dir::write_via_spare() keeps between the writes of one file: the file at
/// `name` and the file at `spare` (-1: not held; opened by name when needed), with the byte
/// count each holds. Closed when destroyed.
struct SpareFds {
  UniqueFd named;
  UniqueFd spare;
  off_t named_bytes = 0;
  off_t spare_bytes = 0;
};

/// A directory plumb owns, held by a descriptor opened O_DIRECTORY|O_NOFOLLOW. Every name given
/// to its members is one path component (no '/', not "." or ".."), opened relative to the
/// descriptor with O_NOFOLLOW: a symbolic link planted where plumb reads or writes a file or a
/// directory is an error naming the path (ELOOP, "is a symbolic link"), never followed. Files
/// and directories are created with the mode asked for, whatever the caller's umask. The
/// configured base directory itself (opened by open()) is an administrator's path and may be
/// reached through links in its parents.
class Dir {
 public:
  /// One entry of list().
  struct Entry {
    std::string name;
    unsigned char type;  ///< DT_REG, DT_DIR, DT_LNK, ... (DT_UNKNOWN resolved with fstatat)
  };

  Dir() = default;

  /// Opens the directory `path` (its last component not a symbolic link); with `create_mode`,
  /// creates it and its missing parents with that mode when it is missing. Errors: kNotFound when missing
  /// and not created; kIo naming the path (ELOOP for a symbolic link, ENOTDIR).
  [[nodiscard]] static Result<Dir> open(const std::string& path, std::optional<mode_t> create_mode = std::nullopt);

  /// The subdirectory `name`, created with `create_mode` when given and missing. Errors as open().
  [[nodiscard]] Result<Dir> sub(std::string_view name, std::optional<mode_t> create_mode = std::nullopt) const;
  /// Reads the regular file `name` whole (O_NOFOLLOW|O_NONBLOCK: a link, FIFO, device or
  /// directory is refused without blocking; at most max_bytes). Errors: kNotFound when missing;
  /// kIo naming the path with errno ELOOP (link), EINVAL (not a regular file), EFBIG (too large).
  [[nodiscard]] Result<std::string> read(std::string_view name, std::string_view what, size_t max_bytes) const;
  /// Replaces `name` atomically: a new temporary file "<name>.tmp.<16 hex>" (or
  /// opts.locked_tmp; O_EXCL|O_NOFOLLOW, opts.mode), then renameat(2) over `name`; when `name`
  /// does not exist yet, an unnamed file linked in place instead (create_whole: no temporary name
  /// to create, rename and leave behind).
  /// Errors: kIo naming the path (ELOOP when a link is at `name`: refused, never followed); the
  /// temporary file is removed on failure.
  [[nodiscard]] Status write_atomic(std::string_view name, std::string_view data, WriteOptions opts = {}) const;
  /// Writes `data` over the regular file `name` (created with `mode` if missing) from offset 0,
  /// then cuts it to length: no new inode, and no O_TRUNC (ext4 flushes a file truncated to zero
  /// at close and, on a `discard` mount, frees the old blocks synchronously). Not atomic for
  /// readers: for small files whose torn version is harmless. Errors: kIo naming the path (ELOOP
  /// for a link, EINVAL when not a regular file).
  [[nodiscard]] Status write_in_place(std::string_view name, std::string_view data, mode_t mode) const;
  /// Replaces `name` atomically for readers, like write_atomic(), through the caller's fixed
  /// spare file `spare` in this directory, for a file rewritten many times in a row (the
  /// journal's intents): `spare` is written in place (write_in_place), then swapped with `name`
  /// by renameat2(RENAME_EXCHANGE), so it holds the previous version for the next write. No new
  /// inode per write, no flush at the rename and no freed blocks (0.7-2 ms per write on this
  /// journal-less ext4; a new inode costs a scan past every recently deleted one). With `last`,
  /// the final version: `spare` is renamed over `name` (ext4 then orders the data before the
  /// rename: old or new after a power loss) and is gone afterwards. Intermediate versions may
  /// read empty after a power loss; a crash leaves at most `spare` (callers remove it).
  /// With `held` (the caller keeps it between the writes of one file), the descriptors of both
  /// files stay open across calls, so a write opens nothing once both were opened (the intents
  /// of one ADD); after a rename (`last`, or no `name` yet) the file written stays held as
  /// `name`'s. Only while nothing else renames or replaces `name` or `spare` (the caller's
  /// lock). Errors: kIo naming the path (ELOOP when a link is at `spare`).
  [[nodiscard]] Status write_via_spare(std::string_view name, std::string_view spare, std::string_view data, mode_t mode,
                                       bool last, SpareFds* held = nullptr) const;
  /// Creates `name` holding `data` once (O_CREAT|O_EXCL|O_NOFOLLOW, opts.mode; with opts.fsync,
  /// the data is flushed before it returns). Errors: sys_errno EEXIST (code kConflict) when
  /// anything, a link included, is there; kIo otherwise (the partial file removed).
  [[nodiscard]] Status create_exclusive(std::string_view name, std::string_view data, WriteOptions opts) const;
  /// Creates `name` holding `data` whole or not at all, even when plumb is killed half-way (never
  /// an empty or partial file at `name`): the data is written to an unnamed file (O_TMPFILE,
  /// opts.mode, flushed with opts.fsync) that linkat(2) then names, so nothing is left behind on
  /// a crash. Where the filesystem has no unnamed files, through the caller's named temporary
  /// `fallback_tmp` in this directory (removed first, created, linked to `name`, removed).
  /// Returns false when `name` exists (anything, a link included: taken). Errors: kIo naming the
  /// path.
  [[nodiscard]] Result<bool> create_whole(std::string_view name, std::string_view data, WriteOptions opts,
                                          std::string_view fallback_tmp) const;
  /// Links the existing file `from` (in this directory) as `to`: false when `to` exists (taken).
  [[nodiscard]] Result<bool> link_new(std::string_view from, std::string_view to) const;
  /// Opens (creating with `mode` if missing) the lock file `name` for flock(2); read-only on a
  /// read-only filesystem. Returns the descriptor (O_CLOEXEC). Errors: kIo naming the path.
  [[nodiscard]] Result<int> open_lock(std::string_view name, mode_t mode = 0600) const;
  /// Removes file `name`; a missing one is fine. Errors: kIo naming the path.
  [[nodiscard]] Status remove(std::string_view name) const;
  /// Removes the empty directory `name`: true when removed or missing, false when not empty.
  [[nodiscard]] Result<bool> remove_dir(std::string_view name) const;
  /// Moves `name` to `to_name` in `to` (renameat2 with RENAME_NOREPLACE). Errors: kIo (EEXIST
  /// when taken).
  [[nodiscard]] Status move(std::string_view name, const Dir& to, std::string_view to_name) const;
  /// lstat of `name` (a link is described, not followed); nullopt when missing.
  [[nodiscard]] Result<std::optional<struct stat>> stat(std::string_view name) const;
  /// The entries (no "." or "..").
  [[nodiscard]] Result<std::vector<Entry>> list() const;

  [[nodiscard]] int fd() const { return fd_.get(); }
  [[nodiscard]] const std::string& path() const { return path_; }
  /// "<path>/<name>", for messages.
  [[nodiscard]] std::string path_of(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  Dir(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  [[nodiscard]] Status check_name(std::string_view name) const;
  /// create_whole() without the fallback: true when created, false when `name` exists, nullopt
  /// when this filesystem has no unnamed files or refuses to link one (use a named temporary).
  [[nodiscard]] Result<std::optional<bool>> link_unnamed(std::string_view name, std::string_view data, WriteOptions opts) const;
  /// write_in_place()'s opening: `name` created with `mode` if missing, a regular file with that
  /// mode; `size` gets its byte count.
  [[nodiscard]] Result<UniqueFd> open_in_place(std::string_view name, mode_t mode, off_t& size) const;
  /// write_in_place()'s writing into `fd` (the file `name`, holding `old_size` bytes).
  [[nodiscard]] Status rewrite(int fd, std::string_view name, std::string_view data, off_t old_size) const;

  UniqueFd fd_;
  std::string path_;
};

/// A daemon worker's invocations (cni-entry/daemon/worker.cpp). What a worker keeps open from one
/// invocation to the next (the state directory's subdirectories, recycling pools) is checked once
/// per invocation that its name still names it (KeptIdentity). An exec'd plumb serves one
/// invocation: it keeps nothing across and checks nothing.
namespace invocations {
/// Starts keeping across invocations (a daemon worker, once, before its first); `on` false
/// stops it (tests).
void keep_across(bool on = true);
/// True in a process that keeps (a daemon worker).
[[nodiscard]] bool keeping();
/// The number of the invocation being served (0 in a process that does not keep).
[[nodiscard]] uint64_t current();
/// The invocation ended: what is kept is checked again before its next use.
void next();
}  // namespace invocations

/// The identity (device, inode) of a directory kept open across a worker's invocations, to tell
/// whether the name it was opened by still names it: an administrator may have removed, moved or
/// replaced it since, and what the next invocation creates must land where that name leads now.
class KeptIdentity {
 public:
  KeptIdentity() = default;
  /// The identity of the directory open as `fd`, checked in the current invocation (one fstat,
  /// only in a process that keeps; `fd` -1: none, which no later invocation finds still named).
  explicit KeptIdentity(int fd);
  /// True when the directory may be used in this invocation: it was opened or checked in it, or
  /// `name` relative to the directory open as `at` (AT_FDCWD: `name` is a path) still names it,
  /// its last component not followed (one fstatat per invocation). False: drop it and open the
  /// name again.
  [[nodiscard]] bool still_named(int at, const std::string& name);

 private:
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  bool known_ = false;
  uint64_t checked_ = 0;  ///< the invocation that opened or last checked it
};

/// True when `name` can be one path component plumb creates: 1..255 bytes, no '/' or NUL, not
/// "." or "..".
[[nodiscard]] bool is_path_component(std::string_view name);

}  // namespace plumb
