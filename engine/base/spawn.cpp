// Running another program (spawn.hpp): posix_spawn (fork + chroot + execve in another root), a poll loop over stdin/stdout/stderr with a
// deadline, and ending orphaned children by pid + start time.
#include "engine/base/spawn.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "engine/base/file.hpp"

namespace plumb::process {
namespace {

using Clock = std::chrono::steady_clock;

/// A descriptor closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    reset();
    fd_ = o.fd_;
    o.fd_ = -1;
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_ = -1;
};

/// The parent's ends and the child's ends of stdin (a socket pair: writes never raise SIGPIPE),
/// stdout and stderr (pipes). All created close-on-exec; the child gets its ends by dup2.
struct Channels {
  Fd in_parent, in_child, out_parent, out_child, err_parent, err_child;
};

Result<Channels> make_channels(const std::string& path) {
  int sp[2], out[2], err[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) return fail_errno(errno, "spawn " + path + ": stdin socket pair");
  Channels c;
  c.in_parent = Fd(sp[0]);
  c.in_child = Fd(sp[1]);
  if (::pipe2(out, O_CLOEXEC) != 0) return fail_errno(errno, "spawn " + path + ": stdout pipe");
  c.out_parent = Fd(out[0]);
  c.out_child = Fd(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return fail_errno(errno, "spawn " + path + ": stderr pipe");
  c.err_parent = Fd(err[0]);
  c.err_child = Fd(err[1]);
  for (int fd : {c.in_parent.get(), c.out_parent.get(), c.err_parent.get()}) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return c;
}

/// In a forked child: descriptor `from` as `to` without close-on-exec (dup2 onto itself keeps
/// the flag, so it is cleared instead).
bool place(int from, int to) {
  if (from == to) return ::fcntl(to, F_SETFD, 0) == 0;
  return ::dup2(from, to) == to;
}

/// What posix_spawn does below, plus chroot(root) and chdir("/") before execve: fork, then only
/// async-signal-safe calls in the child. Every signal is blocked around fork so that no handler
/// of plumb's runs in the child before the dispositions are reset. Returns 0 with `pid` set, or
/// the errno of fork or of the child's setup, chroot or execve (sent back through a
/// close-on-exec pipe, so a successful execve sends nothing).
int spawn_chrooted(pid_t& pid, const SpawnRequest& req, const Channels& c, char* const* argv, char* const* envp) {
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return errno;
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  pid = ::fork();
  if (pid == 0) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);  // SIGKILL, SIGSTOP: EINVAL, fine
    int err = 0;
    if (::setpgid(0, 0) != 0 || !place(c.in_child.get(), 0) || !place(c.out_child.get(), 1) || !place(c.err_child.get(), 2) ||
        ::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0 || ::chroot(req.root.c_str()) != 0 || ::chdir("/") != 0) {
      err = errno;
    } else {
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execve(req.path.c_str(), argv, envp);
      err = errno;
    }
    (void)!::write(report[1], &err, sizeof err);
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::close(report[1]);
  if (pid < 0) {
    ::close(report[0]);
    return fork_errno;
  }
  int child_errno = 0;
  ssize_t n = 0;
  do n = ::read(report[0], &child_errno, sizeof child_errno);
  while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n != static_cast<ssize_t>(sizeof child_errno)) return 0;  // exec'd: the pipe closed empty
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return child_errno;
}

/// posix_spawn with the child's descriptors in place, every other descriptor closed, its own
/// process group, no blocked signals and default dispositions (spawn_chrooted in another root).
Result<pid_t> start(const SpawnRequest& req, const Channels& c) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, c.in_child.get(), 0);
  posix_spawn_file_actions_adddup2(&fa, c.out_child.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, c.err_child.get(), 2);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> argv_s = req.argv.empty() ? std::vector<std::string>{req.path} : req.argv;
  std::vector<char*> argv, envp;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s = req.env;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_t pid = 0;
  int rc = 0;
  for (int attempt = 0;; ++attempt) {
    rc = req.root.empty() ? ::posix_spawn(&pid, req.path.c_str(), &fa, &attr, argv.data(), envp.data())
                          : spawn_chrooted(pid, req, c, argv.data(), envp.data());
    if (rc != ETXTBSY || attempt == 5) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return std::unexpected(Error{cni_code::kIo, rc, "execute " + req.path + (req.root.empty() ? "" : " in root " + req.root), {}});
  }
  return pid;
}

void kill_and_reap(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

/// Reads what is available on `fd` into `buf`; false at EOF (or a read error).
bool drain(int fd, std::string& buf) {
  char chunk[16384];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n > 0) {
      buf.append(chunk, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && errno == EAGAIN;  // EWOULDBLOCK is EAGAIN on Linux
  }
}

/// The exchange with a running child: stdin written, stdout/stderr read until both close or the
/// deadline. Returns false on timeout or output overflow (`overflow` set for the latter).
bool exchange(const SpawnRequest& req, Channels& c, Outcome& o, Clock::time_point deadline, bool& overflow) {
  size_t written = 0;
  if (req.stdin_data.empty()) {
    ::shutdown(c.in_parent.get(), SHUT_WR);
    c.in_parent.reset();
  }
  while (c.out_parent.get() >= 0 || c.err_parent.get() >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd fds[3] = {{c.in_parent.get(), POLLOUT, 0}, {c.out_parent.get(), POLLIN, 0}, {c.err_parent.get(), POLLIN, 0}};
    int n = ::poll(fds, 3, static_cast<int>(std::min<long long>(left, 1000)));
    if (n < 0 && errno != EINTR) return false;
    if (n <= 0) continue;
    if (fds[0].revents != 0) {
      ssize_t w = ::send(c.in_parent.get(), req.stdin_data.data() + written, req.stdin_data.size() - written, MSG_NOSIGNAL);
      if (w > 0) written += static_cast<size_t>(w);
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == req.stdin_data.size()) {
        ::shutdown(c.in_parent.get(), SHUT_WR);  // EOF for the child (or it stopped reading)
        c.in_parent.reset();
      }
    }
    if (fds[1].revents != 0 && !drain(c.out_parent.get(), o.out)) c.out_parent.reset();
    if (fds[2].revents != 0 && !drain(c.err_parent.get(), o.err)) c.err_parent.reset();
    if (o.out.size() > req.max_output_bytes || o.err.size() > req.max_output_bytes) {
      overflow = true;
      return false;
    }
  }
  return true;
}

/// Waits for the child's exit until the deadline; false on timeout.
bool wait_exit(pid_t pid, Outcome& o, Clock::time_point deadline) {
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) o.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
      return true;
    }
    if (r < 0 && errno != EINTR) return true;  // not our child any more: nothing to wait for
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

/// Fields of /proc/<pid>/stat after the command name: [0] = state (field 3), [2] = pgrp
/// (field 5), [19] = starttime (field 22). nullopt when the process does not exist.
Result<std::optional<std::vector<std::string>>> stat_fields(pid_t pid) {
  auto text = read_file("/proc/" + std::to_string(pid) + "/stat", "process status", 4096);
  if (!text) {
    if (text.error().sys_errno == ENOENT || text.error().sys_errno == ESRCH) return std::optional<std::vector<std::string>>{};
    return std::unexpected(text.error());
  }
  auto close = text->rfind(')');
  if (close == std::string::npos) return fail(cni_code::kIo, "cannot parse /proc/" + std::to_string(pid) + "/stat");
  std::vector<std::string> fields;
  size_t pos = close + 2;
  while (pos < text->size()) {
    size_t sp = text->find(' ', pos);
    if (sp == std::string::npos) sp = text->size();
    fields.push_back(text->substr(pos, sp - pos));
    pos = sp + 1;
  }
  if (fields.size() < 20) return fail(cni_code::kIo, "cannot parse /proc/" + std::to_string(pid) + "/stat");
  return std::optional<std::vector<std::string>>(std::move(fields));
}

}  // namespace

Result<Outcome> run(const SpawnRequest& req) {
  if (req.path.empty() || req.path.front() != '/') return fail(cni_code::kIo, "spawn: \"" + req.path + "\" is not an absolute path");
  Channels c = PLUMB_TRY(make_channels(req.path));
  pid_t pid = PLUMB_TRY(start(req, c));
  c.in_child.reset();
  c.out_child.reset();
  c.err_child.reset();
  const auto deadline = Clock::now() + req.timeout;
  if (req.on_started) {
    auto t = start_time(pid);
    Status st = t ? req.on_started(Child{pid, t->value_or(0)}) : Status(std::unexpected(t.error()));
    if (!st) {
      kill_and_reap(pid);
      return std::unexpected(st.error());
    }
  }
  Outcome o;
  bool overflow = false;
  if (!exchange(req, c, o, deadline, overflow) || !wait_exit(pid, o, deadline)) {
    kill_and_reap(pid);
    if (overflow) return fail(cni_code::kIo, req.path + " wrote more than " + std::to_string(req.max_output_bytes) + " bytes");
    o.timed_out = true;
    o.signal = SIGKILL;
    o.exit_code = -1;
    return o;
  }
  // What the child left running in its group is its business (libcni does not end it either);
  // its pid is reaped and may already name another process group.
  return o;
}

Result<std::optional<uint64_t>> start_time(pid_t pid) {
  auto fields = PLUMB_TRY(stat_fields(pid));
  if (!fields) return std::optional<uint64_t>{};
  return std::optional<uint64_t>(std::strtoull((*fields)[19].c_str(), nullptr, 10));
}

Status end_orphan(const Child& child, std::chrono::milliseconds wait) {
  if (child.pid <= 1) return {};
  const auto deadline = Clock::now() + wait;
  bool signalled = false;
  for (;;) {
    auto fields = PLUMB_TRY(stat_fields(child.pid));
    if (!fields || std::strtoull((*fields)[19].c_str(), nullptr, 10) != child.start_time || (*fields)[0] == "Z") return {};
    if (!signalled) {
      if (std::strtol((*fields)[2].c_str(), nullptr, 10) == child.pid) ::kill(-child.pid, SIGKILL);
      ::kill(child.pid, SIGKILL);
      signalled = true;
    }
    if (Clock::now() >= deadline) {
      return fail(cni_code::kKernel, "process " + std::to_string(child.pid) + " is still running after SIGKILL");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace plumb::process
