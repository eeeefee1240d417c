// `plumb reconcile` (reconcile.hpp): reads the pools, then the cluster, and lets
// ipam/reconcile.cpp release what is stale.
#include "cni-entry/reconcile/reconcile.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cni-entry/source/kube.hpp"
#include "engine/base/json.hpp"
#include "engine/k8s/client.hpp"
#include "ipam/cluster.hpp"
#include "ipam/cluster_kube.hpp"
#include "ipam/reconcile.hpp"

namespace plumb::reconcile {
namespace {

namespace rc = ipam::reconcile;

void out(const std::string& line) { std::fputs((line + "\n").c_str(), stdout); }
void err(const std::string& line) { std::fputs(("plumb reconcile: " + line + "\n").c_str(), stderr); }

std::string str_of(const json::Value& obj, std::initializer_list<std::string_view> path) {
  const json::Value* v = &obj;
  for (auto key : path) {
    v = v->IsObject() ? json::find(*v, key) : nullptr;
    if (v == nullptr) return {};
  }
  return v->IsString() ? v->GetString() : std::string();
}

/// Pods (with their node, sandbox annotation and readiness), nodes and IPAMClaims. A kind the
/// API server does not serve (no IPAMClaim CRD) has none; any other failure is an error: a
/// partial view could release what a live pod holds.
Result<rc::View> read_view(k8s::Client& client) {
  rc::View v;
  for (const auto& pod : PLUMB_TRY(client.list("/api/v1/pods", "list pods"))) {
    v.pods[str_of(pod, {"metadata", "namespace"}) + "/" + str_of(pod, {"metadata", "name"})] = pod_view(pod);
  }
  for (const auto& node : PLUMB_TRY(client.list("/api/v1/nodes", "list nodes"))) v.nodes.insert(str_of(node, {"metadata", "name"}));
  auto claims = client.list("/apis/k8s.cni.cncf.io/v1alpha1/ipamclaims", "list IPAMClaims");
  if (!claims && claims.error().cni_code != cni_code::kNotFound) return std::unexpected(claims.error());
  if (claims) {
    for (const auto& c : *claims) v.claims.insert(str_of(c, {"metadata", "namespace"}) + "/" + str_of(c, {"metadata", "name"}));
  }
  return v;
}

/// The "ipam" objects of a NAD's spec.config (a config or a conflist) that keep their pool in etcd.
void etcd_ipams_of(const std::string& config, const std::string& nad, std::map<std::string, json::Document>& out) {
  auto d = json::parse(config, "NAD " + nad + " spec.config");
  if (!d || !d->IsObject()) return;
  std::vector<const json::Value*> plugins;
  if (const json::Value* list = json::find(*d, "plugins"); list != nullptr && list->IsArray()) {
    for (const auto& p : list->GetArray()) plugins.push_back(&p);
  } else {
    plugins.push_back(&*d);
  }
  for (const json::Value* p : plugins) {
    const json::Value* ipam = p->IsObject() ? json::find(*p, "ipam") : nullptr;
    if (ipam == nullptr || !ipam->IsObject()) continue;
    std::string type = str_of(*ipam, {"type"});
    if (type != "whereabouts" && type != "plumb-cluster") continue;
    auto cfg = ipam::cluster::parse_config(*ipam);
    if (!cfg || cfg->datastore != ipam::cluster::Datastore::Etcd) continue;
    std::string key;
    for (const auto& e : cfg->etcd.endpoints) key += e + ",";
    out.emplace(key + "|" + cfg->pool_name, json::clone(*ipam));
  }
}

/// Every distinct etcd pool the cluster's NADs name, with its owners read.
std::vector<rc::EtcdPool> read_etcd_pools(k8s::Client& client, rc::Report& report) {
  std::vector<rc::EtcdPool> pools;
  auto nads = client.list("/apis/k8s.cni.cncf.io/v1/network-attachment-definitions", "list NetworkAttachmentDefinitions");
  if (!nads) {
    if (nads.error().cni_code != cni_code::kNotFound) report.errors.push_back(nads.error());
    return pools;
  }
  std::map<std::string, json::Document> ipams;
  for (const auto& nad : *nads) {
    etcd_ipams_of(str_of(nad, {"spec", "config"}), str_of(nad, {"metadata", "namespace"}) + "/" + str_of(nad, {"metadata", "name"}),
                  ipams);
  }
  for (const auto& [key, conf] : ipams) {
    auto made = ipam::cluster::make(conf, "plumb-reconcile");
    if (!made) {
      report.errors.push_back(made.error());
      continue;
    }
    rc::EtcdPool pool{std::move(*made), {}};
    auto owners = pool.ipam->owners();
    if (!owners) {
      report.errors.push_back(owners.error().within("etcd pool " + pool.ipam->config().pool_name));
      continue;
    }
    pool.owners = std::move(*owners);
    pools.push_back(std::move(pool));
  }
  return pools;
}

}  // namespace

ipam::reconcile::Pod pod_view(const json::Value& pod) {
  rc::Pod p;
  p.node = str_of(pod, {"spec", "nodeName"});
  p.sandbox = str_of(pod, {"metadata", "annotations", source::kube::kSandboxAnnotation});
  const json::Value* conds = json::find(pod, "status");
  conds = conds != nullptr && conds->IsObject() ? json::find(*conds, "conditions") : nullptr;
  if (conds != nullptr && conds->IsArray()) {
    for (const auto& c : conds->GetArray())
      p.ready |= str_of(c, {"type"}) == "Ready" && str_of(c, {"status"}) == "True";
  }
  return p;
}

int run(const Options& a) {
  auto creds = k8s::configured(a.kubeconfig);
  if (!creds || !*creds) {
    err(creds ? "no API credentials: give --kubeconfig or run in a pod (in-cluster service account)" : creds.error().text());
    return 1;
  }
  std::string ns = a.ns;
  if (const char* env = std::getenv("WHEREABOUTS_NAMESPACE"); ns.empty() && env != nullptr) ns = env;
  if (ns.empty()) ns = (*creds)->namespace_;
  if (ns.empty()) ns = ipam::cluster::kDefaultPoolNamespace;
  k8s::Options opts;
  opts.timeout = std::chrono::round<std::chrono::milliseconds>(std::chrono::duration<double>(a.timeout_seconds));
  k8s::Client client(std::move(**creds), opts);

  rc::Report report;
  auto snap = rc::read_kube(client, ns);  // the pools first, the cluster after them
  if (!snap) report.errors.push_back(snap.error());
  auto etcd_pools = read_etcd_pools(client, report);
  auto view = read_view(client);
  if (!view) {
    err(view.error().text() + "; nothing released");
    return 1;
  }
  if (snap) rc::reconcile_kube(client, *snap, *view, a.dry_run, report);
  for (auto& p : etcd_pools) rc::reconcile_etcd(p, *view, a.dry_run, report);
  for (const auto& act : report.actions) out(std::string(a.dry_run ? "would release " : "released ") + act.what + ": " + act.reason);
  out(std::to_string(report.actions.size()) + (a.dry_run ? " would be released" : " released") + " (namespace " + ns + ", " +
      std::to_string(etcd_pools.size()) + " etcd pools, " + std::to_string(view->pods.size()) + " pods, " +
      std::to_string(view->nodes.size()) + " nodes, " + std::to_string(view->claims.size()) + " IPAMClaims)");
  for (const auto& e : report.errors) err(e.text());
  return report.errors.empty() ? 0 : 1;
}

}  // namespace plumb::reconcile
