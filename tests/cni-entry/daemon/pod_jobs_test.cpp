// The daemon's pod jobs (cni-entry/daemon/pod_jobs.cpp): which watched pod changes become jobs,
// and the release job against the API test server on the loopback of a private node namespace
// (an allocation of a deleted pod released, a log line and an Event for it). The hot-plug job's
// work is tested in tests/cni-entry/pod/hotplug_test.cpp.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "cni-entry/daemon/pod_jobs.hpp"
#include "engine/base/json.hpp"
#include "ipam/cluster.hpp"
#include "ipam/cluster_kube.hpp"
#include "ipam/whereabouts.hpp"
#include "tests/support/kube_cluster.hpp"

using namespace plumb;
namespace jobs = plumb::daemon::pod_jobs;
using plumb::test::KubeApiServer;
using plumb::test::Node;

namespace {

json::Document pod_object(const std::string& annotations, const std::string& spec = "{}", const std::string& extra_meta = "") {
  auto d = json::parse(R"({"metadata": {"namespace": "default", "name": "web", "annotations": )" + annotations + extra_meta +
                           R"(}, "spec": )" + spec + "}",
                       "test pod");
  REQUIRE(d.has_value());
  return std::move(*d);
}

struct Events {
  std::vector<std::string> seen;  // "type reason message"
  static void add(void* ctx, const jobs::Job&, const std::string& type, const std::string& reason, const std::string& message) {
    static_cast<Events*>(ctx)->seen.push_back(type + " " + reason + " " + message);
  }
};

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
  CHECK_FALSE(jobs::on_update(blue, pod_object(R"({"k8s.v1.cni.cncf.io/networks": "green"})", R"({"hostNetwork": true})")).has_value());
  CHECK_FALSE(
      jobs::on_update(blue, pod_object(R"({"k8s.v1.cni.cncf.io/networks": "green"})", "{}", R"(, "deletionTimestamp": "2026-01-01T00:00:00Z")"))
          .has_value());
  auto del = jobs::on_delete(blue);
  REQUIRE(del.has_value());
  CHECK(del->kind == jobs::Job::Kind::ReleaseAddresses);
  CHECK_FALSE(jobs::on_delete(pod_object("{}", R"({"hostNetwork": true})")).has_value());
}

TEST_CASE("the release job frees a deleted pod's allocation and says so in an Event") {
  Node node;
  KubeApiServer api(node.dir() + "/api");
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
  plumb::pod::Log log;
  Events events;
  CHECK(jobs::run(jobs::Job{jobs::Job::Kind::ReleaseAddresses, "default", "web"}, conf, log, &Events::add, &events) == 0);
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
