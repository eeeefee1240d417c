// The bench's harness: clocks, files, the progress line, child processes timed from posix_spawn
// to wait4 (with their rusage), and the namespaces the whole run lives in. Nothing here knows
// about scenarios or ways (bench.hpp); errors are exceptions (the bench stops at the first one).
#pragma once

#include <sys/wait.h>

#include <rapidjson/document.h>

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/base/result.hpp"
#include "engine/base/netns.hpp"

namespace bench {

/// CLOCK_MONOTONIC in nanoseconds.
int64_t now_ns();
/// A whole file ("" if it cannot be read).
std::string read_text(const std::string& path);
/// Writes `data` to `path` (parent directories created). Throws on failure.
void write_text(const std::string& path, const std::string& data);
/// Writes `value` to a /proc file (sysctls). Throws naming the path.
void write_proc(const std::string& path, const char* value);
/// `v` with `decimals` digits after the point ("%.*f").
std::string fmt(int decimals, double v);
/// Compact JSON text of `v`.
std::string json_dump(const rapidjson::Value& v);

/// The value of a plumb Result, or a runtime_error "<what>: <error>".
template <class T>
T must(plumb::Result<T> r, const std::string& what) {
  if (!r) throw std::runtime_error(what + ": " + r.error().text());
  return std::move(*r);
}

/// Progress line on stderr: rewritten in place on a terminal, one line every 10 s otherwise.
class Progress {
 public:
  Progress();
  /// Shows `text` (rate-limited unless `force`).
  void set(const std::string& text, bool force = false);
  /// Prints `text` on a line of its own.
  void line(const std::string& text);
  [[nodiscard]] int64_t elapsed_ns() const;
  /// The text last given to set(), shown or not: what the run was doing.
  std::string current();

 private:
  std::mutex mu_;
  std::string current_;
  bool tty_;
  int64_t start_;
  int64_t last_ = 0;
};

/// One child process's outcome.
struct Proc {
  int status = -1;          ///< raw wait status
  int64_t wall_ns = 0;      ///< posix_spawn .. wait4 return
  long maxrss_kib = 0;      ///< ru_maxrss: the child's peak RSS (its waited-for descendants included)
  int64_t cpu_us = 0;       ///< user + system CPU of the child and its waited-for descendants
  std::string out, err;
  std::string command, input;  ///< for a child that failed: its environment and argv, its stdin
  [[nodiscard]] bool ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
  /// "exit N" / "signal N" with the command, its stdin, stdout and stderr, for error messages.
  [[nodiscard]] std::string describe() const;
};

/// `env` (PATH left out) and `argv` as one shell-like line, for error messages.
std::string command_line(const std::vector<std::string>& argv, const std::vector<std::string>& env);
/// Runs argv[0] (a path, no PATH search) with exactly `env`, `input` on its stdin, and collects
/// stdout/stderr. Timed from just before posix_spawn to wait4's return. Throws if it cannot start.
Proc spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& input);

/// A program left running beside the bench (`plumb daemon` in --thick runs), in a process group
/// of its own, ended with everything it started by stop() or the destructor (SIGTERM to the
/// group, then SIGKILL when some of it has not exited within 10 s) or by a signal that ends the
/// bench (SIGINT, SIGTERM, SIGHUP: passed on to the group as SIGTERM).
class Background {
 public:
  Background() = default;
  ~Background() { stop(); }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  /// Starts argv[0] (a path) with exactly `env`, stdin /dev/null, stdout and stderr appended to
  /// `log_path`, in the calling thread's namespaces. Throws if it cannot start.
  void start(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& log_path);
  void stop();
  [[nodiscard]] bool running() const { return pid_ > 0; }
  /// CPU time the program's main thread (or with `all_threads`, all its threads) has run
  /// (/proc/<pid>/[task/<tid>/]schedstat), ns; its children not included.
  [[nodiscard]] int64_t cpu_ns(bool all_threads = false) const;

 private:
  pid_t pid_ = -1;
};

/// Enters `ns` for the calling thread until destruction.
class InNetns {
 public:
  explicit InNetns(const plumb::netns::Netns& ns);

 private:
  plumb::netns::Guard guard_;
};

/// Brings lo up in the current network namespace.
void lo_up();
/// Creates /run/netns/<name>: a new network namespace (made by this thread, which then returns to
/// where it was) with lo up and IPv6 duplicate address detection off for every interface (so no
/// way waits for a DAD timer: the reference macvlan plugin otherwise sleeps 1-2 s per ADD).
void create_netns(const std::string& name);
/// Unmounts and removes /run/netns/<name>.
void delete_netns(const std::string& name);
/// Leaves the machine's namespaces: new network and mount namespaces, mounts private, a tmpfs on
/// /run/netns, a private bpffs under `bpf_dir`. Must run before any thread exists.
void enter_private_root(const std::string& bpf_dir);

/// Where CNI plugins keep state by default (host-local's networks/, the reference's results/).
inline constexpr const char* kCniStateDir = "/var/lib/cni";
/// After enter_private_root: a tmpfs on /var/lib/cni in the bench's mount namespace, so plugins of
/// a user's conflist that keep state there by default write nothing on the machine. Returns true
/// when the directory did not exist and was created (main removes it again at the end).
bool private_cni_state();

}  // namespace bench
