// cni-entry/daemon (+ cni-entry/shim): plumb as `plumb daemon` and plumb-shim, against the real
// kernel in a private node namespace, through the real binaries: the shim's invocation is the
// plumb binary's (result, exit code, CNI error, environment), one worker serves many without
// keeping a descriptor or a pod's namespace, a shim that ends early ends its worker, a worker that
// dies ends its shim the same way (and the next DEL removes what it began), a worker answers its
// shim itself (a stopped daemon holds nothing up), the daemon's socket and stop, the shim without
// a daemon and its own errors, a worker without /dev/null, a worker reading changed config files
// again, a worker letting go of a state directory moved away, and the socket's directory, trusted by the daemon and the
// shim only when no one but root (or their own user) can change it.
#include <dirent.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include "cni-entry/daemon/wire.hpp"
#include "plumb/version.hpp"
#include "tests/support/bounded_run.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/kube_cluster.hpp"
#include "tests/support/node_snapshot.hpp"
#include "tests/support/plumb_daemon.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/unix_socket.hpp"

using plumb::test::Daemon;
using plumb::test::eventually;
using plumb::test::Node;
using plumb::test::NodeSnapshot;
using plumb::test::PodFixture;
using plumb::test::Proc;
using plumb::test::read_file;
namespace fs = std::filesystem;

namespace {

/// The open descriptors of process `pid`, as "fd -> target".
std::set<std::string> descriptors(pid_t pid) {
  std::set<std::string> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& e : fs::directory_iterator(dir)) {
    std::error_code ec;
    out.insert(e.path().filename().string() + " -> " + fs::read_symlink(e.path(), ec).string());
  }
  return out;
}

/// The open descriptors of worker `pid` once it waits for its next request (blocked in recvmsg on
/// its control socket, the only recvmsg it makes after its shim was answered): a shim ends when
/// its answer arrives, which the worker sends just before it closes that shim's connection.
std::set<std::string> idle_descriptors(pid_t pid) {
  const std::string syscall = "/proc/" + std::to_string(pid) + "/syscall";
  REQUIRE(eventually([&] { return read_file(syscall).starts_with(std::to_string(SYS_recvmsg) + " "); }));
  return descriptors(pid);
}

const std::string kShim = plumb::test::plumb_shim_binary();

/// Starts a shim (VERSION) whose stdin is a pipe this test keeps open, and waits until `worker`
/// serves it (its stdin is that pipe): the invocation then waits for its configuration. Returns
/// the shim's pid and the pipe's write end.
std::pair<pid_t, int> stuck_shim(const Daemon& d, pid_t worker) {
  int in[2];
  REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
  const pid_t shim = ::fork();
  REQUIRE(shim >= 0);
  if (shim == 0) {
    ::dup2(in[0], 0);
    plumb::test::exec_child({kShim}, {{"PLUMB_DAEMON_SOCKET", d.socket}, {"CNI_COMMAND", "VERSION"}});
  }
  ::close(in[0]);
  const std::string fd0 = "/proc/" + std::to_string(worker) + "/fd/0";
  REQUIRE(eventually([&] {
    std::error_code ec;
    return fs::read_symlink(fd0, ec).string().starts_with("pipe:");
  }));
  return {shim, in[1]};
}

}  // namespace

TEST_CASE("through plumb-shim and the daemon, ADD, CHECK and DEL do what the plumb binary does; one worker serves them all and keeps no descriptor") {
  Node node;
  PodFixture fx(node);
  Daemon d({"--workers", "1"});
  const std::map<std::string, std::string> via = {{"PLUMB_DAEMON_SOCKET", d.socket}};
  const std::string conf = fx.config();
  // The reference run: the plumb binary itself, and DEL (the bridge the first ADD made stays).
  const std::string ns0 = node.add_netns("p0");
  fx.add_pod("default", "p0", "");
  REQUIRE(fx.run("ADD", "c0", ns0, "default", "p0", conf).exit_code == 0);
  REQUIRE(fx.run("DEL", "c0", ns0, "default", "p0", conf).exit_code == 0);
  for (int i = 1; i <= 4; ++i) fx.add_pod("default", "p" + std::to_string(i), "");
  const auto before = NodeSnapshot::take(node.dir(), {"p0"});

  std::set<std::string> fds_after_first;
  for (int i = 1; i <= 4; ++i) {
    CAPTURE(i);
    const std::string name = "p" + std::to_string(i), cid = "c" + std::to_string(i);
    const std::string ns = node.add_netns(name);
    Proc add = fx.run_with(kShim, via, "ADD", cid, ns, "default", name, conf);
    REQUIRE_MESSAGE(add.exit_code == 0, add.out << add.err);
    CHECK(add.out.find("\"sandbox\":\"" + ns + "\"") != std::string::npos);
    CHECK_FALSE(plumb::test::ipv4_of(name, "eth0").empty());
    CHECK_FALSE(fx.status_of("default", name).empty());
    Proc check = fx.run_with(kShim, via, "CHECK", cid, ns, "default", name, conf.substr(0, conf.size() - 1) + R"(, "prevResult": )" + add.out + "}");
    CHECK_MESSAGE(check.exit_code == 0, check.out << check.err);
    Proc del = fx.run_with(kShim, via, "DEL", cid, ns, "default", name, conf);
    CHECK_MESSAGE(del.exit_code == 0, del.out << del.err);
    node.del_netns(name);
    const auto workers = d.workers();
    REQUIRE(workers.size() == 1);
    if (i == 1) fds_after_first = idle_descriptors(*workers.begin());
    else CHECK(idle_descriptors(*workers.begin()) == fds_after_first);  // nothing of a pod's (socket, namespace) kept
  }
  PLUMB_CHECK_UNCHANGED(before, NodeSnapshot::take(node.dir(), {"p0"}));
  const auto pids = d.served_by(12);
  CHECK(pids.size() == 12);
  CHECK(std::set<pid_t>(pids.begin(), pids.end()).size() == 1);
}

TEST_CASE("the daemon answers with the invocation's exit code and CNI error, and the environment is the shim's alone") {
  Node node;
  PodFixture fx(node);
  Daemon d({"--workers", "1"});
  const std::map<std::string, std::string> via = {{"PLUMB_DAEMON_SOCKET", d.socket}};
  Proc bad = plumb::test::run({kShim}, {{"PLUMB_DAEMON_SOCKET", d.socket}, {"CNI_COMMAND", "ADD"}, {"CNI_CONTAINERID", "c1"},
                                        {"CNI_NETNS", "/run/netns/none"}, {"CNI_IFNAME", "eth0"}, {"CNI_PATH", "/usr/lib/cni"}},
                              R"({"cniVersion": "1.0.0", "name": "x", "type": "plumb")");
  CHECK(bad.exit_code == 1);
  CHECK(bad.out.find("\"code\":6") != std::string::npos);  // decoding failure, CNI spec's code 6
  // The next invocation on the same worker names no interface: the last one's CNI_IFNAME is gone.
  Proc no_ifname = plumb::test::run({kShim}, {{"PLUMB_DAEMON_SOCKET", d.socket}, {"CNI_COMMAND", "ADD"}, {"CNI_CONTAINERID", "c1"},
                                              {"CNI_NETNS", node.add_netns("p1")}, {"CNI_PATH", "/usr/lib/cni"}},
                                    fx.config());
  CHECK(no_ifname.exit_code == 1);
  CHECK(no_ifname.out.find("CNI_IFNAME") != std::string::npos);
  Proc thin = plumb::test::run({plumb::test::plumb_binary()}, {{"CNI_COMMAND", "ADD"}, {"CNI_CONTAINERID", "c1"},
                                                               {"CNI_NETNS", "/run/netns/p1"}, {"CNI_PATH", "/usr/lib/cni"}},
                               fx.config());
  CHECK(no_ifname.out == thin.out);
  CHECK(d.served_by(2).size() == 2);
}

TEST_CASE("a shim that ends before its answer ends its worker, which is replaced") {
  Node node;
  Daemon d({"--workers", "1"});
  const auto first = d.workers();
  REQUIRE(first.size() == 1);
  // The worker waits for the configuration on the shim's stdin, which this test keeps open.
  const pid_t worker = *first.begin();
  auto [shim, stdin_end] = stuck_shim(d, worker);
  ::kill(shim, SIGKILL);
  ::waitpid(shim, nullptr, 0);
  CHECK(eventually([&] { return d.workers().count(worker) == 0 && d.workers().size() == 1; }));
  ::close(stdin_end);
  // The replacement serves the next invocation.
  Proc v = plumb::test::run({kShim}, {{"PLUMB_DAEMON_SOCKET", d.socket}, {"CNI_COMMAND", "VERSION"}}, "{}");
  CHECK(v.exit_code == 0);
  CHECK(v.out.find("supportedVersions") != std::string::npos);
}

TEST_CASE("a worker killed in the middle of an ADD ends its shim with the same signal; the DEL that follows removes everything") {
  Node node;
  PodFixture fx(node);
  const std::string conf = fx.config();
  const std::string ns = node.add_netns("web");
  fx.add_pod("default", "web", "");
  // The bridge and the IPAM directory of a first pod: what may stay after a completed DEL.
  REQUIRE(fx.run("ADD", "c0", ns, "default", "web", conf).exit_code == 0);
  REQUIRE(fx.run("DEL", "c0", ns, "default", "web", conf).exit_code == 0);
  const auto before = NodeSnapshot::take(node.dir(), {"web"});
  // plumb-faulty SIGKILLs itself after its journal's 3rd persisted intent.
  Daemon d({"--workers", "1"}, plumb::test::plumb_faulty_binary(), {{"PLUMB_FAULT_AFTER_STEP", "3"}});
  Proc add = fx.run_with(kShim, {{"PLUMB_DAEMON_SOCKET", d.socket}}, "ADD", "c1", ns, "default", "web", conf);
  CHECK(add.exit_code == 128 + SIGKILL);
  CHECK(read_file(d.usage).find("signal=9") != std::string::npos);
  Proc del = fx.run("DEL", "c1", ns, "default", "web", conf);
  CHECK_MESSAGE(del.exit_code == 0, del.out << del.err);
  PLUMB_CHECK_UNCHANGED(before, NodeSnapshot::take(node.dir(), {"web"}));
}

TEST_CASE("a worker answers its shim itself: the shim ends while the daemon is stopped (SIGSTOP)") {
  Node node;
  Daemon d({"--workers", "1"});
  const pid_t worker = *d.workers().begin();
  auto [shim, stdin_end] = stuck_shim(d, worker);
  REQUIRE(::kill(d.pid, SIGSTOP) == 0);
  ::close(stdin_end);  // the invocation reads its (empty) config and ends
  int status = -1;
  const bool ended = eventually([&] { return ::waitpid(shim, &status, WNOHANG) == shim; });
  REQUIRE(::kill(d.pid, SIGCONT) == 0);
  if (!ended) REQUIRE(::waitpid(shim, &status, 0) == shim);
  CHECK_MESSAGE(ended, "the shim waited for the stopped daemon");
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // The daemon, running again, logs the invocation and keeps the worker (no early end of a shim).
  CHECK(d.served_by(1) == std::vector<pid_t>{worker});
  CHECK(d.workers() == std::set<pid_t>{worker});
}

TEST_CASE("an idle worker that dies is replaced, and its replacement serves the next invocation") {
  Node node;
  Daemon d({"--workers", "1"});
  const pid_t idle = *d.workers().begin();
  ::kill(idle, SIGKILL);
  CHECK(eventually([&] { return d.workers().count(idle) == 0 && d.workers().size() == 1; }));
  const pid_t replacement = *d.workers().begin();
  Proc v = plumb::test::run({kShim}, {{"PLUMB_DAEMON_SOCKET", d.socket}, {"CNI_COMMAND", "VERSION"}}, "{}");
  CHECK(v.exit_code == 0);
  // One line in the usage log: the replacement's (not plumb exec'd); the idle worker's death was
  // no invocation's.
  CHECK(d.served_by(1) == std::vector<pid_t>{replacement});
}

TEST_CASE("SIGTERM during an invocation: the socket goes at once, the invocation is still answered, then the daemon exits") {
  Node node;
  Daemon d({"--workers", "1"});
  const pid_t worker = *d.workers().begin();
  auto [shim, stdin_end] = stuck_shim(d, worker);
  ::kill(d.pid, SIGTERM);
  CHECK(eventually([&] { return !fs::exists(d.socket); }));  // no new invocation reaches it
  CHECK(::waitpid(d.pid, nullptr, WNOHANG) == 0);            // still serving the one it has
  ::close(stdin_end);                                         // the invocation reads its config and ends
  int status = -1;
  REQUIRE(::waitpid(shim, &status, 0) == shim);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // its answer came from the worker (exit 0), not a broken connection (11)
  CHECK(d.served_by(1) == std::vector<pid_t>{worker});
  CHECK(d.exits_cleanly());
  CHECK_FALSE(fs::exists("/proc/" + std::to_string(worker)));
}

TEST_CASE("a worker left without /dev/null closes the runtime's stdin and stdout after its invocation and retires") {
  // The daemon in a mount namespace of its own whose /dev is empty: a worker can park nothing on
  // 0 and 1. Holding the runtime's pipes instead, it would keep the runtime reading stdout (the
  // runtime reads to its end) until the worker's next invocation.
  Node node;
  plumb::test::TempDir wrap;
  const std::string script = wrap.path + "/daemon-without-dev-null";
  plumb::test::write_file(script, std::string("#!/bin/sh\nexec unshare -m --propagation private sh -c ") +
                                      "'mount -t tmpfs -o size=64k none /dev && exec \"$0\" \"$@\"' " +
                                      plumb::test::plumb_binary() + " \"$@\"\n");
  REQUIRE(::chmod(script.c_str(), 0755) == 0);
  Daemon d({"--workers", "1"}, script);
  const pid_t first = *d.workers().begin();
  plumb::test::Bounds bounds;
  bounds.seconds = 10;
  for (int i = 0; i < 2; ++i) {
    CAPTURE(i);
    auto v = plumb::test::run_bounded({kShim}, {{"PLUMB_DAEMON_SOCKET", d.socket}, {"CNI_COMMAND", "VERSION"}}, "{}", bounds);
    CHECK_FALSE(v.timed_out);  // stdout ended with the shim
    CHECK(v.exit_code == 0);
    CHECK(v.out.find("supportedVersions") != std::string::npos);
  }
  const auto pids = d.served_by(2);
  REQUIRE(pids.size() == 2);
  CHECK(pids[0] == first);
  CHECK(pids[1] != first);  // the first retired after one invocation; its replacement served the next
  CHECK(eventually([&] { return !fs::exists("/proc/" + std::to_string(first)); }));
}

TEST_CASE("a worker is replaced after --requests-per-worker invocations") {
  Node node;
  Daemon d({"--workers", "1", "--requests-per-worker", "2"});
  for (int i = 0; i < 5; ++i) {
    Proc v = plumb::test::run({kShim}, {{"PLUMB_DAEMON_SOCKET", d.socket}, {"CNI_COMMAND", "VERSION"}}, "{}");
    REQUIRE(v.exit_code == 0);
  }
  const auto pids = d.served_by(5);
  REQUIRE(pids.size() == 5);
  CHECK(pids[0] == pids[1]);
  CHECK(pids[1] != pids[2]);
  CHECK(pids[2] == pids[3]);
  CHECK(pids[3] != pids[4]);
}

TEST_CASE("the daemon's socket: 0600, one daemon per socket, connections of other users refused, removed at SIGTERM") {
  Node node;
  Daemon d;
  // Its start-up line names plumb's version and the socket.
  CHECK(eventually([&] {
    return read_file(d.log).find(std::string("plumb daemon ") + plumb::version::kFull + ": listening on " + d.socket + ", 4 workers") !=
           std::string::npos;
  }));
  struct stat st {};
  REQUIRE(::stat(d.socket.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  Proc second = plumb::test::run({plumb::test::plumb_binary(), "daemon", "--socket", d.socket});
  CHECK(second.exit_code == 1);
  CHECK(second.err.find("another daemon answers on " + d.socket) != std::string::npos);
  // Even where the socket's mode lets another user connect, the daemon answers only root.
  REQUIRE(::chmod(d.socket.c_str(), 0666) == 0);
  REQUIRE(::chmod(d.dir.path.c_str(), 0755) == 0);
  const pid_t other = ::fork();
  REQUIRE(other >= 0);
  if (other == 0) {
    int out = ::open((d.dir.path + "/other.out").c_str(), O_WRONLY | O_CREAT, 0666);
    ::dup2(out, 1);
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(100);
    plumb::test::exec_child({kShim}, {{"PLUMB_DAEMON_SOCKET", d.socket}, {"CNI_COMMAND", "VERSION"}});
  }
  int status = 0;
  ::waitpid(other, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(read_file(d.dir.path + "/other.out").find("\"code\":11") != std::string::npos);
  CHECK(eventually([&] { return read_file(d.log).find("refused a connection from uid 65534") != std::string::npos; }));
  CHECK(eventually([&] { return d.workers().size() == 4; }));
  const auto workers = d.workers();
  ::kill(d.pid, SIGTERM);
  CHECK(d.exits_cleanly());
  CHECK_FALSE(fs::exists(d.socket));
  for (pid_t w : workers) CHECK_FALSE(fs::exists("/proc/" + std::to_string(w)));
}

TEST_CASE("the daemon refuses a socket directory writable by group or others, or owned by another user, or below such a directory, naming it") {
  Node node;
  plumb::test::TempDir top;
  const std::string parent = top.path + "/p", dir = parent + "/run", socket = dir + "/plumb.sock";
  REQUIRE(::mkdir(parent.c_str(), 0755) == 0);
  REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
  // The refusal is the daemon's end: a daemon that listened would run until the bound.
  auto refusal = [&] {
    plumb::test::Bounds b;
    b.seconds = 10;
    const auto p = plumb::test::run_bounded({plumb::test::plumb_binary(), "daemon", "--socket", socket}, {}, "", b);
    CHECK(p.exited());
    CHECK(p.exit_code == 1);
    CHECK_FALSE(fs::exists(socket));
    return p.err;
  };
  REQUIRE(::chmod(dir.c_str(), 0777) == 0);
  CHECK(refusal().find("refusing to listen on " + socket + ": " + dir + " is writable by its group or others (mode 0777)") != std::string::npos);
  REQUIRE(::chmod(dir.c_str(), 0775) == 0);
  CHECK(refusal().find(dir + " is writable by its group or others (mode 0775)") != std::string::npos);
  REQUIRE(::chmod(dir.c_str(), 0755) == 0);
  REQUIRE(::chown(dir.c_str(), 65534, 65534) == 0);
  CHECK(refusal().find(dir + " is owned by uid 65534, not by root or uid 0") != std::string::npos);
  REQUIRE(::chown(dir.c_str(), 0, 0) == 0);
  // Whoever can write the directory above can rename this one away and put their own in its place.
  REQUIRE(::chmod(parent.c_str(), 0777) == 0);
  CHECK(refusal().find(parent + " is writable by its group or others (mode 0777)") != std::string::npos);
  // Through a symbolic link: the directory it leads to is the one checked.
  REQUIRE(::chmod(parent.c_str(), 0755) == 0);
  REQUIRE(::chmod(dir.c_str(), 0777) == 0);
  const std::string link = top.path + "/link";
  REQUIRE(::symlink(dir.c_str(), link.c_str()) == 0);
  const auto p = plumb::test::run_bounded({plumb::test::plumb_binary(), "daemon", "--socket", link + "/plumb.sock"}, {}, "");
  CHECK(p.exit_code == 1);
  CHECK(p.err.find(dir + " is writable by its group or others") != std::string::npos);
}

TEST_CASE("plumb-shim does not connect through a socket directory others can write or own: plumb beside it does the work") {
  Node node;
  Daemon d({"--workers", "1"});
  const std::map<std::string, std::string> env = {{"PLUMB_DAEMON_SOCKET", d.socket}, {"CNI_COMMAND", "VERSION"}};
  auto version = [&](const std::string& not_connecting) {
    const auto v = plumb::test::run_bounded({kShim}, env, "{}");
    CHECK(v.exit_code == 0);
    CHECK(v.out.find("supportedVersions") != std::string::npos);
    if (not_connecting.empty()) CHECK(v.err.find("not connecting") == std::string::npos);
    else CHECK_MESSAGE(v.err.find("plumb-shim: not connecting to " + d.socket + ": " + not_connecting) != std::string::npos, v.err);
  };
  version("");  // the daemon's
  REQUIRE(::chmod(d.dir.path.c_str(), 0777) == 0);
  version(d.dir.path + " is writable by its group or others (mode 0777)");
  REQUIRE(::chmod(d.dir.path.c_str(), 0700) == 0);
  REQUIRE(::chown(d.dir.path.c_str(), 65534, 65534) == 0);
  version(d.dir.path + " is owned by uid 65534, not by root or uid 0");
  REQUIRE(::chown(d.dir.path.c_str(), 0, 0) == 0);
  version("");  // the daemon's again
  // A directory that does not exist holds no daemon: plumb does the work, without a word.
  const auto missing = plumb::test::run_bounded({kShim}, {{"PLUMB_DAEMON_SOCKET", d.dir.path + "/none/plumb.sock"}, {"CNI_COMMAND", "VERSION"}}, "{}");
  CHECK(missing.exit_code == 0);
  CHECK(missing.out.find("supportedVersions") != std::string::npos);
  CHECK(missing.err.empty());
  // Every line of the usage log is an invocation the daemon served: the first and the last.
  ::kill(d.pid, SIGTERM);
  REQUIRE(d.exits_cleanly());
  CHECK(plumb::test::lines_of(read_file(d.usage)).size() == 2);
}

TEST_CASE("without a daemon, plumb-shim executes the plumb binary beside it") {
  Node node;
  PodFixture fx(node);
  plumb::test::TempDir dir;
  const std::map<std::string, std::string> via = {{"PLUMB_DAEMON_SOCKET", dir.path + "/nobody.sock"}};
  const std::string ns = node.add_netns("web");
  fx.add_pod("default", "web", "");
  Proc add = fx.run_with(kShim, via, "ADD", "c1", ns, "default", "web", fx.config());
  REQUIRE_MESSAGE(add.exit_code == 0, add.out << add.err);
  CHECK_FALSE(plumb::test::ipv4_of("web", "eth0").empty());
  CHECK(fx.run_with(kShim, via, "DEL", "c1", ns, "default", "web", fx.config()).exit_code == 0);
  CHECK(plumb::test::link_names("web") == std::set<std::string>{"lo"});
}

TEST_CASE("plumb-shim's own errors are CNI errors: a socket path too long, an environment larger than a request (code 4), no daemon and no plumb beside it (code 50)") {
  Node node;
  Daemon d({"--workers", "1"});
  const pid_t warm = *d.workers().begin();
  const std::map<std::string, std::string> version = {{"CNI_COMMAND", "VERSION"}};
  auto with = [&](std::map<std::string, std::string> env) {
    env.insert(version.begin(), version.end());
    return env;
  };
  // The error's JSON on stdout, exit code 1, as any CNI plugin's.
  auto is_error = [](const Proc& p, int code, const std::string& words) {
    return p.exit_code == 1 && p.out.find("\"code\":" + std::to_string(code) + ",") != std::string::npos &&
           p.out.find(words) != std::string::npos;
  };
  Proc long_path = plumb::test::run({kShim}, with({{"PLUMB_DAEMON_SOCKET", "/" + std::string(200, 's')}}), "{}");
  CHECK_MESSAGE(is_error(long_path, 4, "PLUMB_DAEMON_SOCKET is too long"), long_path.out);
  Proc large = plumb::test::run({kShim}, with({{"PLUMB_DAEMON_SOCKET", d.socket}, {"CNI_ARGS", std::string(70'000, 'a')}}), "{}");
  CHECK_MESSAGE(is_error(large, 4, "larger than a request may be"), large.out);
  // Neither reached a worker. A connection either had made would have gone to the only warm
  // worker before the next one (connections are handed over in the order accepted), which would
  // then have logged it or been killed with it (its shim gone): the next invocation is the warm
  // worker's, and the log's only line.
  Proc after = plumb::test::run({kShim}, with({{"PLUMB_DAEMON_SOCKET", d.socket}}), "{}");
  REQUIRE(after.exit_code == 0);
  CHECK(d.served_by(1) == std::vector<pid_t>{warm});

  // A shim alone in its directory, no daemon on its socket: nothing to hand the invocation to.
  plumb::test::TempDir alone;
  const std::string shim = alone.path + "/plumb-shim";
  fs::copy_file(kShim, shim);
  fs::permissions(shim, fs::perms::owner_all);
  Proc orphan = plumb::test::run({shim}, with({{"PLUMB_DAEMON_SOCKET", alone.path + "/nobody.sock"}}), "{}");
  CHECK_MESSAGE(is_error(orphan, 50, "no plumb daemon answers and plumb beside the shim cannot be executed"), orphan.out);
}

TEST_CASE("no invocation waits behind a busy worker: one finding none idle gets a worker of its own") {
  Node node;
  Daemon d({"--workers", "1"});
  const pid_t warm = *d.workers().begin();
  auto [stuck, stdin_end] = stuck_shim(d, warm);
  // The only warm worker waits on the stuck shim's stdin; the next invocation is answered anyway
  // (within the bound: without its own worker it would wait as long as the stuck one).
  const auto v = plumb::test::run_bounded({kShim}, {{"PLUMB_DAEMON_SOCKET", d.socket}, {"CNI_COMMAND", "VERSION"}}, "{}");
  CHECK(v.exited());
  CHECK(v.exit_code == 0);
  CHECK(v.out.find("supportedVersions") != std::string::npos);
  const auto pids = d.served_by(1);
  REQUIRE(pids.size() == 1);
  CHECK(pids[0] != warm);
  CHECK(eventually([&] { return d.workers() == std::set<pid_t>{warm}; }));  // the extra one served once and left
  ::close(stdin_end);  // the stuck invocation reads its (empty) config and answers
  int status = 0;
  REQUIRE(::waitpid(stuck, &status, 0) == stuck);
  CHECK(WIFEXITED(status));
}

TEST_CASE("hostile requests on the socket: no descriptors, a wrong magic, an oversized message each end in exit code 2, the worker keeps serving") {
  Node node;
  Daemon d({"--workers", "1"});
  const pid_t warm = *d.workers().begin();
  const std::string magic(plumb::daemon_wire::kRequestMagic, sizeof plumb::daemon_wire::kRequestMagic);
  for (const auto& [body, with_stdio] : std::vector<std::pair<std::string, bool>>{
           {magic + "CNI_COMMAND=VERSION", false},                                              // no descriptors
           {std::string("plumb-cni/9") + '\0' + "CNI_COMMAND=VERSION" + '\0', true},           // another protocol
           {magic + std::string(plumb::daemon_wire::kMaxRequestBytes, 'A') + '\0', true}}) {  // larger than a request
    const auto st = plumb::test::daemon_request(d.socket, body, with_stdio);
    CHECK(st.end == plumb::daemon_wire::End::kExited);
    CHECK(st.value == 2);
  }
  CHECK(d.workers() == std::set<pid_t>{warm});
  const auto v = plumb::test::run_bounded({kShim}, {{"PLUMB_DAEMON_SOCKET", d.socket}, {"CNI_COMMAND", "VERSION"}}, "{}");
  CHECK(v.exit_code == 0);
  CHECK(read_file(d.log).find("refused a request that is not plumb-shim's") != std::string::npos);
}

TEST_CASE("a node switches between thin and thick with pods on it: ADD by the plumb binary and DEL through the daemon, and the reverse") {
  Node node;
  PodFixture fx(node);
  Daemon d({"--workers", "1"});
  const std::map<std::string, std::string> via = {{"PLUMB_DAEMON_SOCKET", d.socket}};
  const std::string conf = fx.config();
  const std::string ns0 = node.add_netns("p0"), ns1 = node.add_netns("p1"), ns2 = node.add_netns("p2");
  for (const char* pod : {"p0", "p1", "p2"}) fx.add_pod("default", pod, "");
  REQUIRE(fx.run("ADD", "c0", ns0, "default", "p0", conf).exit_code == 0);  // the bridge stays after DEL
  REQUIRE(fx.run("DEL", "c0", ns0, "default", "p0", conf).exit_code == 0);
  const auto before = NodeSnapshot::take(node.dir(), {"p0", "p1", "p2"});

  Proc thin_add = fx.run("ADD", "c1", ns1, "default", "p1", conf);
  REQUIRE_MESSAGE(thin_add.exit_code == 0, thin_add.out << thin_add.err);
  Proc thick_del = fx.run_with(kShim, via, "DEL", "c1", ns1, "default", "p1", conf);
  CHECK_MESSAGE(thick_del.exit_code == 0, thick_del.out << thick_del.err);
  CHECK(plumb::test::link_names("p1") == std::set<std::string>{"lo"});

  Proc thick_add = fx.run_with(kShim, via, "ADD", "c2", ns2, "default", "p2", conf);
  REQUIRE_MESSAGE(thick_add.exit_code == 0, thick_add.out << thick_add.err);
  // A repeated ADD by the other mode returns the recorded result (CRI's retry), then DEL.
  Proc thin_again = fx.run("ADD", "c2", ns2, "default", "p2", conf);
  CHECK(thin_again.exit_code == 0);
  CHECK(thin_again.out == thick_add.out);
  Proc thin_del = fx.run("DEL", "c2", ns2, "default", "p2", conf);
  CHECK_MESSAGE(thin_del.exit_code == 0, thin_del.out << thin_del.err);

  PLUMB_CHECK_UNCHANGED(before, NodeSnapshot::take(node.dir(), {"p0", "p1", "p2"}));
  CHECK(d.served_by(2).size() == 2);
}

TEST_CASE("a worker reads the default network's config and a NAD file again when they change, rewritten in place at the same size") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("default", "blue", plumb::test::bridge_net("br-blue", "198.51.100.0/26", fx.ipam_dir()));
  fx.add_pod("default", "p1", "blue");
  fx.add_pod("default", "p2", "blue");
  // A worker keeps only files that had not changed for 2 s when it read them (file_memo.hpp):
  // these are kept by the first ADD.
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  Daemon d({"--workers", "1"});
  const std::map<std::string, std::string> via = {{"PLUMB_DAEMON_SOCKET", d.socket}};
  const std::string conf = fx.config();
  const std::string ns1 = node.add_netns("p1"), ns2 = node.add_netns("p2");
  Proc add1 = fx.run_with(kShim, via, "ADD", "c1", ns1, "default", "p1", conf);
  REQUIRE_MESSAGE(add1.exit_code == 0, add1.out << add1.err);
  CHECK(plumb::test::ipv4_of("p1", "eth0").ends_with("/24"));
  CHECK(plumb::test::ipv4_of("p1", "net1").ends_with("/26"));

  // Another prefix length in each file, rewritten in place (same inode) at the same size.
  const std::string nad_file = fx.store() + "/nads/default-blue.yaml";
  const std::string default_text = read_file(fx.default_conflist()), nad_text = read_file(nad_file);
  std::string new_default = default_text, new_nad = nad_text;
  new_default.replace(new_default.find("203.0.113.0/24"), 14, "203.0.113.0/28");
  new_nad.replace(new_nad.find("198.51.100.0/26"), 15, "198.51.100.0/27");
  auto inode = [](const std::string& path) {
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    return st.st_ino;
  };
  const ino_t nad_ino = inode(nad_file), default_ino = inode(fx.default_conflist());
  plumb::test::write_file(fx.default_conflist(), new_default);
  plumb::test::write_file(nad_file, new_nad);
  REQUIRE(inode(nad_file) == nad_ino);
  REQUIRE(inode(fx.default_conflist()) == default_ino);
  REQUIRE(fs::file_size(nad_file) == nad_text.size());
  REQUIRE(fs::file_size(fx.default_conflist()) == default_text.size());

  Proc add2 = fx.run_with(kShim, via, "ADD", "c2", ns2, "default", "p2", conf);
  REQUIRE_MESSAGE(add2.exit_code == 0, add2.out << add2.err);
  CHECK(plumb::test::ipv4_of("p2", "eth0").ends_with("/28"));
  CHECK(plumb::test::ipv4_of("p2", "net1").ends_with("/27"));
  const auto pids = d.served_by(2);
  CHECK(pids.size() == 2);
  CHECK(std::set<pid_t>(pids.begin(), pids.end()).size() == 1);  // the worker that kept the first versions
  CHECK(fx.run_with(kShim, via, "DEL", "c1", ns1, "default", "p1", conf).exit_code == 0);
  CHECK(fx.run_with(kShim, via, "DEL", "c2", ns2, "default", "p2", conf).exit_code == 0);
}

TEST_CASE("plumb-shim --probe (the thick DaemonSet's probe) succeeds only when a worker answers its VERSION request: no fallback to plumb") {
  Node node;
  plumb::test::TempDir dir;
  // The probe's environment as the container gives it: the socket, no CNI variables, and a
  // CNI_COMMAND left over from elsewhere is not what is sent.
  const std::map<std::string, std::string> nobody = {{"PLUMB_DAEMON_SOCKET", dir.path + "/nobody.sock"}, {"CNI_COMMAND", "ADD"}};
  Proc down = plumb::test::run({kShim, "--probe"}, nobody, "");
  CHECK(down.exit_code == 1);
  CHECK_MESSAGE(down.out.find("\"code\":11,") != std::string::npos, down.out);
  CHECK_MESSAGE(down.out.find("no plumb daemon answers") != std::string::npos, down.out);

  Daemon d({"--workers", "1"});
  const pid_t warm = *d.workers().begin();
  Proc up = plumb::test::run({kShim, "--probe"}, {{"PLUMB_DAEMON_SOCKET", d.socket}, {"CNI_COMMAND", "ADD"}}, "");
  REQUIRE_MESSAGE(up.exit_code == 0, up.out << up.err);
  CHECK(up.out.find("\"supportedVersions\"") != std::string::npos);
  CHECK(d.served_by(1) == std::vector<pid_t>{warm});
}

TEST_CASE(
    "a worker keeps the state directory open across invocations and lets go of it once moved away: the next ADD writes "
    "into the new one") {
  Node node;
  PodFixture fx(node);
  Daemon d({"--workers", "1"});
  const std::map<std::string, std::string> via = {{"PLUMB_DAEMON_SOCKET", d.socket}};
  const std::string conf = fx.config();
  const std::string moved = node.dir() + "/state.moved";
  auto holds = [](const std::set<std::string>& fds, const std::string& dir) {
    return std::any_of(fds.begin(), fds.end(), [&](const std::string& fd) { return fd.ends_with(" -> " + dir); });
  };
  const std::string ns1 = node.add_netns("p1"), ns2 = node.add_netns("p2");
  for (const char* pod : {"p1", "p2"}) fx.add_pod("default", pod, "");
  Proc add1 = fx.run_with(kShim, via, "ADD", "c1", ns1, "default", "p1", conf);
  REQUIRE_MESSAGE(add1.exit_code == 0, add1.out << add1.err);
  Proc del1 = fx.run_with(kShim, via, "DEL", "c1", ns1, "default", "p1", conf);
  REQUIRE_MESSAGE(del1.exit_code == 0, del1.out << del1.err);
  const pid_t worker = *d.workers().begin();
  CHECK(holds(idle_descriptors(worker), fx.state()));  // kept for the next invocation

  fs::rename(fx.state(), moved);  // the administrator's, between two invocations
  Proc add2 = fx.run_with(kShim, via, "ADD", "c2", ns2, "default", "p2", conf);
  REQUIRE_MESSAGE(add2.exit_code == 0, add2.out << add2.err);
  CHECK(fs::exists(fx.state() + "/containers/c2:eth0/0-eth0.json"));
  CHECK_FALSE(fs::exists(moved + "/containers/c2:eth0"));
  CHECK_FALSE(fs::exists(moved + "/locks/c2:eth0"));
  const auto fds = idle_descriptors(worker);
  CHECK(holds(fds, fx.state()));
  CHECK_FALSE(holds(fds, moved));
  CHECK_FALSE(holds(fds, moved + "/recycled"));
  Proc del2 = fx.run_with(kShim, via, "DEL", "c2", ns2, "default", "p2", conf);
  CHECK_MESSAGE(del2.exit_code == 0, del2.out << del2.err);
  CHECK_FALSE(fs::exists(fx.state() + "/containers/c2:eth0"));
  CHECK(d.served_by(4).size() == 4);
}
