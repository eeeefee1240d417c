// engine/base/spawn: running another program as plumb runs delegated CNI plugins — exactly the
// given environment, no inherited descriptors, stdin written only after on_started, stdout and
// stderr captured, exit status and signals reported, the process group killed at the deadline,
// in another root (chrootDir) the same, chrooted; and end_orphan() ending a recorded child (or
// leaving a reused pid alone).
#include "engine/base/spawn.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>

#include "tests/support/node_root.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;
using namespace std::chrono_literals;

namespace {

process::SpawnRequest sh(const std::string& script, std::chrono::milliseconds timeout = 10s) {
  process::SpawnRequest r;
  r.path = "/bin/sh";
  r.argv = {"sh", "-c", script};
  r.env = {"PATH=/usr/bin:/bin"};
  r.timeout = timeout;
  return r;
}

bool alive(pid_t pid) {
  auto t = process::start_time(pid);
  return t && t->has_value();
}

}  // namespace

TEST_CASE("spawn: stdin in, stdout and stderr out, exit status, exactly the given environment") {
  auto r = sh("cat; echo err-line >&2; env | sort; exit 3");
  r.env = {"PATH=/usr/bin:/bin", "CNI_COMMAND=ADD", "ONLY=this"};
  r.stdin_data = "{\"config\": true}\n";
  auto o = process::run(r);
  REQUIRE_MESSAGE(o.has_value(), o.error().text());
  CHECK(o->exit_code == 3);
  CHECK(o->signal == 0);
  CHECK_FALSE(o->timed_out);
  CHECK(o->err == "err-line\n");
  // sh adds PWD (and may add SHLVL/_); nothing of the test process's own environment arrives.
  CHECK(o->out.rfind("{\"config\": true}\nCNI_COMMAND=ADD\nONLY=this\nPATH=/usr/bin:/bin\n", 0) == 0);
  CHECK(o->out.find("HOME=") == std::string::npos);
  CHECK(o->out.find("PLUMB") == std::string::npos);
}

TEST_CASE("spawn: no descriptor but 0, 1 and 2 reaches the child, even one without close-on-exec") {
  int leaked = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC on purpose
  REQUIRE(leaked >= 3);
  process::SpawnRequest r;
  r.path = "/bin/ls";
  r.argv = {"ls", "/proc/self/fd"};
  auto o = process::run(r);
  ::close(leaked);
  REQUIRE(o.has_value());
  REQUIRE(o->exit_code == 0);
  // ls itself opens one descriptor (3) to read the directory.
  CHECK(o->out == "0\n1\n2\n3\n");
}

TEST_CASE("spawn: a large stdin and output pass whole (no deadlock between the pipes)") {
  std::string big(3u << 20, 'x');
  auto r = sh("cat; cat /dev/zero | head -c 2000000 >&2");
  r.stdin_data = big;
  auto o = process::run(r);
  REQUIRE(o.has_value());
  CHECK(o->exit_code == 0);
  CHECK(o->out == big);
  CHECK(o->err.size() == 2000000);
}

TEST_CASE("spawn: the child is recorded before it gets stdin; an error there kills it unfed") {
  plumb::test::Node node;
  const std::string marker = node.dir() + "/got-stdin";
  auto r = sh("cat > " + marker + "; sleep 30");
  r.stdin_data = "config";
  pid_t seen = 0;
  bool stdin_before = false;
  r.on_started = [&](const process::Child& c) -> Status {
    seen = c.pid;
    CHECK(c.start_time > 0);
    std::this_thread::sleep_for(100ms);
    stdin_before = std::filesystem::exists(marker) && std::filesystem::file_size(marker) > 0;
    return fail(cni_code::kIo, "record failed");
  };
  auto start = std::chrono::steady_clock::now();
  auto o = process::run(r);
  REQUIRE_FALSE(o.has_value());
  CHECK(o.error().msg == "record failed");
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK(seen > 0);
  CHECK_FALSE(stdin_before);
  CHECK_FALSE(alive(seen));
  CHECK(plumb::test::read_file(marker).empty());  // cat never got a byte
}

TEST_CASE("spawn: the deadline kills the whole process group, stderr so far is kept") {
  plumb::test::Node node;
  const std::string pids = node.dir() + "/pids";
  auto r = sh("sleep 60 & echo $! > " + pids + "; echo started >&2; sleep 60", 500ms);
  auto start = std::chrono::steady_clock::now();
  auto o = process::run(r);
  auto took = std::chrono::steady_clock::now() - start;
  REQUIRE(o.has_value());
  CHECK(o->timed_out);
  CHECK(o->signal == SIGKILL);
  CHECK(o->err == "started\n");
  CHECK(took >= 500ms);
  CHECK(took < 5s);
  // The background sleep of the same group is gone too (reaped by init, or a zombie at most).
  pid_t bg = static_cast<pid_t>(std::stol(plumb::test::read_file(pids)));
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    auto st = plumb::test::read_file("/proc/" + std::to_string(bg) + "/stat");
    gone = st.empty() || st.find(") Z ") != std::string::npos;
    if (!gone) std::this_thread::sleep_for(10ms);
  }
  CHECK(gone);
}

TEST_CASE("spawn: a relative path or a missing binary is an error naming it") {
  process::SpawnRequest r;
  r.path = "sh";
  auto rel = process::run(r);
  REQUIRE_FALSE(rel.has_value());
  CHECK(rel.error().msg.find("\"sh\" is not an absolute path") != std::string::npos);
  r.path = "/nonexistent/plugin";
  auto missing = process::run(r);
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().sys_errno == ENOENT);
  CHECK(missing.error().msg.find("/nonexistent/plugin") != std::string::npos);
}

TEST_CASE("spawn in another root (chrootDir): the child runs chrooted there, as the other spawns do in everything else") {
  plumb::test::Node node;
  plumb::test::NodeRoot root;
  plumb::test::write_file(root.outside("/etc/node-only"), "only on the node\n");
  REQUIRE_FALSE(std::filesystem::exists("/etc/node-only"));
  auto r = sh("cat /etc/node-only; pwd; echo $(ls /proc/self/fd); echo $$ $(cut -d' ' -f5 /proc/$$/stat); cat");
  r.root = root.path();
  r.stdin_data = "stdin reached it\n";
  auto o = process::run(r);
  REQUIRE_MESSAGE(o.has_value(), o.error().text());
  INFO("stderr: ", o->err);
  CHECK(o->exit_code == 0);
  std::istringstream lines(o->out);
  std::string file, cwd, fds, ids, in;
  std::getline(lines, file);
  std::getline(lines, cwd);
  std::getline(lines, fds);
  std::getline(lines, ids);
  std::getline(lines, in);
  CHECK(file == "only on the node");
  CHECK(cwd == "/");
  CHECK(fds == "0 1 2 3");  // 3: ls's own directory
  const auto space = ids.find(' ');
  CHECK(ids.substr(0, space) == ids.substr(space + 1));  // its own process group
  CHECK(in == "stdin reached it");

  // Without the root the file is not there; a path missing in the root is an error naming both.
  auto outside = process::run(sh("cat /etc/node-only"));
  REQUIRE(outside.has_value());
  CHECK(outside->exit_code != 0);
  process::SpawnRequest missing = sh("true");
  missing.path = "/usr/local/bin/not-on-the-node";
  missing.root = root.path();
  auto m = process::run(missing);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().sys_errno == ENOENT);
  CHECK(m.error().msg.find("/usr/local/bin/not-on-the-node in root " + root.path()) != std::string::npos);
}

TEST_CASE("end_orphan: kills a recorded child's group, leaves a finished or reused pid alone") {
  // A "plugin" this process started but does not wait for, as if its starter had been killed.
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    setpgid(0, 0);
    execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
    _exit(127);
  }
  std::this_thread::sleep_for(50ms);
  auto t = process::start_time(pid);
  REQUIRE(t.has_value());
  REQUIRE(t->has_value());
  // A wrong start time is another process that happens to have the pid: left alone.
  REQUIRE(process::end_orphan({pid, **t + 1}, 1s).has_value());
  CHECK(alive(pid));
  REQUIRE(process::end_orphan({pid, **t}, 5s).has_value());
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  CHECK(process::end_orphan({pid, **t}, 1s).has_value());  // gone: nothing to do
}
