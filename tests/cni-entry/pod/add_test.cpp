// ADD (cni-entry/pod/add.cpp) as a runtime drives it: the key's lock covers the kernel changes and
// the records only, never a request to the API server, so a DEL of the sandbox never waits behind
// an ADD stuck on an unresponsive API server (multus-cni #586's other half); the Events it posts
// on the pod, as Multus's.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "tests/support/bounded_run.hpp"
#include "tests/support/kube_cluster.hpp"

using plumb::test::KubeCluster;
using plumb::test::link_names;
using plumb::test::Node;
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
