#include "tests/support/private_node.hpp"

#include <fcntl.h>
#include <linux/if.h>  // struct ifreq as engine/kernel/tun.cpp has it (one layout per program: LTO checks)
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <doctest/doctest.h>

namespace plumb::test {
namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "private_node: %s: %s\n", what, std::strerror(errno));
  std::abort();
}

void lo_up() {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket");
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) die("SIOCGIFFLAGS lo");
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0) die("SIOCSIFFLAGS lo");
  close(fd);
}

std::string read_fd(int fd) {
  std::string s;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    s.append(buf, static_cast<size_t>(n));
  }
  return s;
}

/// Mounts a new bpffs instance (its own, empty) on `dir` of this private mount namespace; a
/// kernel without BPF (no such directory) is left alone.
void mount_private_bpffs(const char* dir) {
  if (access(dir, F_OK) != 0) return;
  if (mount("bpf", dir, "bpf", 0, "mode=0700") != 0) die("mount a private bpffs on /sys/fs/bpf");
}

}  // namespace

const char* plumb_binary() { return PLUMB_BINARY; }
const char* plumb_faulty_binary() { return PLUMB_FAULTY_BINARY; }
const char* plumb_shim_binary() { return PLUMB_SHIM_BINARY; }
const char* fixtures_dir() { return PLUMB_FIXTURES; }

void enter_private_root() {
  if (unshare(CLONE_NEWNET | CLONE_NEWNS) != 0) die("unshare(CLONE_NEWNET|CLONE_NEWNS) (integration tests need root)");
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) die("make / private");
  mkdir("/run/netns", 0755);
  if (mount("tmpfs", "/run/netns", "tmpfs", 0, "mode=0755") != 0) die("mount tmpfs /run/netns");
  // A private bpffs so BPF pins made by tests never reach the host's /sys/fs/bpf.
  mount_private_bpffs("/sys/fs/bpf");
  lo_up();
}

void exec_child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env) {
  std::vector<std::string> envs;
  envs.push_back("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  for (auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> av = argv;
  for (auto& a : av) args.push_back(a.data());
  args.push_back(nullptr);
  execvpe(args[0], args.data(), envp.data());
  _exit(127);
}

Proc run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
         const std::string& input) {
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) die("pipe");
  pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    exec_child(argv, env);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  // Inputs are small (configs): write all, then close, then read both pipes.
  size_t off = 0;
  while (off < input.size()) {
    ssize_t n = write(in[1], input.data() + off, input.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  close(in[1]);
  Proc p;
  p.err.clear();
  // stderr could fill its pipe while we read stdout: read stderr in a child-free way by
  // polling would be nicer; plumb writes little to stderr, so read stdout then stderr.
  p.out = read_fd(out[0]);
  p.err = read_fd(err[0]);
  close(out[0]);
  close(err[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return p;
}

Proc sh(const std::string& cmdline) { return run({"/bin/sh", "-c", cmdline}); }

rapidjson::Document ip_json(const std::string& args) {
  Proc p = sh("ip -j " + args);
  INFO("ip -j ", args, ": ", p.err);
  REQUIRE(p.exit_code == 0);
  rapidjson::Document d;
  d.Parse(p.out.c_str());
  REQUIRE_FALSE(d.HasParseError());
  return d;
}

Node::Node() {
  if (unshare(CLONE_NEWNET) != 0) die("unshare(CLONE_NEWNET) for a fresh node");
  lo_up();
  // sysfs shows the network namespace of whoever mounts it: remount for this node.
  umount2("/sys", MNT_DETACH);
  if (mount("sysfs", "/sys", "sysfs", 0, nullptr) != 0) die("mount sysfs");
  // The fresh sysfs has an empty /sys/fs/bpf: cover it with a fresh bpffs instance again.
  mount_private_bpffs("/sys/fs/bpf");
  char tmpl[] = "/tmp/plumb-test-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) die("mkdtemp");
  dir_ = tmpl;
}

Node::~Node() {
  for (auto& n : std::vector<std::string>(netns_)) del_netns(n);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string Node::add_netns(const std::string& name) {
  std::string path = "/run/netns/" + name;
  int fd = open(path.c_str(), O_CREAT | O_EXCL | O_RDONLY | O_CLOEXEC, 0444);
  if (fd < 0) die(("create " + path).c_str());
  close(fd);
  pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    if (unshare(CLONE_NEWNET) != 0) _exit(1);
    if (mount("/proc/self/ns/net", path.c_str(), nullptr, MS_BIND, nullptr) != 0) _exit(2);
    lo_up();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    errno = EPERM;
    die(("create netns " + name).c_str());
  }
  netns_.push_back(name);
  return path;
}

void Node::del_netns(const std::string& name) {
  std::string path = "/run/netns/" + name;
  umount2(path.c_str(), MNT_DETACH);
  unlink(path.c_str());
  std::erase(netns_, name);
}

Proc Node::plumb(const std::map<std::string, std::string>& env, const std::string& config) const {
  return run({plumb_binary()}, env, config);
}

PrivateBpffs::PrivateBpffs(const Node& node) : dir_(node.dir() + "/bpf") {
  if (mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) die("mkdir for a private bpffs");
  if (mount("bpf", dir_.c_str(), "bpf", 0, "mode=0700") != 0) die("mount a private bpffs");
}

PrivateBpffs::~PrivateBpffs() {
  umount2(dir_.c_str(), MNT_DETACH);
  rmdir(dir_.c_str());
}

}  // namespace plumb::test
