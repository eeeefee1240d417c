// PodSource defaults and the ADD-time annotation lookup.
#include "cni-entry/source/source.hpp"

#include <chrono>
#include <cmath>

#include "cni-entry/source/kube.hpp"

namespace plumb::source {

Result<std::optional<PodInfo>> PodSource::pod(const PodRef& ref) {
  auto ann = PLUMB_TRY(pod_annotations(ref));
  if (!ann) return std::optional<PodInfo>{};
  PodInfo info;
  info.annotations = std::move(*ann);
  return std::optional<PodInfo>(std::move(info));
}

Result<std::optional<IpamClaim>> PodSource::ipam_claim(const std::string& namespace_, const std::string& name) {
  return fail(cni_code::kInvalidConfig, describe() + " has no IPAMClaims (claim " + namespace_ + "/" + name + ")");
}

json::Document ipam_claim_status_json(const IpamClaimStatus& status) {
  json::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  json::Value ips(rapidjson::kArrayType);
  for (const auto& ip : status.ips) ips.PushBack(json::Value(ip.c_str(), a), a);
  json::set(d, "ips", std::move(ips), a);
  if (!status.owner_pod.empty()) {
    json::Value owner(rapidjson::kObjectType);
    json::set_string(owner, "name", status.owner_pod, a);
    json::set(d, "ownerPod", std::move(owner), a);
  }
  json::Value cond(rapidjson::kObjectType);
  json::set_string(cond, "type", "IPsAllocated", a);
  json::set_string(cond, "status", "True", a);
  json::set_string(cond, "reason", "SuccessfulAllocation", a);
  std::string msg = "allocated";
  for (const auto& ip : status.ips) msg += " " + ip;
  json::set_string(cond, "message", msg, a);
  json::set_string(cond, "lastTransitionTime", status.allocated_at, a);
  json::Value conds(rapidjson::kArrayType);
  conds.PushBack(cond, a);
  json::set(d, "conditions", std::move(conds), a);
  return d;
}

Status PodSource::write_ipam_claim_status(const std::string& namespace_, const std::string& name, const IpamClaimStatus&) {
  return fail(cni_code::kInvalidConfig, describe() + " has no IPAMClaims (claim " + namespace_ + "/" + name + ")");
}

Status PodSource::ready() { return {}; }

Status PodSource::post_events(const PodRef&, const std::vector<PodEvent>&, const std::string&) { return {}; }

Result<bool> PodSource::write_network_status_if(const PodRef& pod, const std::string& status_json,
                                                const std::string& owner, const std::function<bool()>& current) {
  if (!current()) return false;
  PLUMB_TRY(write_network_status(pod, status_json, owner));
  return true;
}

Result<std::vector<std::string>> PodSource::remove_unvouched_status(const std::function<bool(std::string_view)>&) {
  return std::vector<std::string>{};
}

Result<std::optional<std::map<std::string, std::string>>> annotations_for_add(
    PodSource& src, const PodRef& pod, const std::optional<std::map<std::string, std::string>>& from_runtime) {
  using Annotations = std::map<std::string, std::string>;
  if (from_runtime) return std::optional<Annotations>(*from_runtime);
  if (pod.name.empty()) return std::optional<Annotations>{};
  auto info = PLUMB_TRY(src.pod(pod));
  if (!info) return std::optional<Annotations>{};
  // Multus's check: the API lookup is by name, so it may find another pod of that name (the
  // old one still terminating, or a new one already created). A static pod's mirror object
  // legitimately carries another UID than the kubelet's.
  if (!pod.uid.empty() && !info->uid.empty() && info->uid != pod.uid && !info->is_static) {
    return fail(cni_code::kInvalidEnv, "expected pod UID \"" + pod.uid + "\" (K8S_POD_UID) but " + src.describe() +
                                           " has pod " + pod.namespace_ + "/" + pod.name + " with UID \"" + info->uid +
                                           "\"");
  }
  return std::optional<Annotations>(std::move(info->annotations));
}


}  // namespace plumb::source
