// Whether the directory of the daemon's socket can be trusted (sshd's StrictModes for a socket):
// whoever can write it can replace the socket runtimes connect to, and then read every CNI
// request (configs, pod names) and answer it. `plumb daemon` refuses to start in a directory that
// fails the check, and plumb-shim does not connect through one (it runs plumb itself instead).
// Header only, C library alone: plumb-shim (cni-entry/shim/shim.cpp) includes it.
#pragma once

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

namespace plumb::daemon_wire {

namespace socket_dir_detail {

/// Whether `st` (of `path`) is owned by root or `uid`, and not writable by its group or others
/// (`sticky_ok`: unless the sticky bit is set, as /tmp's: its entries are then only renamed or
/// removed by their owners). Otherwise writes the reason, naming `path`, to `why`.
inline bool trusted(const char* path, const struct stat& st, uid_t uid, bool sticky_ok, char* why, size_t cap) {
  if (!S_ISDIR(st.st_mode)) {
    snprintf(why, cap, "%.3000s is not a directory", path);
    return false;
  }
  if (st.st_uid != 0 && st.st_uid != uid) {
    snprintf(why, cap, "%.3000s is owned by uid %u, not by root or uid %u", path, static_cast<unsigned>(st.st_uid),
             static_cast<unsigned>(uid));
    return false;
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !(sticky_ok && (st.st_mode & S_ISVTX) != 0)) {
    snprintf(why, cap, "%.3000s is writable by its group or others (mode %04o)", path, static_cast<unsigned>(st.st_mode & 07777));
    return false;
  }
  return true;
}

}  // namespace socket_dir_detail

/// What socket_dir_trust found.
enum class DirTrust { kTrusted, kUntrusted, kMissing };

/// Whether the directory holding the unix socket `socket_path` is one only root and `uid` can
/// change: the directory (its real path, symbolic links resolved) owned by root or `uid` and not
/// writable by group or others, and each directory above it owned by root or `uid` and not
/// writable by group or others unless sticky. kMissing when the directory (or one above it) does
/// not exist: no daemon can listen there. Unless kTrusted, `why` (of `cap` bytes) says which
/// directory and why; a directory that cannot be resolved or read otherwise is kUntrusted.
inline DirTrust socket_dir_trust(const char* socket_path, uid_t uid, char* why, size_t cap) {
  char dir[PATH_MAX];
  const char* slash = strrchr(socket_path, '/');
  if (slash == nullptr) {
    memcpy(dir, ".", 2);
  } else {
    const size_t len = slash == socket_path ? 1 : static_cast<size_t>(slash - socket_path);
    if (len >= sizeof dir) {
      snprintf(why, cap, "the directory of %.3000s is too long a path", socket_path);
      return DirTrust::kUntrusted;
    }
    memcpy(dir, socket_path, len);
    dir[len] = '\0';
  }
  char real[PATH_MAX];
  if (realpath(dir, real) == nullptr) {
    const int err = errno;
    snprintf(why, cap, "%.3000s cannot be resolved: %s", dir, strerror(err));
    return err == ENOENT || err == ENOTDIR ? DirTrust::kMissing : DirTrust::kUntrusted;
  }
  for (bool first = true;; first = false) {
    struct stat st{};
    if (stat(real, &st) != 0) {
      snprintf(why, cap, "%.3000s: %s", real, strerror(errno));
      return DirTrust::kUntrusted;
    }
    if (!socket_dir_detail::trusted(real, st, uid, !first, why, cap)) return DirTrust::kUntrusted;
    char* up = strrchr(real, '/');
    if (up == nullptr || (up == real && real[1] == '\0')) return DirTrust::kTrusted;  // "/" checked
    up[up == real ? 1 : 0] = '\0';
  }
}

}  // namespace plumb::daemon_wire
