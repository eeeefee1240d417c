// Device IDs from kubelet, handed to the attachments (devices.hpp).
#include "cni-entry/pod/devices.hpp"

#include <algorithm>
#include <chrono>
#include <map>

namespace plumb::pod {
namespace {

std::string pod_name(const source::PodRef& pod) { return pod.namespace_ + "/" + pod.name; }

/// "network default/a (net1), network default/b (net2)"
std::string networks_of(const std::vector<const Attachment*>& atts) {
  std::string out;
  for (const Attachment* a : atts) out += (out.empty() ? "" : ", ") + a->where();
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

Status hand_out_devices(std::vector<Attachment>& atts, const source::PodDevices& devices, const source::PodRef& pod) {
  std::map<std::string, std::vector<Attachment*>> users;  // resource -> its attachments, in order
  for (auto& att : atts) {
    if (!att.net.resource_name.empty()) users[att.net.resource_name].push_back(&att);
  }
  for (auto& [resource, list] : users) {
    std::vector<const Attachment*> named(list.begin(), list.end());
    auto it = devices.find(resource);
    if (it == devices.end() || it->second.empty()) {
      return fail(cni_code::kInvalidConfig,
                  "kubelet allocated no device of resource " + resource + " to pod " + pod_name(pod) + ", which " +
                      networks_of(named) + " needs (does a container of the pod request " + resource +
                      " in resources.limits?)");
    }
    if (it->second.size() < list.size()) {
      return fail(cni_code::kInvalidConfig,
                  "pod " + pod_name(pod) + " has " + std::to_string(it->second.size()) + " device(s) of resource " +
                      resource + " (" + join(it->second) + ") but " + std::to_string(list.size()) +
                      " networks need one each: " + networks_of(named));
    }
    for (size_t i = 0; i < list.size(); ++i) list[i]->device_id = it->second[i];
  }
  return {};
}

Status assign_device_ids(std::vector<Attachment>& atts, const PlumbConfig& conf, const source::PodRef& pod) {
  std::vector<std::string> resources;
  for (const auto& att : atts) {
    const std::string& r = att.net.resource_name;
    if (!r.empty() && std::find(resources.begin(), resources.end(), r) == resources.end()) resources.push_back(r);
  }
  if (resources.empty()) return {};
  const std::string what = "device IDs of resource " + join(resources) + " for pod " + pod_name(pod);
  if (pod.name.empty()) {
    return fail(cni_code::kInvalidEnv, what + ": no pod name (K8S_POD_NAME in CNI_ARGS) to ask kubelet about");
  }
  source::KubeletOptions opts;
  opts.socket = conf.pod_resources_socket;
  opts.timeout = std::chrono::milliseconds(static_cast<int64_t>(conf.pod_resources_timeout_seconds * 1000));
  auto devices = source::pod_devices(opts, pod);
  if (!devices) return std::unexpected(devices.error().within(what));
  return hand_out_devices(atts, *devices, pod);
}

void inject_device_id(Attachment& att) {
  if (att.device_id.empty() || !att.plugins.IsArray()) return;
  auto& a = att.plugins.GetAllocator();
  for (auto& plugin : att.plugins.GetArray()) {
    if (!plugin.IsObject()) continue;
    json::set(plugin, "deviceID", json::Value(att.device_id.c_str(), a), a);
    json::set(plugin, "pciBusID", json::Value(att.device_id.c_str(), a), a);
    const json::Value* caps = json::find(plugin, "capabilities");
    const json::Value* declared = caps != nullptr && caps->IsObject() ? json::find(*caps, "deviceID") : nullptr;
    if (declared == nullptr || !declared->IsBool() || !declared->GetBool()) continue;
    if (json::find(plugin, "runtimeConfig") == nullptr || !plugin["runtimeConfig"].IsObject()) {
      json::set(plugin, "runtimeConfig", json::Value(rapidjson::kObjectType), a);
    }
    json::set(plugin["runtimeConfig"], "deviceID", json::Value(att.device_id.c_str(), a), a);
  }
}

}  // namespace plumb::pod
