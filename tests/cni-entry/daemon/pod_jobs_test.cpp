// The daemon's pod jobs (cni-entry/daemon/pod_jobs.cpp): which watched pod changes become jobs;
// the release job against the API test server on the loopback of a private node namespace (an
// allocation of a deleted pod released, a log line and an Event for it; a job's process on one
// API server connection); and `plumb daemon` watching that server: a running pod whose selection
// annotation the server changes is hot-plugged (the sandbox ADDed through plumb-shim; a DEL then removes everything),
// and a pod deleted from the server loses its allocation at once, each change an Event on the pod. The hot-plug's own
// cases (kills at each step) are in tests/cni-entry/pod/hotplug_test.cpp.
#include "cni-entry/daemon/pod_jobs.hpp"

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/base/json.hpp"
#include "ipam/cluster.hpp"
#include "ipam/cluster_kube.hpp"
#include "ipam/whereabouts.hpp"
#include "tests/support/kube_cluster.hpp"
#include "tests/support/plumb_daemon.hpp"
#include "tests/support/pod_fixture.hpp"

using namespace plumb;
namespace jobs = plumb::daemon::pod_jobs;
using plumb::test::eventually;
using plumb::test::KubeApiServer;
using plumb::test::KubeCluster;
using plumb::test::Node;
using plumb::test::Proc;

namespace {

json::Document pod_object(const std::string& annotations, const std::string& spec = "{}",
                          const std::string& extra_meta = "") {
  auto d = json::parse(R"({"metadata": {"namespace": "default", "name": "web", "annotations": )" + annotations +
                           extra_meta + R"(}, "spec": )" + spec + "}",
                       "test pod");
  REQUIRE(d.has_value());
  return std::move(*d);
}

struct Events {
  std::vector<std::string> seen;  // "type reason message"
  static void add(void* ctx, const jobs::Job&, const std::string& type, const std::string& reason,
                  const std::string& message) {
    static_cast<Events*>(ctx)->seen.push_back(type + " " + reason + " " + message);
  }
};

/// plumb's conflist on the node as `plumb install` writes it, its plugin `conf` (a plugin config).
std::string write_conflist(const Node& node, const std::string& conf) {
  const std::string path = node.dir() + "/00-plumb.conflist";
  plumb::test::write_file(path, R"({"cniVersion": "1.0.0", "name": "plumb", "plugins": [)" + conf + "]}");
  return path;
}

/// `plumb daemon` of node-1 watching `c`'s API server with plumb's conflist `conflist`, once its
/// pod watch runs.
struct WatchingDaemon {
  WatchingDaemon(const KubeCluster& c, const std::string& conflist)
      : d({"--workers", "1", "--kubeconfig", c.kubeconfig, "--node-name", "node-1", "--cni-config", conflist}) {
    REQUIRE_MESSAGE(eventually([&] { return c.api.count("GET", "/api/v1/pods") >= 2; }), plumb::test::read_file(d.log));
  }
  plumb::test::Daemon d;
};

/// The notes of the events.k8s.io/v1 Events the API server holds in namespace default, each
/// "<reason> <note>".
std::set<std::string> event_notes(const KubeCluster& c) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(c.api.dir() + "/objects/events/default", ec)) {
    auto d = json::parse(plumb::test::read_file(f.path().string()), "event");
    if (!d || !d->IsObject()) continue;
    const json::Value* reason = json::find(*d, "reason");
    const json::Value* note = json::find(*d, "note");
    if (reason != nullptr && note != nullptr && reason->IsString() && note->IsString()) {
      out.insert(std::string(reason->GetString()) + " " + note->GetString());
    }
  }
  return out;
}

std::map<std::string, std::string> selection(const std::string& json) {
  return {{"k8s.v1.cni.cncf.io/networks", json}};
}

}  // namespace

TEST_CASE("a changed selection annotation asks for a hot-plug; other updates, host-network and deleting pods do not") {
  const auto none = pod_object("{}");
  const auto blue = pod_object(R"({"k8s.v1.cni.cncf.io/networks": "blue"})");
  const auto green = pod_object(R"({"k8s.v1.cni.cncf.io/networks": "green"})");
  auto job = jobs::on_update(blue, green);
  REQUIRE(job.has_value());
  CHECK(job->kind == jobs::Job::Kind::Hotplug);
  CHECK(job->ns == "default");
  CHECK(job->name == "web");
  CHECK(jobs::on_update(none, blue).has_value());
  CHECK(jobs::on_update(blue, none).has_value());
  CHECK_FALSE(jobs::on_update(blue, blue).has_value());
  CHECK_FALSE(jobs::on_update(pod_object(R"({"other": "1"})"), pod_object(R"({"other": "2"})")).has_value());
  CHECK_FALSE(
      jobs::on_update(blue, pod_object(R"({"k8s.v1.cni.cncf.io/networks": "green"})", R"({"hostNetwork": true})"))
          .has_value());
  CHECK_FALSE(jobs::on_update(blue, pod_object(R"({"k8s.v1.cni.cncf.io/networks": "green"})", "{}",
                                               R"(, "deletionTimestamp": "2026-01-01T00:00:00Z")"))
                  .has_value());
  auto del = jobs::on_delete(blue);
  REQUIRE(del.has_value());
  CHECK(del->kind == jobs::Job::Kind::ReleaseAddresses);
  CHECK_FALSE(jobs::on_delete(pod_object("{}", R"({"hostNetwork": true})")).has_value());
}

/// Pod default/web's allocation (container c-dead) in IPPool kube-system/blue-192.0.2.0-24 of
/// `api`, web itself absent; plumb's configuration reaching `api` (token "tok").
plumb::pod::PlumbConfig dead_pod_allocation(const Node& node, const KubeApiServer& api) {
  api.set_tokens({"tok"});
  const std::string kubeconfig = node.dir() + "/kubeconfig";
  api.write_kubeconfig(kubeconfig, "token: tok");
  ipam::ClusterAccess access{kubeconfig, {}, "kube-system"};
  auto cfg = json::parse(R"({"type": "whereabouts", "range": "192.0.2.0/24", "network_name": "blue"})", "ipam");
  REQUIRE(cfg.has_value());
  auto k = ipam::cluster::make_kube(*ipam::cluster::parse_config(*cfg), "node-a", &access);
  REQUIRE(k.has_value());
  ipam::Request r;
  r.container_id = "c-dead";
  r.ifname = "net1";
  r.network_name = "blue";
  r.cni_args = {{"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "web"}};
  REQUIRE((*k)->add(r).has_value());

  plumb::pod::PlumbConfig conf;
  conf.kubeconfig = kubeconfig;
  conf.whereabouts_namespace = "kube-system";
  conf.state_dir = node.dir() + "/state";
  return conf;
}

TEST_CASE("the release job frees a deleted pod's allocation and says so in an Event") {
  Node node;
  KubeApiServer api(node.dir() + "/api");
  const plumb::pod::PlumbConfig conf = dead_pod_allocation(node, api);
  plumb::pod::Log log;
  Events events;
  CHECK(jobs::run(jobs::Job{jobs::Job::Kind::ReleaseAddresses, "default", "web"}, conf, log, &Events::add, &events) ==
        0);
  auto stored = json::parse(api.get("ippools", "kube-system", "blue-192.0.2.0-24"), "pool");
  REQUIRE(stored.has_value());
  auto p = ipam::whereabouts::decode_pool(*stored, "pool");
  REQUIRE(p.has_value());
  CHECK(p->allocations.empty());
  REQUIRE_FALSE(events.seen.empty());
  for (const auto& e : events.seen) {
    INFO(e);
    CHECK(e.rfind("Normal AddressReleased released ", 0) == 0);
    CHECK(e.find("of container c-dead") != std::string::npos);
    CHECK(e.find(": pod default/web no longer exists") != std::string::npos);
  }
  CHECK(events.seen.front().find("IPPool kube-system/blue-192.0.2.0-24") != std::string::npos);
}

TEST_CASE("a release job's process makes its IPPool requests and posts its Event on one API server connection") {
  Node node;
  KubeApiServer api(node.dir() + "/api");
  const plumb::pod::PlumbConfig conf = dead_pod_allocation(node, api);
  const size_t before = api.tls_connections();  // the allocation's own
  plumb::pod::Log log;
  const pid_t pid = jobs::start(jobs::Job{jobs::Job::Kind::ReleaseAddresses, "default", "web"}, conf, log);
  REQUIRE(pid > 0);
  int status = -1;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  INFO("requests: " << plumb::test::read_file(api.dir() + "/requests.log"));
  // The IPPool read and written (the pool and its reservation released), then the Events posted.
  auto stored = json::parse(api.get("ippools", "kube-system", "blue-192.0.2.0-24"), "pool");
  REQUIRE(stored.has_value());
  auto p = ipam::whereabouts::decode_pool(*stored, "pool");
  REQUIRE(p.has_value());
  CHECK(p->allocations.empty());
  CHECK(api.count("POST", "/apis/events.k8s.io/v1/namespaces/default/events", "201") >= 1);
  CHECK(api.tls_connections() == before + 1);
}

TEST_CASE(
    "the daemon hot-plugs a running pod whose selection annotation the API server changes; a DEL removes everything") {
  Node node;
  KubeCluster c(node);
  c.add_nad("default", "blue", plumb::test::bridge_net("br-blue", "198.51.100.0/24", c.fx.ipam_dir()));
  c.add_nad("default", "green", plumb::test::bridge_net("br-green", "192.0.2.0/24", c.fx.ipam_dir()));
  c.add_pod("default", "web", "uid-1", selection(R"([{"name": "blue", "interface": "blue1"}])"));
  WatchingDaemon w(c, write_conflist(node, c.config()));
  const std::string ns = node.add_netns("web");
  auto via_daemon = [&](const std::string& verb) {
    return c.run(verb, "ctr-1", ns, "default", "web", "uid-1", c.config(), {{"PLUMB_DAEMON_SOCKET", w.d.socket}},
                 plumb::test::plumb_shim_binary());
  };
  Proc add = via_daemon("ADD");
  REQUIRE_MESSAGE(add.exit_code == 0, add.out << add.err);
  INFO("daemon: " << plumb::test::read_file(w.d.log));

  c.add_pod("default", "web", "uid-1",
            selection(R"([{"name": "blue", "interface": "blue1"}, {"name": "green", "interface": "green1"}])"));
  CHECK(eventually([&] { return plumb::test::link_names("web").contains("green1"); }));
  CHECK(eventually(
      [&] { return c.network_status("default", "web").find(R"("name":"default/green")") != std::string::npos; }));
  c.add_pod("default", "web", "uid-1", selection(R"([{"name": "green", "interface": "green1"}])"));
  CHECK(eventually([&] { return plumb::test::link_names("web") == std::set<std::string>{"lo", "eth0", "green1"}; }));
  CHECK(eventually([&] { return c.network_status("default", "web").find("default/blue") == std::string::npos; }));
  // Each job logs its changes once they are made (after the network-status write).
  CHECK(eventually([&] {
    const std::string log = plumb::test::read_file(w.d.log);
    return log.find("pod [default/web]: added interface green1 to network: default/green") != std::string::npos &&
           log.find("pod [default/web]: removed interface blue1 from network: default/blue") != std::string::npos;
  }));
  CHECK(eventually([&] {
    auto notes = event_notes(c);
    return notes.contains("AddedInterface pod [default/web]: added interface green1 to network: default/green") &&
           notes.contains("RemovedInterface pod [default/web]: removed interface blue1 from network: default/blue");
  }));

  Proc del = via_daemon("DEL");
  CHECK_MESSAGE(del.exit_code == 0, del.err);
  CHECK(plumb::test::link_names("web") == std::set<std::string>{"lo"});
  CHECK(plumb::test::PodFixture::files_under(c.fx.state() + "/containers").empty());
}

TEST_CASE("a pod deleted from the API server loses its whereabouts allocation at once, by the daemon") {
  Node node;
  KubeCluster c(node);
  c.add_pod("default", "gone", "uid-g", {});
  ipam::ClusterAccess access{c.kubeconfig, {}, "kube-system"};
  auto cfg = json::parse(R"({"type": "whereabouts", "range": "192.0.2.0/24", "network_name": "blue"})", "ipam");
  REQUIRE(cfg.has_value());
  auto k = ipam::cluster::make_kube(*ipam::cluster::parse_config(*cfg), "node-1", &access);
  REQUIRE(k.has_value());
  ipam::Request r;
  r.container_id = "c-gone";
  r.ifname = "net1";
  r.network_name = "blue";
  r.cni_args = {{"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "gone"}};
  REQUIRE((*k)->add(r).has_value());
  WatchingDaemon w(c, write_conflist(node, c.config(R"("whereaboutsNamespace": "kube-system")")));
  INFO("daemon: " << plumb::test::read_file(w.d.log));
  auto held = [&] {
    auto stored = json::parse(c.api.get("ippools", "kube-system", "blue-192.0.2.0-24"), "pool");
    auto p = stored ? ipam::whereabouts::decode_pool(*stored, "pool")
                    : Result<ipam::whereabouts::IpPool>(std::unexpected(stored.error()));
    return p ? p->allocations.size() : size_t{99};
  };
  REQUIRE(held() == 1);
  c.api.remove("pods", "default", "gone");
  CHECK(eventually([&] { return held() == 0; }));
  CHECK(eventually([&] {
    return plumb::test::read_file(w.d.log).find("released IPPool kube-system/blue-192.0.2.0-24") != std::string::npos;
  }));
  CHECK(eventually([&] {
    auto notes = event_notes(c);
    return std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
      return n.starts_with("AddressReleased released IPPool kube-system/blue-192.0.2.0-24") &&
             n.ends_with("pod default/gone no longer exists");
    });
  }));
}
