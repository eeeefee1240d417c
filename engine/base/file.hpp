// Files plumb reads and writes itself (configs, manifests, tokens, sysctls, state records, status
// files), with errors that name the path. One implementation of each: read whole, write
// atomically, create a directory chain.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "engine/base/result.hpp"

namespace plumb {

/// Reads the whole file at `path` (at most max_bytes). `what` describes it for messages
/// ("CNI config", "sysctl net.ipv4.ip_forward"). Errors: msg "read <what> <path>"; code
/// kNotFound when the file does not exist (sys_errno ENOENT), kIo otherwise (errno kept, EFBIG
/// when larger than max_bytes).
[[nodiscard]] Result<std::string> read_file(const std::string& path, std::string_view what = {},
                                            size_t max_bytes = 16u << 20);

/// How write_atomic() creates the file.
struct WriteOptions {
  mode_t mode = 0600;  ///< permission bits of the new file, independent of the caller's umask
  bool fsync = false;  ///< fsync the data before the rename (survives power loss, costs a disk flush)
  /// Replace an existing file by renameat2(RENAME_EXCHANGE) and unlinking the old version rather
  /// than rename(2) over it, for files rewritten many times in a row (the journal's intents):
  /// ext4 flushes the new data at a rename over a file (auto_da_alloc) and frees the old one's
  /// blocks (a synchronous discard on a `discard` mount), 0.7-2 ms here; an exchange does
  /// neither, and a version unlinked before its writeback never had blocks (0.05 ms). Readers
  /// still see old or new. After a power loss the file may be empty rather than old or new.
  /// Without RENAME_EXCHANGE support (EINVAL) or an existing file, a plain rename.
  bool exchange = false;
};

/// Writes `data` to `path` atomically: a unique temporary file in the same directory
/// (O_EXCL|O_NOFOLLOW), then rename(2) over `path`, so readers see the old or the new content,
/// never a part. Errors: kIo with errno naming the path (ENOSPC, EROFS ...); the temporary file
/// is removed on failure.
[[nodiscard]] Status write_atomic(const std::string& path, std::string_view data, WriteOptions opts = {});

/// Creates `path` and its missing parents with `mode` (independent of the umask), like mkdir -p.
/// Errors: kIo with errno naming the component that failed; ENOTDIR when a component exists and
/// is not a directory.
[[nodiscard]] Status mkdir_p(const std::string& path, mode_t mode = 0700);

/// Names of the entries of directory `dir` (no "." or ".."), unsorted; a missing directory has
/// none. Errors: kIo with errno naming the directory.
[[nodiscard]] Result<std::vector<std::string>> list_dir(const std::string& dir);

}  // namespace plumb
