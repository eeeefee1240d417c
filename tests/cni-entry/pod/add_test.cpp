// ADD (cni-entry/pod/add.cpp) as a runtime drives it: the key's lock covers the kernel changes and
// the records only, never a request to the API server, so a DEL of the sandbox never waits behind
// an ADD stuck on an unresponsive API server (multus-cni #586's other half); the Events it posts
// on the pod, as Multus's; the work it leaves for after the runtime's answer in a daemon worker
// (the Events, and network-status with statusAfterAnswer: written after the answer, retried,
// reported when it fails, never over the status of the pod's next sandbox).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "cni-entry/pod/config.hpp"
#include "cni-entry/pod/verbs.hpp"
#include "cni-entry/source/after_answer.hpp"
#include "tests/support/bounded_run.hpp"
#include "tests/support/kube_cluster.hpp"
#include "tests/support/plumb_daemon.hpp"

using plumb::test::Daemon;
using plumb::test::eventually;
using plumb::test::KubeCluster;
using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::Proc;
using plumb::test::read_file;
using plumb::test::write_file;
namespace fs = std::filesystem;

namespace {

/// Starts plumb in the background with `env` and stdin from `config_file`; returns its pid.
pid_t start_plumb(const std::map<std::string, std::string>& env, const std::string& config_file) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int in = ::open(config_file.c_str(), O_RDONLY);
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(in, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    plumb::test::exec_child({plumb::test::plumb_binary()}, env);
  }
  return pid;
}

}  // namespace

TEST_CASE("a DEL completes while the ADD of the same sandbox still waits for the API server's answer") {
  Node node;
  KubeCluster c(node);
  c.add_pod("default", "web", "uid-1", {});
  const std::string ns = node.add_netns("web");
  // The network-status PATCH is answered only after a long delay; the ADD waits for it.
  c.api.set_faults(R"([{"match": "^PATCH /api/v1/namespaces/default/pods/web/status", "action": "delay", "seconds": 300}])");
  const std::string conf = c.fx.config(R"("kubeconfig": ")" + c.kubeconfig + R"(", "apiTimeoutSeconds": 600, "apiRetries": 0)");
  write_file(node.dir() + "/conf.json", conf);
  std::map<std::string, std::string> env = {{"CNI_COMMAND", "ADD"},     {"CNI_CONTAINERID", "ctr-1"}, {"CNI_NETNS", ns},
                                            {"CNI_IFNAME", "eth0"},     {"CNI_PATH", "/usr/lib/cni"},
                                            {"CNI_ARGS", "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_UID=uid-1"}};
  pid_t add = start_plumb(env, node.dir() + "/conf.json");
  // The ADD has made and recorded everything once its record says "ready"; what is left is the
  // status PATCH the server holds.
  const std::string record = c.fx.state() + "/containers/ctr-1:eth0/0-eth0.json";
  bool ready = false;
  for (int i = 0; i < 600 && !ready; ++i) {  // polled, at most 60 s
    ready = read_file(record).find(R"("phase":"ready")") != std::string::npos;
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE(ready);

  env["CNI_COMMAND"] = "DEL";
  auto del = plumb::test::run_bounded({plumb::test::plumb_binary()}, env, conf, {.seconds = 120});
  INFO(del.out, del.err);
  // Still stuck on the API server while its sandbox's DEL has finished.
  const bool add_running = ::waitpid(add, nullptr, WNOHANG) == 0;
  CHECK(add_running);
  CHECK(del.exit_code == 0);
  CHECK(link_names("web") == std::set<std::string>{"lo"});
  CHECK(c.records().empty());

  c.api.stop();  // the held request fails at once: the ADD ends (its status write logged as failed)
  int status = 0;
  REQUIRE(::waitpid(add, &status, 0) == add);
  CHECK(WIFEXITED(status));
  CHECK(link_names("web") == std::set<std::string>{"lo"});
}

namespace {

/// The events.k8s.io/v1 Events the API server holds in namespace `ns`, oldest name first.
std::vector<rapidjson::Document> events_in(const KubeCluster& c, const std::string& ns) {
  std::vector<rapidjson::Document> out;
  const std::string dir = c.api.dir() + "/objects/events/" + ns;
  if (!std::filesystem::is_directory(dir)) return out;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    rapidjson::Document d;
    d.Parse(read_file(f).c_str());
    out.push_back(std::move(d));
  }
  return out;
}

std::string str(const rapidjson::Value& v, const char* key) {
  return v.HasMember(key) && v[key].IsString() ? v[key].GetString() : "";
}

}  // namespace

TEST_CASE(
    "ADD posts Multus's AddedInterface Event per attachment on the pod; a failed ADD a Warning naming the network and "
    "the error") {
  Node node;
  KubeCluster c(node);
  c.add_nad("default", "blue", plumb::test::bridge_net("br-blue", "198.51.100.0/24", c.fx.ipam_dir()));
  c.add_nad("default", "bad", R"({"cniVersion": "1.0.0", "type": "macvlan", "master": "nosuchlink0", "ipam": {}})");
  c.add_pod("default", "web", "uid-1", {{"k8s.v1.cni.cncf.io/networks", "blue"}});
  c.add_pod("default", "broken", "uid-2", {{"k8s.v1.cni.cncf.io/networks", "bad"}});

  const auto add = c.run("ADD", "ctr-1", node.add_netns("web"), "default", "web", "uid-1", c.config());
  REQUIRE_MESSAGE(add.exit_code == 0, add.out << add.err);
  auto events = events_in(c, "default");
  REQUIRE(events.size() == 2);
  std::vector<std::string> notes;
  for (const auto& e : events) {
    CHECK(str(e, "apiVersion") == "events.k8s.io/v1");
    CHECK(str(e, "reason") == "AddedInterface");
    CHECK(str(e, "type") == "Normal");
    CHECK(str(e, "reportingController") == "multus");
    CHECK(str(e, "reportingInstance").starts_with("plumb@"));
    CHECK(str(e["regarding"], "kind") == "Pod");
    CHECK(str(e["regarding"], "name") == "web");
    CHECK(str(e["regarding"], "uid") == "uid-1");
    CHECK(str(e["metadata"], "name").starts_with("web."));
    notes.push_back(str(e, "note"));
  }
  std::sort(notes.begin(), notes.end());
  // The default network's IPv4 and IPv6 addresses, as Multus's %v prints a list.
  CHECK(notes[0].starts_with("Add eth0 [203.0.113."));
  CHECK(notes[0].find("/24 2001:db8:0:1::") != std::string::npos);
  CHECK(notes[0].ends_with("/64] from default-net"));
  CHECK(notes[1] == "Add net1 [198.51.100.2/24] from default/blue");

  const auto failed = c.run("ADD", "ctr-2", node.add_netns("broken"), "default", "broken", "uid-2", c.config());
  REQUIRE(failed.exit_code != 0);
  rapidjson::Document warning;
  for (auto& e : events_in(c, "default")) {
    if (str(e, "type") == "Warning") warning = std::move(e);
  }
  REQUIRE(warning.IsObject());
  CHECK(str(warning, "reason") == "ErrorAddingInterface");
  CHECK(str(warning["regarding"], "name") == "broken");
  CHECK(str(warning, "note").starts_with("error adding container to network \"default/bad\": "));
  CHECK(str(warning, "note").find("nosuchlink0") != std::string::npos);
}

namespace {

/// The work an in-process ADD (as a daemon worker runs it) left for after its answer.
std::vector<std::function<void()>> add_in_process(const std::string& config, const std::string& cid,
                                                  const std::string& netns, const std::string& pod) {
  auto conf = plumb::pod::parse_config(config);
  REQUIRE_MESSAGE(conf, conf.error().text());
  plumb::cni::Env env;
  env.command = plumb::cni::Command::Add;
  env.container_id = cid;
  env.netns = netns;
  env.ifname = "eth0";
  env.path = "/usr/lib/cni";
  env.args = {{"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", pod}};
  std::vector<std::function<void()>> later;
  plumb::source::after_answer_queue() = &later;
  plumb::pod::Log log;
  auto out = plumb::pod::do_add(env, *conf, log);
  plumb::source::after_answer_queue() = nullptr;
  REQUIRE_MESSAGE(out, out.error().text());
  return later;
}

/// The pod's annotation `key` as the API server stores it ("" if none).
std::string pod_annotation(const KubeCluster& c, const std::string& pod, const std::string& key) {
  rapidjson::Document d;
  d.Parse(c.api.get("pods", "default", pod).c_str());
  if (!d.IsObject() || !d.HasMember("metadata") || !d["metadata"].HasMember("annotations")) return {};
  return str(d["metadata"]["annotations"], key.c_str());
}

const std::string kWebStatus = "/api/v1/namespaces/default/pods/web/status";
const std::map<std::string, std::string> kBlue = {{"k8s.v1.cni.cncf.io/networks", "blue"}};

/// plumb's config on the API server with statusAfterAnswer; requests may take 30 s (the held ones
/// below are held for less), one retry of a transient failure.
std::string after_answer_config(const KubeCluster& c) {
  return c.fx.config(R"("kubeconfig": ")" + c.kubeconfig +
                     R"(", "apiTimeoutSeconds": 30, "apiRetries": 1, "statusAfterAnswer": true)");
}

/// A statusAfterAnswer case's set-up: pod web (uid-1; on network blue when `blue`) on the API
/// server, whose answers to PATCHes of web's status follow `faults` (the test server's fault
/// rules), plumb's config with statusAfterAnswer (`conf`) and a daemon of `workers` workers.
struct AfterAnswer {
  KubeCluster c;
  Daemon d;
  std::string conf;

  AfterAnswer(Node& node, const std::string& workers, bool blue, const std::string& faults)
      : c(node), d({"--workers", workers}) {
    if (blue) c.add_nad("default", "blue", plumb::test::bridge_net("br-blue", "198.51.100.0/24", c.fx.ipam_dir()));
    c.add_pod("default", "web", "uid-1", blue ? kBlue : std::map<std::string, std::string>{});
    conf = after_answer_config(c);
    c.api.set_faults(faults);
  }

  /// `verb` (ADD or DEL) of web's sandbox `cid` in `netns` through the daemon's shim with
  /// `config`; it must succeed.
  void run(const std::string& verb, const std::string& cid, const std::string& netns, const std::string& config) {
    Proc p = c.run(verb, cid, netns, "default", "web", "uid-1", config, {{"PLUMB_DAEMON_SOCKET", d.socket}},
                   plumb::test::plumb_shim_binary());
    REQUIRE_MESSAGE(p.exit_code == 0, verb << " " << cid << ": " << p.out << p.err << read_file(d.log));
  }
};

}  // namespace

TEST_CASE("a local-store ADD in a daemon worker leaves no work for after its answer; an API server's its Events") {
  Node node;
  KubeCluster c(node);
  c.fx.add_pod("default", "local", "");
  c.add_pod("default", "web", "uid-1", {});
  // The embedded store posts no Events: the worker is free as soon as its shim has the answer.
  CHECK(add_in_process(c.fx.config(), "ctr-1", node.add_netns("local"), "local").empty());
  auto later = add_in_process(c.config(), "ctr-2", node.add_netns("web"), "web");
  CHECK(later.size() == 1);
  CHECK(events_in(c, "default").empty());
  for (auto& work : later) work();
  CHECK(events_in(c, "default").size() == 1);
}

TEST_CASE(
    "statusAfterAnswer: a daemon worker answers the ADD first, then writes network-status; an exec'd plumb before") {
  Node node;
  AfterAnswer a(node, "1", true,
                R"([{"match": "^PATCH /api/v1/namespaces/default/pods/web/status", "action": "delay", "seconds": 2}])");
  auto& c = a.c;
  c.add_pod("default", "db", "uid-2", {});
  a.run("ADD", "ctr-1", node.add_netns("web"), a.conf);
  // The server logs a request when it answers it: the shim had its answer before the PATCH's.
  CHECK(c.api.count("PATCH", kWebStatus) == 0);
  CHECK(link_names("web") == std::set<std::string>{"lo", "eth0", "net1"});
  REQUIRE(eventually([&] { return c.network_status("default", "web").find("198.51.100.2") != std::string::npos; }));
  CHECK(c.api.count("PATCH", kWebStatus, "200") == 1);
  CHECK(pod_annotation(c, "web", "plumb/sandbox") == "ctr-1:eth0");
  CHECK_MESSAGE(eventually([&] { return events_in(c, "default").size() == 2; }),
                read_file(a.d.log));  // then the Events

  // Thin: the runtime waits for the process anyway; written before it exits, as without the key.
  Proc thin = c.run("ADD", "ctr-2", node.add_netns("db"), "default", "db", "uid-2", a.conf);
  REQUIRE_MESSAGE(thin.exit_code == 0, thin.out << thin.err);
  CHECK(c.api.count("PATCH", "/api/v1/namespaces/default/pods/db/status", "200") == 1);
  CHECK(!c.network_status("default", "db").empty());
}

TEST_CASE(
    "statusAfterAnswer: a failing write is retried with back-off, logged and reported as a Warning Event; the ADD "
    "stands") {
  Node node;
  AfterAnswer a(node, "1", true,
                R"([{"match": "^PATCH /api/v1/namespaces/default/pods/web/status", "action": "fail", "code": 500}])");
  auto& c = a.c;
  a.run("ADD", "ctr-1", node.add_netns("web"), a.conf);
  rapidjson::Document warning;
  REQUIRE(eventually([&] {
    for (auto& e : events_in(c, "default")) {
      if (str(e, "type") == "Warning") warning = std::move(e);
    }
    return warning.IsObject();
  }));
  CHECK(str(warning, "reason") == "ErrorWritingNetworkStatus");
  CHECK(str(warning["regarding"], "name") == "web");
  CHECK(str(warning, "note").starts_with("network-status of pod default/web not written: "));
  CHECK(str(warning, "note").find("500") != std::string::npos);
  // 4 attempts, each with the client's own retry (apiRetries 1).
  CHECK(c.api.count("PATCH", kWebStatus, "500") == 8);
  CHECK(c.network_status("default", "web").empty());
  CHECK(read_file(a.d.log).find("ADD ctr-1: network-status of pod default/web not written after 4 attempt(s)") !=
        std::string::npos);
  CHECK(link_names("web") == std::set<std::string>{"lo", "eth0", "net1"});  // never the ADD's failure
}

TEST_CASE("statusAfterAnswer: a DEL of the sandbox while its write is retried: the write is not made again") {
  Node node;
  // The first PATCH is held, then refused (the client's retry too): the next attempt comes after
  // the DEL.
  AfterAnswer a(
      node, "2", false,
      R"([{"match": "^PATCH /api/v1/namespaces/default/pods/web/status", "action": "delay", "seconds": 4, "times": 1},
          {"match": "^PATCH /api/v1/namespaces/default/pods/web/status", "action": "fail", "code": 500, "times": 2}])");
  auto& c = a.c;
  const std::string ns = node.add_netns("web");
  a.run("ADD", "ctr-1", ns, a.conf);
  a.run("DEL", "ctr-1", ns, a.conf);
  REQUIRE_MESSAGE(c.api.count("PATCH", kWebStatus) == 0, "the DEL came after the held write");
  CHECK(eventually([&] { return events_in(c, "default").size() == 1; }));  // the after-answer work done
  CHECK(c.api.count("PATCH", kWebStatus, "500") == 2);
  CHECK(c.api.count("PATCH", kWebStatus) == 2);
  CHECK(c.network_status("default", "web").empty());
}

TEST_CASE(
    "statusAfterAnswer: a write overtaken by the sandbox's DEL and the next sandbox's status never lands over it") {
  Node node;
  // ctr-1's PATCH is held while its sandbox is deleted and the next sandbox's ADD writes its own.
  AfterAnswer a(
      node, "2", false,
      R"([{"match": "^PATCH /api/v1/namespaces/default/pods/web/status", "action": "delay", "seconds": 8, "times": 1}])");
  auto& c = a.c;
  const std::string ns1 = node.add_netns("web");
  a.run("ADD", "ctr-1", ns1, a.conf);
  a.run("DEL", "ctr-1", ns1, a.conf);
  a.run("ADD", "ctr-2", node.add_netns("web2"), c.config());  // Multus's order
  REQUIRE_MESSAGE(c.api.count("PATCH", kWebStatus) == 1, "ctr-1's write was still held");
  CHECK(pod_annotation(c, "web", "plumb/sandbox") == "ctr-2:eth0");
  // ctr-1's held write is refused (the pod changed since its read), and not made again: its
  // sandbox is gone. Its Event comes after.
  REQUIRE(eventually([&] { return events_in(c, "default").size() == 2; }));
  CHECK(c.api.count("PATCH", kWebStatus, "409") == 1);
  CHECK(c.api.count("PATCH", kWebStatus, "200") == 1);
  CHECK(pod_annotation(c, "web", "plumb/sandbox") == "ctr-2:eth0");
}
