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
};

/// Writes `data` to `path` atomically: a unique temporary file in the same directory
/// (O_EXCL|O_NOFOLLOW), then rename(2) over `path`, so readers see the old or the new content,
/// never a part. Errors: kIo with errno naming the path (ENOSPC, EROFS ...); the temporary file
/// is removed on failure.
[[nodiscard]] Status write_atomic(const std::string& path, std::string_view data, WriteOptions opts = {});

/// Writes `data` to `path` atomically for readers, like write_atomic(), through the caller's
/// fixed temporary file `spare` (same directory), for a file rewritten many times in a row (the
/// journal's intents): `spare` is (re)used in place (written from offset 0, then cut to length:
/// never truncated to zero), then swapped with `path` by renameat2(RENAME_EXCHANGE), so it
/// holds the previous version for the next write. No new inode per write, no flush at the
/// rename and no freed blocks (ext4's auto_da_alloc flushes at a rename over a file and, on a
/// `discard` mount without journal, frees the old blocks with a synchronous discard: 0.7-2 ms
/// here; a new inode costs a scan past every recently deleted one). With `last`, the final
/// version: `spare` is renamed over `path` (ext4 then orders the data before the rename: old or
/// new after a power loss) and is gone afterwards. Intermediate versions may read empty after a
/// power loss. A crash leaves at most `spare` (callers remove it as a leftover).
/// Errors: kIo with errno naming the path.
[[nodiscard]] Status write_via_spare(const std::string& path, const std::string& spare, std::string_view data, mode_t mode,
                                     bool last);

/// Creates `path` and its missing parents with `mode` (independent of the umask), like mkdir -p.
/// Errors: kIo with errno naming the component that failed; ENOTDIR when a component exists and
/// is not a directory.
[[nodiscard]] Status mkdir_p(const std::string& path, mode_t mode = 0700);

/// Names of the entries of directory `dir` (no "." or ".."), unsorted; a missing directory has
/// none. Errors: kIo with errno naming the directory.
[[nodiscard]] Result<std::vector<std::string>> list_dir(const std::string& dir);

}  // namespace plumb
