// The bench's harness (harness.hpp): clocks, files, progress, timed child processes, namespaces.
#include "bench/harness.hpp"

#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sched.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "engine/base/file.hpp"

namespace bench {

namespace fs = std::filesystem;

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string read_text(const std::string& path) {
  auto text = plumb::read_file(path);
  return text ? std::move(*text) : std::string();
}

void write_text(const std::string& path, const std::string& data) {
  fs::create_directories(fs::path(path).parent_path());
  if (auto st = plumb::write_atomic(path, data, {.mode = 0644, .fsync = false}); !st) throw std::runtime_error(st.error().text());
}

void write_proc(const std::string& path, const char* value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("open " + path + ": " + std::strerror(errno));
  ssize_t n = ::write(fd, value, std::strlen(value));
  int err = errno;
  ::close(fd);
  if (n < 0) throw std::runtime_error("write " + path + ": " + std::strerror(err));
}

std::string fmt(int decimals, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string json_dump(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return sb.GetString();
}

Progress::Progress() : tty_(isatty(2) != 0), start_(now_ns()) {}

void Progress::set(const std::string& text, bool force) {
  std::lock_guard<std::mutex> l(mu_);
  current_ = text;
  const int64_t t = now_ns();
  if (!force && !tty_ && t - last_ < 10'000'000'000) return;
  if (!force && tty_ && t - last_ < 100'000'000) return;
  last_ = t;
  const int secs = static_cast<int>((t - start_) / 1'000'000'000);
  if (tty_) {
    std::fprintf(stderr, "\r\033[K[%2d:%02d] %s", secs / 60, secs % 60, text.c_str());
  } else {
    std::fprintf(stderr, "[%2d:%02d] %s\n", secs / 60, secs % 60, text.c_str());
  }
  std::fflush(stderr);
}

std::string Progress::current() {
  std::lock_guard<std::mutex> l(mu_);
  return current_;
}

void Progress::line(const std::string& text) {
  std::lock_guard<std::mutex> l(mu_);
  const int secs = static_cast<int>((now_ns() - start_) / 1'000'000'000);
  std::fprintf(stderr, "%s[%2d:%02d] %s\n", tty_ ? "\r\033[K" : "", secs / 60, secs % 60, text.c_str());
  std::fflush(stderr);
}

int64_t Progress::elapsed_ns() const { return now_ns() - start_; }

std::string Proc::describe() const {
  std::string s = WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status)) : "signal " + std::to_string(WTERMSIG(status));
  if (!command.empty()) s += "\n  command: " + command;
  if (!input.empty()) s += "\n  stdin: " + input;
  return s + "\n  stdout: " + out + "\n  stderr: " + err;
}

std::string command_line(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  std::string s;
  for (const auto& e : env) {
    if (e.rfind("PATH=", 0) != 0) s += e + " ";  // PATH is the same for every child
  }
  for (size_t i = 0; i < argv.size(); ++i) s += (i ? " " : "") + argv[i];
  return s;
}

namespace {

/// `v` as the NULL-terminated array of C strings posix_spawn takes (pointing into `v`).
std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

Proc spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& input) {
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  }
  std::vector<char*> av = c_strings(argv), ev = c_strings(env);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);

  Proc p;
  const int64_t t0 = now_ns();
  pid_t pid = -1;
  int rc = posix_spawn(&pid, av[0], &fa, nullptr, av.data(), ev.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    ::close(err[0]);
    throw std::runtime_error("posix_spawn " + argv[0] + ": " + std::strerror(rc));
  }
  // Inputs are configs of a few KiB: far below the pipe's capacity, so this never blocks.
  size_t off = 0;
  while (off < input.size()) {
    ssize_t n = ::write(in[1], input.data() + off, input.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the child closed stdin early; its exit status tells the rest
    off += static_cast<size_t>(n);
  }
  ::close(in[1]);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&p.out, &p.err};
  int open_fds = 2;
  char buf[16384];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  rusage ru{};
  while (wait4(pid, &p.status, 0, &ru) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("wait4: ") + std::strerror(errno));
  }
  p.wall_ns = now_ns() - t0;
  p.maxrss_kib = ru.ru_maxrss;
  if (!p.ok()) {  // what a failure report shows: the child, exactly as it was run
    p.command = command_line(argv, env);
    p.input = input;
  }
  p.cpu_us = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1'000'000 + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
  return p;
}

namespace {

/// The process groups of the running Background programs, for end_groups(): a bench ended by a
/// signal (Ctrl-C, timeout's SIGTERM) ends them too, which it did when they shared its group.
std::array<std::atomic<pid_t>, 16> g_groups{};

extern "C" void end_groups(int sig) {
  for (auto& g : g_groups) {
    if (const pid_t p = g.load(); p > 0) ::kill(-p, SIGTERM);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

/// Records (or with `pgid` 0, forgets) `was`'s slot; installs end_groups() once.
void track_group(pid_t was, pid_t pgid) {
  static const bool installed = [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, end_groups);
    return true;
  }();
  (void)installed;
  for (auto& g : g_groups) {
    pid_t expected = was;
    if (g.compare_exchange_strong(expected, pgid)) return;
  }
}

/// Whether any process of group `pgid` is left (zombies included, until their parent reaps them).
bool group_alive(pid_t pgid) { return ::kill(-pgid, 0) == 0 || errno != ESRCH; }

}  // namespace

void Background::start(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& log_path) {
  std::vector<char*> av = c_strings(argv), ev = c_strings(env);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  // A process group of its own: stop() ends everything it started, even through a wrapper that
  // execs a tracer (strace, perf) whose child is the program.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  const int rc = posix_spawn(&pid_, av[0], &fa, &attr, av.data(), ev.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    pid_ = -1;
    throw std::runtime_error("posix_spawn " + argv[0] + ": " + std::strerror(rc));
  }
  track_group(0, pid_);
}

void Background::stop() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGTERM);
  int status = 0;
  bool reaped = false;
  for (int i = 0; i < 1000 && group_alive(pid_); ++i) {
    if (!reaped) reaped = waitpid(pid_, &status, WNOHANG) == pid_;
    ::usleep(10'000);
  }
  if (group_alive(pid_)) ::kill(-pid_, SIGKILL);
  if (!reaped) waitpid(pid_, &status, 0);
  track_group(pid_, 0);
  pid_ = -1;
}

int64_t Background::cpu_ns(bool all_threads) const {
  const std::string proc = "/proc/" + std::to_string(pid_);
  if (!all_threads) return std::strtoll(read_text(proc + "/schedstat").c_str(), nullptr, 10);
  int64_t sum = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(proc + "/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    sum += std::strtoll(read_text(it->path().string() + "/schedstat").c_str(), nullptr, 10);
  }
  return sum;
}

InNetns::InNetns(const plumb::netns::Netns& ns) : guard_(must(plumb::netns::Guard::enter(ns), "enter " + ns.path())) {}

void lo_up() {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  int rc = ioctl(fd, SIOCGIFFLAGS, &ifr);
  if (rc == 0) {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    rc = ioctl(fd, SIOCSIFFLAGS, &ifr);
  }
  int err = errno;
  ::close(fd);
  if (rc != 0) throw std::runtime_error(std::string("bring lo up: ") + std::strerror(err));
}

void create_netns(const std::string& name) {
  const std::string path = "/run/netns/" + name;
  int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_RDONLY | O_CLOEXEC, 0444);
  if (fd < 0) throw std::runtime_error("create " + path + ": " + std::strerror(errno));
  ::close(fd);
  auto orig = must(plumb::netns::Netns::current(), "open current netns");
  if (unshare(CLONE_NEWNET) != 0) throw std::runtime_error(std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno));
  std::string error;
  if (mount("/proc/thread-self/ns/net", path.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    error = "bind-mount " + path + ": " + std::strerror(errno);
  } else {
    try {
      lo_up();
      write_proc("/proc/sys/net/ipv6/conf/all/accept_dad", "0");
      write_proc("/proc/sys/net/ipv6/conf/default/accept_dad", "0");
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (setns(orig.fd(), CLONE_NEWNET) != 0) {
    std::fprintf(stderr, "plumb-bench: cannot return to the private root namespace: %s\n", std::strerror(errno));
    std::abort();  // continuing in the wrong namespace would measure (and change) the wrong node
  }
  if (!error.empty()) throw std::runtime_error(error);
}

void delete_netns(const std::string& name) {
  const std::string path = "/run/netns/" + name;
  umount2(path.c_str(), MNT_DETACH);
  ::unlink(path.c_str());
}

void enter_private_root(const std::string& bpf_dir) {
  if (unshare(CLONE_NEWNET | CLONE_NEWNS) != 0) {
    throw std::runtime_error(std::string("unshare(CLONE_NEWNET|CLONE_NEWNS) (the bench must run as root): ") +
                             std::strerror(errno));
  }
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    throw std::runtime_error(std::string("make / private: ") + std::strerror(errno));
  }
  ::mkdir("/run/netns", 0755);
  if (mount("tmpfs", "/run/netns", "tmpfs", 0, "mode=0755") != 0) {
    throw std::runtime_error(std::string("mount tmpfs on /run/netns: ") + std::strerror(errno));
  }
  fs::create_directories(bpf_dir);
  if (mount("bpf", bpf_dir.c_str(), "bpf", 0, "mode=0700") != 0) {
    throw std::runtime_error("mount a private bpffs on " + bpf_dir + ": " + std::strerror(errno));
  }
  lo_up();
}

bool private_cni_state() {
  const bool created = ::mkdir(kCniStateDir, 0755) == 0;
  if (mount("tmpfs", kCniStateDir, "tmpfs", 0, "mode=0755") != 0) {
    const int err = errno;
    if (created) ::rmdir(kCniStateDir);
    throw std::runtime_error(std::string("mount tmpfs on ") + kCniStateDir + ": " + std::strerror(err));
  }
  return created;
}


}  // namespace bench
