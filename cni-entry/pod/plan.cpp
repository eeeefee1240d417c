// Planning a pod's ADD (plan.hpp): resolve, name, build and parse every attachment first.
#include "cni-entry/pod/plan.hpp"

#include "cni-entry/pod/devices.hpp"

#include <algorithm>
#include <set>

namespace plumb::pod {
namespace {

bool declares(const json::Value& plugin, std::string_view capability) {
  const json::Value* caps = json::find(plugin, "capabilities");
  if (caps == nullptr || !caps->IsObject()) return false;
  const json::Value* v = json::find(*caps, capability);
  return v != nullptr && v->IsBool() && v->GetBool();
}

/// Resolves a NAD reference ("name" or "namespace/name", in `default_ns`) or a file/dir path.
Result<nad::ResolvedNetwork> resolve_ref(source::PodSource& store, const PlumbConfig& conf, const std::string& ref,
                                         std::string* qualified) {
  if (!ref.empty() && ref.front() == '/') {
    auto net = PLUMB_TRY(nad::load_file_or_dir(ref));
    *qualified = "";
    return net;
  }
  std::string ns = conf.multus_namespace, name = ref;
  if (auto slash = ref.find('/'); slash != std::string::npos) {
    ns = ref.substr(0, slash);
    name = ref.substr(slash + 1);
  }
  auto def = PLUMB_TRY(store.network_attachment(ns, name));
  *qualified = ns + "/" + name;
  return nad::resolve(def, conf.conf_dir);
}

/// The runtimeConfig a selection element asks for (spec 4.1.2.1.3/4/7/8/10), canonical keys.
json::Document element_runtime_config(const nad::SelectionElement& e) {
  json::Document rc(rapidjson::kObjectType);
  auto& a = rc.GetAllocator();
  if (!e.ips.empty()) {
    json::Value ips(rapidjson::kArrayType);
    for (auto& ip : e.ips) ips.PushBack(json::Value(ip.c_str(), a), a);
    rc.AddMember("ips", ips, a);
  }
  if (!e.mac.empty()) rc.AddMember("mac", json::Value(e.mac.c_str(), a), a);
  if (!e.infiniband_guid.empty()) rc.AddMember("infinibandGUID", json::Value(e.infiniband_guid.c_str(), a), a);
  if (!e.port_mappings.empty()) {
    json::Value pms(rapidjson::kArrayType);
    for (auto& pm : e.port_mappings) {
      json::Value o(rapidjson::kObjectType);
      o.AddMember("hostPort", pm.host_port, a);
      o.AddMember("containerPort", pm.container_port, a);
      o.AddMember("protocol", json::Value(pm.protocol.c_str(), a), a);
      if (!pm.host_ip.empty()) o.AddMember("hostIP", json::Value(pm.host_ip.c_str(), a), a);
      pms.PushBack(o, a);
    }
    rc.AddMember("portMappings", pms, a);
  }
  if (e.bandwidth) {
    json::Value bw(rapidjson::kObjectType);
    auto put = [&](const char* k, uint64_t v) {
      if (v != 0) bw.AddMember(json::Value(k, a), json::Value(v), a);
    };
    put("ingressRate", e.bandwidth->ingress_rate_bps);
    put("ingressBurst", e.bandwidth->ingress_burst_bits);
    put("egressRate", e.bandwidth->egress_rate_bps);
    put("egressBurst", e.bandwidth->egress_burst_bits);
    rc.AddMember("bandwidth", bw, a);
  }
  return rc;
}

/// Builds the plugin configs of an attachment: runtimeConfig filtered by each plugin's declared
/// capabilities (default network: the runtime's runtimeConfig, spec 7.5; others: what the
/// selection element asks, each key required to be declared by some plugin), cni-args merged
/// into args.cni with the annotation winning (4.1.2.1.6).
Status build_plugins(Attachment& att, const PlumbConfig& conf) {
  const json::Value* list = json::find(att.net.conflist, "plugins");
  if (list == nullptr || !list->IsArray() || list->Empty()) {
    return fail(cni_code::kInvalidConfig, "network " + att.net.name + " (" + att.net.origin + ") has no plugins");
  }
  json::Document rc(rapidjson::kObjectType);
  if (att.is_default) {
    rc.CopyFrom(conf.runtime_config, rc.GetAllocator());
  } else if (att.element != nullptr) {
    rc = element_runtime_config(*att.element);
    for (auto it = rc.MemberBegin(); it != rc.MemberEnd(); ++it) {
      std::string key = it->name.GetString();
      bool any = std::any_of(list->Begin(), list->End(), [&](const json::Value& p) { return declares(p, key); });
      if (!any) {
        return fail(cni_code::kInvalidConfig, "network " + att.selection + ": the selection asks for \"" +
                                                  (key == "infinibandGUID" ? std::string("infiniband-guid") : key) +
                                                  "\" but no plugin of the network declares the \"" + key + "\" capability");
      }
    }
  }
  att.plugins.SetArray();
  auto& a = att.plugins.GetAllocator();
  for (auto& p : list->GetArray()) {
    if (!p.IsObject()) return fail(cni_code::kInvalidConfig, "network " + att.net.name + ": a plugin entry is not an object");
    json::Value plugin;
    plugin.CopyFrom(p, a);
    json::Value prc(rapidjson::kObjectType);
    if (const json::Value* own = json::find(plugin, "runtimeConfig"); own != nullptr && own->IsObject()) prc.CopyFrom(*own, a);
    for (auto it = rc.MemberBegin(); it != rc.MemberEnd(); ++it) {
      if (declares(p, it->name.GetString())) {
        json::Value v;
        v.CopyFrom(it->value, a);
        json::set(prc, it->name.GetString(), std::move(v), a);
      }
    }
    if (prc.MemberCount() > 0) json::set(plugin, "runtimeConfig", std::move(prc), a);
    if (att.element != nullptr && att.element->cni_args) {
      if (json::find(plugin, "args") == nullptr || !json::find(plugin, "args")->IsObject()) {
        json::set(plugin, "args", json::Value(rapidjson::kObjectType), a);
      }
      json::Value& args = plugin["args"];
      if (!args.HasMember("cni") || !args["cni"].IsObject()) json::set(args, "cni", json::Value(rapidjson::kObjectType), a);
      json::Value& cni = args["cni"];
      for (auto it = att.element->cni_args->MemberBegin(); it != att.element->cni_args->MemberEnd(); ++it) {
        json::Value v;
        v.CopyFrom(it->value, a);
        json::set(cni, it->name.GetString(), std::move(v), a);
      }
    }
    att.plugins.PushBack(plugin, a);
  }
  return {};
}

bool namespace_allowed(const PlumbConfig& conf, const std::string& pod_ns, const std::string& nad_ns) {
  if (!conf.namespace_isolation || nad_ns == pod_ns || nad_ns == "default") return true;
  return std::find(conf.global_namespaces.begin(), conf.global_namespaces.end(), nad_ns) != conf.global_namespaces.end();
}

/// The pod's selection elements: from the runtime (io.kubernetes.cri.pod-annotations, no
/// request) or the store (the pod is read, its UID checked). An invalid annotation is ignored
/// with a warning unless strictAnnotations.
Result<std::vector<nad::SelectionElement>> selection_elements(const PlumbConfig& conf, source::PodSource& store,
                                                              const source::PodRef& pod, Log& log) {
  auto annotations = PLUMB_TRY(source::annotations_for_add(store, pod, conf.pod_annotations));
  if (!annotations) return std::vector<nad::SelectionElement>{};
  auto it = annotations->find(std::string(nad::kNetworksAnnotation));
  if (it == annotations->end()) return std::vector<nad::SelectionElement>{};
  auto parsed = nad::parse_selection(it->second);
  if (parsed) return std::move(*parsed);
  if (conf.strict_annotations) return std::unexpected(parsed.error());
  log.warning("ignoring the selection annotation of pod " + pod.namespace_ + "/" + pod.name + ": " + parsed.error().text());
  return std::vector<nad::SelectionElement>{};
}

/// Interface names: explicit ones as given, the others net1, net2 ... skipping taken names.
class IfnameAllocator {
 public:
  IfnameAllocator(const std::string& default_ifname, const std::vector<nad::SelectionElement>& elements) : used_{default_ifname} {
    for (auto& e : elements) {
      if (!e.interface.empty()) explicit_.insert(e.interface);
    }
  }
  std::string next() {
    std::string n;
    do n = "net" + std::to_string(++generated_);
    while (used_.count(n) != 0 || explicit_.count(n) != 0);
    used_.insert(n);
    return n;
  }
  /// Takes an explicit name; false when an earlier attachment has it.
  bool take(const std::string& name) { return used_.insert(name).second; }

 private:
  std::set<std::string> used_, explicit_;
  int generated_ = 0;
};

/// The attachment of one selection element.
Result<Attachment> plan_element(const PlumbConfig& conf, source::PodSource& store, const source::PodRef& pod,
                                const nad::SelectionElement& e, IfnameAllocator& names) {
  Attachment att;
  std::string ns = e.namespace_.empty() ? pod.namespace_ : e.namespace_;
  if (!namespace_allowed(conf, pod.namespace_, ns)) {
    return fail(cni_code::kInvalidConfig, "pod " + pod.namespace_ + "/" + pod.name + " may not use NetworkAttachmentDefinition " + ns +
                                              "/" + e.name + ": namespaceIsolation allows only the pod's namespace, \"default\" and globalNamespaces");
  }
  auto def = PLUMB_TRY(store.network_attachment(ns, e.name));
  att.net = PLUMB_TRY(nad::resolve(def, conf.conf_dir));
  att.selection = ns + "/" + e.name;
  att.status_name = att.selection;
  att.element = &e;
  if (e.interface.empty()) {
    att.ifname = names.next();
  } else if (!names.take(e.interface)) {
    return fail(cni_code::kConflict, "network " + att.selection + ": interface \"" + e.interface +
                                         "\" is already used by a previous attachment of the pod");
  } else {
    att.ifname = e.interface;
  }
  return att;
}

/// Builds, plans device-info for and parses every plugin of `att`, then prepares its IPAMClaim.
Status complete(Attachment& att, const cni::Env& env, const PlumbConfig& conf, source::PodSource& store,
                const source::PodRef& pod, Log& log) {
  PLUMB_TRY(build_plugins(att, conf));
  // A NAD annotated with k8s.v1.cni.cncf.io/resourceName gets kubelet's device and device-info (5.3.8).
  att.device_info.resource_name = att.net.resource_name;
  inject_device_id(att);
  // The device-info file path, handed as runtimeConfig.CNIDeviceInfoFile where declared.
  PLUMB_TRY(devinfo::plan(att.plugins, att.device_info, conf.device_info_dir, env.container_id, att.ifname));
  auto parsed = parse_plugins(att.plugins, att.net.name, att.ifname, env.args);
  if (!parsed) return std::unexpected(parsed.error().within(att.where()));
  att.parsed = std::move(*parsed);
  // IPAMClaims (spec 8): the claim's owner for the IPAM, recorded for GC.
  att.claim = PLUMB_TRY(claims::prepare(store, conf.state_dir, pod.namespace_, att.element, att.parsed, att.net.name, log));
  return {};
}

}  // namespace

std::string Attachment::where() const {
  return "network " + (selection.empty() ? net.name : selection) + " (" + ifname + ")";
}

Result<std::vector<drivers::ParsedPlugin>> parse_plugins(const json::Value& plugins, const std::string& network,
                                                         const std::string& ifname, const drivers::CniArgs& cni_args) {
  if (!plugins.IsArray()) return fail(cni_code::kInvalidConfig, "network " + network + ": the plugin list is not a list");
  drivers::ParseInput in{network, ifname, cni_args};
  std::vector<drivers::ParsedPlugin> out;
  for (const auto& p : plugins.GetArray()) out.push_back(PLUMB_TRY(drivers::parse_plugin(p, in)));
  return out;
}

Result<PodPlan> plan(const cni::Env& env, const PlumbConfig& conf, source::PodSource& store, const source::PodRef& pod,
                     Log& log) {
  if (conf.cluster_network.empty()) return fail(cni_code::kInvalidConfig, "plumb config.clusterNetwork is required");
  PodPlan out;
  Attachment def;
  def.is_default = true;
  def.ifname = env.ifname;
  def.net = PLUMB_TRY(resolve_ref(store, conf, conf.cluster_network, &def.selection));
  def.status_name = def.net.name;
  out.attachments.push_back(std::move(def));

  out.elements = PLUMB_TRY(selection_elements(conf, store, pod, log));
  IfnameAllocator names(env.ifname, out.elements);
  for (auto& ref : conf.default_networks) {
    Attachment att;
    att.net = PLUMB_TRY(resolve_ref(store, conf, ref, &att.selection));
    att.status_name = att.selection.empty() ? att.net.name : att.selection;
    att.ifname = names.next();
    out.attachments.push_back(std::move(att));
  }
  for (auto& e : out.elements) out.attachments.push_back(PLUMB_TRY(plan_element(conf, store, pod, e, names)));
  PLUMB_TRY(assign_device_ids(out.attachments, conf, pod));
  for (size_t i = 0; i < out.attachments.size(); ++i) {
    out.attachments[i].index = static_cast<int>(i);
    PLUMB_TRY(complete(out.attachments[i], env, conf, store, pod, log));
  }
  return out;
}

}  // namespace plumb::pod
