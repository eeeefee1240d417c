// The one way plumb runs another program (a CNI plugin it delegates to): posix_spawn of an
// absolute path (fork, chroot and execve when it runs in another root, which posix_spawn cannot
// do) — no shell, no PATH search — with exactly the environment given, every
// descriptor but stdin/stdout/stderr closed, default signal dispositions, its own process group,
// stdin written after the caller has recorded the child, stdout and stderr captured, and a
// deadline after which the whole process group is killed.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/base/result.hpp"

namespace plumb::process {

/// A started child: its pid (also its process group id) and its start time in clock ticks since
/// boot (/proc/<pid>/stat field 22), which tells it apart from a later process reusing the pid.
struct Child {
  pid_t pid = 0;
  uint64_t start_time = 0;
};

/// What to run.
struct SpawnRequest {
  std::string path;               ///< absolute path of the executable
  std::vector<std::string> argv;  ///< argv[0] first; empty = {path}
  std::vector<std::string> env;   ///< the child's whole environment, "KEY=value" each
  std::string stdin_data;         ///< written to the child's stdin, which is then closed
  /// The directory the child runs chrooted to, its working directory "/" there (Multus's
  /// chrootDir: a node's root mounted into plumb's container); `path` and every path the child
  /// opens are then resolved inside it. "" = plumb's own root.
  std::string root;
  std::chrono::milliseconds timeout{60000};  ///< whole run, stdin to exit; then SIGKILL to the group
  size_t max_output_bytes = 16u << 20;       ///< stdout (and stderr) beyond this ends the child
  /// Called once the child exists and before a byte of stdin is written: the caller records
  /// `Child` (write-ahead) so another process can end it if this one dies. A child that never
  /// gets its stdin sees EOF when this process dies. An error here kills the child and is
  /// returned.
  std::function<Status(const Child&)> on_started;
};

/// How the child ended.
struct Outcome {
  int exit_code = -1;      ///< exit status; -1 when killed by a signal
  int signal = 0;          ///< the signal that ended it, 0 if it exited
  bool timed_out = false;  ///< killed because the deadline passed
  std::string out;         ///< everything it wrote to stdout (up to max_output_bytes)
  std::string err;         ///< everything it wrote to stderr (up to max_output_bytes)
};

/// Runs the request to completion. A non-zero exit, a signal or the deadline are reported in
/// Outcome, not as errors. Errors: kIo naming the path when it cannot be spawned (errno kept;
/// ETXTBSY is retried 5 times 200 ms apart, as libcni does for a binary being replaced; naming
/// the root too when chroot into it fails), when a pipe fails or when the output exceeds
/// max_output_bytes; on_started's error.
[[nodiscard]] Result<Outcome> run(const SpawnRequest& req);

/// The start time of process `pid` (see Child), nullopt when there is no such process.
/// Errors: kIo when /proc/<pid>/stat cannot be parsed.
[[nodiscard]] Result<std::optional<uint64_t>> start_time(pid_t pid);

/// Ends what is left of a child recorded by another (killed) process: when `child.pid` still
/// names the process that started at `child.start_time`, its process group gets SIGKILL and this
/// waits (at most `wait`) until it is gone or a zombie. Anything else (gone, pid reused) is
/// success. Errors: kKernel when it outlives `wait`.
[[nodiscard]] Status end_orphan(const Child& child, std::chrono::milliseconds wait);

}  // namespace plumb::process
