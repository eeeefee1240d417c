// Multus's thin-plugin keys (cni-entry/pod/config_multus.cpp), each honoured with Multus's
// meaning or refused by name: logLevel's Multus levels (verbose, panic), logToStderr, cniDir,
// binDir, readinessindicatorfile (ADD waits, then fails; STATUS answers now), retryDeleteOnError,
// auxiliaryCNIChainName (the clusterNetwork directory's drop-ins run as one more attachment),
// logOptions (parsed here; the rotation itself in log_test) and chrootDir (a daemon runs delegated
// plugins in the node's root, as Multus's thick daemon; an exec'd plumb, already in it, does not).
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "cni-entry/pod/config.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/foreign_plugin.hpp"
#include "tests/support/node_root.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/unix_socket.hpp"

using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;

namespace {

plumb::pod::PlumbConfig parsed(const std::string& members) {
  auto c = plumb::pod::parse_config(R"({"cniVersion": "1.0.0", "name": "n", "type": "plumb", "clusterNetwork": "x")" +
                                    (members.empty() ? "" : ", " + members) + "}");
  REQUIRE_MESSAGE(c.has_value(), c.error().text());
  return std::move(*c);
}

std::string parse_error(const std::string& members) {
  auto c = plumb::pod::parse_config(R"({"cniVersion": "1.0.0", "name": "n", "type": "plumb", )" + members + "}");
  REQUIRE_FALSE(c.has_value());
  return c.error().msg;
}

}  // namespace

TEST_CASE("parse: Multus's keys and their defaults") {
  auto d = parsed("");
  CHECK(d.bin_dir == "/opt/cni/bin");
  CHECK(d.log_to_stderr);
  CHECK(d.readiness_indicator_file.empty());
  CHECK(d.readiness_timeout_seconds == 45);
  CHECK(d.delegate_timeout_seconds == 60);
  CHECK(d.log_rotation.max_size_mb == 100);  // Multus's lumberjack defaults for logFile
  CHECK(d.log_rotation.max_age_days == 5);
  CHECK(d.log_rotation.max_backups == 5);
  CHECK(d.log_rotation.compress);
  auto c = parsed(R"("binDir": "/host/opt/cni/bin", "cniDir": "/var/lib/cni/multus", "logToStderr": false,
                     "readinessindicatorfile": "/run/flannel/subnet.env", "retryDeleteOnError": true, "logLevel": "VERBOSE",
                     "delegateTimeoutSeconds": 2.5)");
  CHECK(c.bin_dir == "/host/opt/cni/bin");
  CHECK(c.state_dir == "/var/lib/cni/multus");  // cniDir is Multus's name for plumb's stateDir
  CHECK_FALSE(c.log_to_stderr);
  CHECK(c.readiness_indicator_file == "/run/flannel/subnet.env");
  CHECK(c.retry_delete_on_error);
  CHECK(c.log_level == "verbose");
  CHECK(c.delegate_timeout_seconds == 2.5);
  CHECK(parsed(R"("logLevel": "panic")").log_level == "panic");
  CHECK(parse_error(R"("logLevel": "trace")") == "plumb config.logLevel \"trace\" must be panic, error, warning, verbose, info or debug");
  CHECK(parse_error(R"("cniDir": "/a", "stateDir": "/b")").find("cniDir \"/a\" and stateDir \"/b\"") != std::string::npos);
  CHECK(parse_error(R"("delegateTimeoutSeconds": 0)") == "plumb config.delegateTimeoutSeconds 0 must be a number of seconds in (0, 600]");
  CHECK(parse_error(R"("binDir": "bin")") == "plumb config.binDir \"bin\" must be an absolute path");
  CHECK(parse_error(R"("delegates": [1])").find("delegates[0] must be a CNI config object") != std::string::npos);
  // Multus's docs: "logOptions": {"maxAge": 5, "maxSize": 100, "maxBackups": 5, "compress": true}.
  auto r = parsed(R"("logOptions": {"maxAge": 7, "maxSize": 10, "maxBackups": 2, "compress": false}, "auxiliaryCNIChainName": "chain")");
  CHECK(r.log_rotation.max_age_days == 7);
  CHECK(r.log_rotation.max_size_mb == 10);
  CHECK(r.log_rotation.max_backups == 2);
  CHECK_FALSE(r.log_rotation.compress);
  CHECK(parsed(R"("logOptions": {"maxSize": 1})").log_rotation.max_backups == 5);  // what is not given keeps the default
  CHECK(parse_error(R"("logOptions": {"maxAge": -1})") == "plumb config.logOptions.maxAge -1 must be 0..1000000");
  CHECK(r.auxiliary_chain_name == "chain");
  CHECK(parse_error(R"("auxiliaryCNIChainName": "../x")").rfind("plumb config.auxiliaryCNIChainName \"../x\" is not a valid network name", 0) == 0);
}

TEST_CASE("logLevel verbose works (it failed every ADD), panic logs errors only, logToStderr false keeps stderr quiet") {
  Node node;
  PodFixture fx(node);
  fx.add_pod("default", "web", "");
  std::string pod = node.add_netns("web");
  // fx.config() sets "logLevel": "debug"; a later duplicate key is not read, so build the text.
  auto conf = [&](const std::string& level, const std::string& extra) {
    std::string c = fx.config(extra);
    c.replace(c.find(R"("logLevel": "debug")"), 19, R"("logLevel": ")" + level + "\"");
    return c;
  };
  Proc verbose = fx.run("ADD", "ctr-1", pod, "default", "web", conf("verbose", ""));
  INFO(verbose.out, verbose.err);
  REQUIRE(verbose.exit_code == 0);
  CHECK(verbose.err.find("plumb info: ADD ctr-1: 1 attachment(s)") != std::string::npos);
  Proc panic = fx.run("DEL", "ctr-1", pod, "default", "web", conf("panic", ""));
  CHECK(panic.exit_code == 0);
  CHECK(panic.err.empty());
  const std::string log = node.dir() + "/plumb.log";
  Proc quiet = fx.run("ADD", "ctr-2", pod, "default", "web", conf("verbose", R"("logToStderr": false, "logFile": ")" + log + "\""));
  CHECK(quiet.exit_code == 0);
  CHECK(quiet.err.empty());
  CHECK(plumb::test::read_file(log).find("plumb info: ADD ctr-2: 1 attachment(s)") != std::string::npos);
  REQUIRE(fx.run("DEL", "ctr-2", pod, "default", "web", fx.config()).exit_code == 0);
}

TEST_CASE("cniDir holds plumb's records like stateDir") {
  Node node;
  PodFixture fx(node);
  fx.add_pod("default", "web", "");
  std::string pod = node.add_netns("web");
  std::string conf = fx.config();
  const std::string key = R"("stateDir": ")";
  conf.replace(conf.find(key), key.size(), R"("cniDir": ")");  // the same directory, under Multus's key
  REQUIRE(conf.find("stateDir") == std::string::npos);
  REQUIRE(fx.run("ADD", "ctr-1", pod, "default", "web", conf).exit_code == 0);
  CHECK(std::filesystem::exists(fx.state() + "/containers/ctr-1:eth0"));
  REQUIRE(fx.run("DEL", "ctr-1", pod, "default", "web", conf).exit_code == 0);
  CHECK_FALSE(std::filesystem::exists(fx.state() + "/containers/ctr-1:eth0"));
}

TEST_CASE("readinessindicatorfile: ADD waits for it then fails with nothing done; one that appears meanwhile is waited for") {
  Node node;
  PodFixture fx(node);
  fx.add_pod("default", "web", "");
  std::string pod = node.add_netns("web");
  const std::string ready = node.dir() + "/flannel-ready";
  const std::string conf = fx.config(R"("readinessindicatorfile": ")" + ready + R"(", "readinessTimeoutSeconds": 1)");
  auto start = std::chrono::steady_clock::now();
  Proc waited = fx.run("ADD", "ctr-1", pod, "default", "web", conf);
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(waited.exit_code != 0);
  CHECK(waited.out.find(R"("code":11)") != std::string::npos);
  CHECK(waited.out.find("readinessindicatorfile " + ready + " does not exist after 1 s") != std::string::npos);
  CHECK(took >= std::chrono::seconds(1));
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
  Proc status = plumb::test::run({plumb::test::plumb_binary()}, {{"CNI_COMMAND", "STATUS"}}, fx.config(
      R"("readinessindicatorfile": ")" + ready + R"(")", "1.1.0"));
  CHECK(status.out.find(R"("code":50)") != std::string::npos);
  CHECK(status.out.find("readinessindicatorfile " + ready + " does not exist") != std::string::npos);

  const std::string patient = fx.config(R"("readinessindicatorfile": ")" + ready + R"(", "readinessTimeoutSeconds": 10)");
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    std::ofstream(ready) << "ok";
  });
  Proc add = fx.run("ADD", "ctr-1", pod, "default", "web", patient);
  later.join();
  INFO(add.out, add.err);
  CHECK(add.exit_code == 0);
  REQUIRE(fx.run("DEL", "ctr-1", pod, "default", "web", patient).exit_code == 0);
}

TEST_CASE("auxiliaryCNIChainName as in Multus's docs: passthru, then the drop-ins of <clusterNetwork's directory>/<name>/, as the pod's last attachment") {
  Node node;
  PodFixture fx(node);
  plumb::test::ForeignBin bin(node);
  bin.install_fake();
  fx.add_pod("default", "web", "");
  // Multus's example: "auxiliaryCNIChainName": "cni-chain-config", the drop-ins in
  // /etc/cni/net.d/cni-chain-config/*.conf beside the clusterNetwork file.
  const std::string dir = std::filesystem::path(fx.default_conflist()).parent_path().string() + "/cni-chain-config";
  plumb::test::write_file(dir + "/10-vendor.conf", bin.fake_plugin(R"("podIfname": "aux0", "address": "192.0.2.9/24")"));
  const std::string conf = fx.config(R"("auxiliaryCNIChainName": "cni-chain-config", )" + bin.bin_dir_key());
  std::string pod = node.add_netns("web");
  Proc add = fx.run("ADD", "ctr-1", pod, "default", "web", conf);
  INFO(add.out, add.err);
  REQUIRE(add.exit_code == 0);
  // The chain is the last attachment, net1 (Multus's getIfname: net<position>); the drop-in ran
  // chained after passthru's empty result, in the chain's name.
  auto adds = bin.calls("ADD");
  REQUIRE(adds.size() == 1);
  CHECK(std::string(adds[0].env["CNI_IFNAME"].GetString()) == "net1");
  CHECK(std::string(adds[0].stdin["name"].GetString()) == "cni-chain-config");
  REQUIRE(adds[0].stdin.HasMember("prevResult"));
  const auto& prev = adds[0].stdin["prevResult"];
  CHECK((!prev.HasMember("interfaces") || prev["interfaces"].Size() == 0));
  CHECK((!prev.HasMember("ips") || prev["ips"].Size() == 0));
  CHECK(plumb::test::link_names("web") == std::set<std::string>{"lo", "eth0", "aux0"});
  REQUIRE(fx.run("DEL", "ctr-1", pod, "default", "web", conf).exit_code == 0);
  CHECK(bin.calls("DEL").size() == 1);
  CHECK(plumb::test::link_names("web") == std::set<std::string>{"lo"});

  // No drop-in: no chain (Multus adds it only with plugins besides passthru).
  std::filesystem::remove_all(dir);
  Proc plain = fx.run("ADD", "ctr-2", pod, "default", "web", conf);
  REQUIRE(plain.exit_code == 0);
  CHECK(bin.calls("ADD").size() == 1);
  REQUIRE(fx.run("DEL", "ctr-2", pod, "default", "web", conf).exit_code == 0);

  // clusterNetwork not a path (a NAD): Multus's error.
  fx.add_nad("kube-system", "kindnet", R"({"cniVersion": "1.0.0", "type": "bridge", "bridge": "br-kind"})");
  Proc nopath = fx.run("ADD", "ctr-3", pod, "default", "web",
                       R"({"cniVersion": "1.0.0", "name": "plumb", "type": "plumb", "clusterNetwork": "kindnet", "storeDir": ")" + fx.store() +
                           R"(", "stateDir": ")" + fx.state() + R"(", "auxiliaryCNIChainName": "cni-chain-config"})");
  CHECK(nopath.exit_code != 0);
  CHECK(nopath.out.find("clusterNetwork must be a path") != std::string::npos);
  CHECK(plumb::test::link_names("web") == std::set<std::string>{"lo"});
}

TEST_CASE("chrootDir: an absolute path; \"/\" is plumb's own root") {
  CHECK(parsed("").chroot_dir.empty());
  CHECK(parsed(R"("chrootDir": "/hostroot")").chroot_dir == "/hostroot");
  CHECK(parsed(R"("chrootDir": "/")").chroot_dir.empty());
  CHECK(parse_error(R"("chrootDir": "hostroot")").find("chrootDir \"hostroot\" must be an absolute path") != std::string::npos);
}

namespace {

/// A node agent's socket (Calico's, Cilium's, OVN-Kubernetes's ...) at `path`: answers one
/// connection's line "ADD <id>" with "hello <id>", then closes. Bounded: gives up after 60 s.
class NodeAgent {
 public:
  explicit NodeAgent(const std::string& path) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa = plumb::test::unix_address(path);
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    REQUIRE(::listen(listener_, 4) == 0);
    thread_ = std::thread([this] {
      timeval tv{60, 0};
      ::setsockopt(listener_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      const int c = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      char buf[256] = {0};
      const ssize_t n = ::recv(c, buf, sizeof buf - 1, 0);
      std::string line(buf, n > 0 ? static_cast<size_t>(n) : 0);
      if (line.rfind("ADD ", 0) == 0) {
        const std::string reply = "hello " + line.substr(4);
        (void)!::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      }
      ::close(c);
    });
  }
  ~NodeAgent() {
    ::shutdown(listener_, SHUT_RDWR);  // ends a pending accept
    thread_.join();
    ::close(listener_);
  }
  NodeAgent(const NodeAgent&) = delete;
  NodeAgent& operator=(const NodeAgent&) = delete;

 private:
  int listener_ = -1;
  std::thread thread_;
};

}  // namespace

TEST_CASE("chrootDir: plumb daemon runs the delegated primary network in the node's root (its files and agent socket there); an exec'd plumb, on the node already, does not chroot") {
  Node node;
  PodFixture fx(node);
  plumb::test::ForeignBin bin(node);
  bin.install_fake("node-net");
  plumb::test::NodeRoot root;
  root.bind(node.dir());  // the plugins, their records and plumb's state at the node's paths
  // What only the node has, as Flannel's subnet.env and an agent's socket.
  plumb::test::write_file(root.outside("/run/flannel/subnet.env"), "FLANNEL_SUBNET=198.51.100.0/24\n");
  REQUIRE_FALSE(std::filesystem::exists("/run/flannel/subnet.env"));
  NodeAgent agent(root.outside("/run/node-agent/agent.sock"));
  plumb::test::write_file(fx.default_conflist(),
                          R"({"cniVersion": "1.0.0", "name": "node-net", "plugins": [)" +
                              bin.fake_plugin(R"("nodeFile": "/run/flannel/subnet.env", "agentSocket": "/run/node-agent/agent.sock")", "node-net") +
                              "]}");
  fx.add_pod("default", "web", "");
  const std::string conf = fx.config(R"("chrootDir": ")" + root.path() + R"(", "binDir": ")" + bin.dir() + R"(")");
  const std::string pod = node.add_netns("web");

  // plumb executed by the runtime runs on the node: chrootDir is not for it, the plugin does not find the node's file.
  Proc direct = fx.run("ADD", "ctr-0", pod, "default", "web", conf);
  CHECK(direct.exit_code != 0);
  CHECK_MESSAGE(direct.out.find("cannot read /run/flannel/subnet.env") != std::string::npos, direct.out);
  REQUIRE(fx.run("DEL", "ctr-0", pod, "default", "web", conf).exit_code == 0);

  plumb::test::TempDir run;
  const std::string socket = run.path + "/plumb.sock";
  pid_t daemon = plumb::test::start_child({plumb::test::plumb_binary(), "daemon", "--socket", socket, "--workers", "1"}, {}, run.path + "/log");
  REQUIRE(daemon > 0);
  CHECK(plumb::test::eventually([&] { return std::filesystem::exists(socket); }));
  const std::map<std::string, std::string> via = {{"PLUMB_DAEMON_SOCKET", socket}};
  Proc add = fx.run_with(plumb::test::plumb_shim_binary(), via, "ADD", "ctr-1", pod, "default", "web", conf);
  INFO("ADD: ", add.out, add.err, "\ndaemon: ", plumb::test::read_file(run.path + "/log"));
  CHECK(add.exit_code == 0);
  auto adds = bin.calls("ADD");
  REQUIRE(adds.size() == 1);
  CHECK(adds[0].node_file == "FLANNEL_SUBNET=198.51.100.0/24\n");
  CHECK(adds[0].agent_reply == "hello ctr-1");
  CHECK(plumb::test::link_names("web") == std::set<std::string>{"lo", "eth0"});
  Proc del = fx.run_with(plumb::test::plumb_shim_binary(), via, "DEL", "ctr-1", pod, "default", "web", conf);
  CHECK_MESSAGE(del.exit_code == 0, del.out << del.err);
  CHECK(plumb::test::link_names("web") == std::set<std::string>{"lo"});
  plumb::test::stop_child(daemon, std::chrono::milliseconds(5000));
}
