// Files plumb no longer needs, kept in one directory of the same filesystem to be renamed into
// place later instead of creating new inodes and freeing old ones.
//
// Why: a pod's ADD and DEL create and delete a dozen small files (state records and their
// spares, a lock file). On ext4 without a journal every new inode is found by a scan that reads
// past each inode deleted in its block group within the last 30 seconds (`recently_deleted` in
// fs/ext4/ialloc.c: 30% of a thick worker's CPU in scenario c of the bench), and on a `discard`
// mount every freed block is discarded before unlink returns (0.17-0.35 ms per record). A rename
// costs neither. Nothing reads a pooled file: its content is garbage until its new owner rewrites
// it, so only files whose content is written before anyone trusts it are claimed (spares, which
// are never read; lock files, whose content is never read), and empty directories.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/file.hpp"
#include "engine/base/result.hpp"

namespace plumb {

class Recycler {
 public:
  /// How many files a pool keeps at most (4 KiB each on ext4: 1 MiB); more are unlinked.
  static constexpr size_t kMaxFiles = 256;

  /// No pool: claim() finds nothing, recycle() unlinks, keep() does nothing.
  Recycler() = default;
  /// The pool directory `pool` (plumb's own, mode 0700), of the filesystem of the directories
  /// it trades with (a rename across filesystems fails: recycle() then unlinks).
  explicit Recycler(Dir pool, size_t max_files = kMaxFiles) : pool_(std::move(pool)), max_files_(max_files) {}
  /// The Recycler of the pool directory `name` in `parent` (created 0700; without a pool when it
  /// cannot be), one per path in this process until release_shared(): the stores of several
  /// networks of one dataDir open and list their pool once, not once each. A daemon worker keeps
  /// it across invocations (engine/base/file.hpp, invocations): its pool's descriptor, its
  /// listing and its check for this pid's leftover. Checked once per later invocation that
  /// `name` in `parent` still names the pool (one fstatat), else opened and listed again (a pool
  /// removed or replaced by an administrator is let go). A kept listing may be stale: a name
  /// another process took fails to move (the next is tried), and a claim that runs out lists
  /// once more.
  [[nodiscard]] static Recycler& shared(const Dir& parent, std::string_view name);
  /// The same by the parent's path (opened only when the path is not known yet; a parent that
  /// cannot be opened: a Recycler without a pool); a worker's later invocation checks the whole
  /// path "<parent_path>/<name>".
  [[nodiscard]] static Recycler& shared(const std::string& parent_path, std::string_view name);
  /// Forgets every shared() Recycler, closing their pools (none may be in use).
  static void release_shared();

  /// Renames a pooled regular file (one link) to `name` in `to`, which must not exist
  /// (RENAME_NOREPLACE), and returns true; its mode, size and content are whatever it had, for
  /// the caller to rewrite. False when the pool has none, or `name` exists already (then nothing
  /// was moved). A pooled entry that is not a regular file of one link is removed on the way.
  [[nodiscard]] bool claim(const Dir& to, std::string_view name);
  /// Creates `name` in `to` holding `data` (mode `mode`) from a pooled file, whole or not at all,
  /// like Dir::create_whole: the file is renamed to a name of its own in the pool (claiming it),
  /// written there, then renamed to `name` (RENAME_NOREPLACE). True when placed; false when
  /// `name` exists (taken: the written file stays pooled); nullopt when the pool has no file or
  /// the last rename failed otherwise (the caller creates the file). A plumb killed half-way leaves
  /// only a pooled file. Errors: kIo naming the pooled file when it cannot be written.
  [[nodiscard]] Result<std::optional<bool>> place(const Dir& to, std::string_view name, std::string_view data, mode_t mode);
  /// Moves the regular file `name` (one link) out of the directory open as `from_fd` into the
  /// pool; unlinks it when the pool is full, or it is something else, or the move fails. A
  /// missing `name` is fine. Errors: kIo naming `from_path`/`name` when it cannot be unlinked.
  [[nodiscard]] Status recycle(int from_fd, const std::string& from_path, std::string_view name);
  [[nodiscard]] Status recycle(const Dir& from, std::string_view name) { return recycle(from.fd(), from.path(), name); }
  /// Renames a pooled empty directory to `name` in `to` (RENAME_NOREPLACE) and returns it, opened
  /// (O_NOFOLLOW: the one found empty there); nullopt when the pool has none or `name` exists
  /// (nothing moved). A pooled directory that is not empty is left where it is.
  [[nodiscard]] std::optional<Dir> claim_dir(const Dir& to, std::string_view name);
  /// Moves the directory `name` of `from` into the pool when it is empty and returns true; false
  /// (nothing done: the caller removes it as before) when it is not an empty directory, the pool
  /// is full or the move fails. Only while nothing else writes into it (the caller's lock).
  [[nodiscard]] bool recycle_dir(const Dir& from, std::string_view name);
  /// Links the regular file `name` of `from` (one link) into the pool as well, just before a
  /// rename over `name` would free it: the rename then leaves the old file in the pool. A claim
  /// made while both links exist sees two links and discards its name (never writes into a
  /// file that is still `name`). Best effort: nothing happens when it cannot be linked.
  void keep(const Dir& from, std::string_view name);

 private:
  /// Renames the next pooled regular file of one link (with `dir`: empty directory) to
  /// `to_name` in `to` and returns true; false when there is none or `to_name` exists (claim(),
  /// claim_dir() and place() share it). With `dir`, `opened` (when given) gets the directory.
  [[nodiscard]] bool take(const Dir& to, const std::string& to_name, bool dir, std::optional<Dir>* opened = nullptr);
  /// Gives the pool's entry `own` (place()'s name of this process) back to the candidates under
  /// its inode number, as recycle() names files; false when there is no such entry.
  bool repool(const std::string& own);
  /// Fills candidates_ from the pool's entries (once per Recycler, and again when a claim ran
  /// out of the names it knew, or found none in a later invocation than the listing's).
  void list();
  /// Lists the pool unless listed already; again when its count from an earlier invocation says
  /// it is (nearly) full.
  void count();

  std::optional<Dir> pool_;
  size_t max_files_ = kMaxFiles;
  std::vector<std::string> candidates_;  ///< regular files believed to be in the pool (stale ones fail to move)
  std::vector<std::string> dir_candidates_;  ///< directories believed to be in the pool
  size_t pooled_ = 0;                    ///< the pool's size as last listed, plus and minus our own moves
  bool listed_ = false;
  uint64_t listed_in_ = 0;  ///< the invocation (invocations::current()) that listed it last
  bool repooled_ = false;  ///< place() gave a leftover of this pid's name back (once: later ones are its own)
};

}  // namespace plumb
