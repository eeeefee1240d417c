// Planning a pod's ADD (plan.hpp): resolve, name, build and parse every attachment first.
#include "cni-entry/pod/plan.hpp"

#include "cni-entry/pod/devices.hpp"
#include "cni-entry/pod/default_network.hpp"

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

/// What a selection element asks for (element_runtime_config) that no plugin of the network
/// declares as a capability: dropped with a warning, as Multus (libcni injects only declared
/// capabilities); with strictAnnotations the ADD fails instead.
Status drop_undeclared(json::Document& rc, const json::Value& list, const Attachment& att, const PlumbConfig& conf, Log& log) {
  for (auto it = rc.MemberBegin(); it != rc.MemberEnd();) {
    std::string key = it->name.GetString();
    if (std::any_of(list.Begin(), list.End(), [&](const json::Value& p) { return declares(p, key); })) {
      ++it;
      continue;
    }
    std::string msg = "network " + att.selection + ": the selection asks for \"" +
                      (key == "infinibandGUID" ? std::string("infiniband-guid") : key) + "\" but no plugin of the network declares the \"" +
                      key + "\" capability";
    if (conf.strict_annotations) return fail(cni_code::kInvalidConfig, msg + " (strictAnnotations)");
    log.warning(msg + ": ignored");
    it = rc.EraseMember(it);
  }
  return {};
}

/// Builds the plugin configs of an attachment: runtimeConfig filtered by each plugin's declared
/// capabilities (default network: the runtime's runtimeConfig, spec 7.5; others: what the
/// selection element asks, with Multus's deviceID when kubelet gave the attachment no device,
/// a key no plugin declares dropped (drop_undeclared)), cni-args merged into args.cni with the
/// annotation winning (4.1.2.1.6).
Status build_plugins(Attachment& att, const PlumbConfig& conf, Log& log) {
  const json::Value* list = json::find(att.net.conflist, "plugins");
  if (list == nullptr || !list->IsArray() || list->Empty()) {
    return fail(cni_code::kInvalidConfig, "network " + att.net.name + " (" + att.net.origin + ") has no plugins");
  }
  json::Document rc(rapidjson::kObjectType);
  if (att.is_default) {
    rc.CopyFrom(conf.runtime_config, rc.GetAllocator());
  } else if (att.element != nullptr) {
    rc = element_runtime_config(*att.element);
    // Multus: a device kubelet allocated for the NAD's resourceName wins over the element's.
    if (!att.element->device_id.empty() && att.device_id.empty()) {
      rc.AddMember("deviceID", json::Value(att.element->device_id.c_str(), rc.GetAllocator()), rc.GetAllocator());
    }
    PLUMB_TRY(drop_undeclared(rc, *list, att, conf, log));
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

/// Multus's namespace isolation: a pod may use NADs of its own namespace and of the
/// non-isolated namespaces: globalNamespaces when set, else "default" alone.
bool namespace_allowed(const PlumbConfig& conf, const std::string& pod_ns, const std::string& nad_ns) {
  if (!conf.namespace_isolation || nad_ns == pod_ns) return true;
  if (conf.global_namespaces.empty()) return nad_ns == "default";
  return std::find(conf.global_namespaces.begin(), conf.global_namespaces.end(), nad_ns) != conf.global_namespaces.end();
}

/// The pod's selection elements from its annotations. An invalid annotation is ignored with a
/// warning unless strictAnnotations; so are keys the standard reserves (4.1.2.1).
Result<std::vector<nad::SelectionElement>> selection_elements(const PlumbConfig& conf,
                                                              const std::map<std::string, std::string>* annotations,
                                                              const source::PodRef& pod, Log& log) {
  if (annotations == nullptr) return std::vector<nad::SelectionElement>{};
  auto it = annotations->find(std::string(nad::kNetworksAnnotation));
  if (it == annotations->end()) return std::vector<nad::SelectionElement>{};
  std::vector<std::string> warnings;
  auto parsed = nad::parse_selection(it->second, &warnings);
  if (parsed && !warnings.empty() && conf.strict_annotations) return fail(cni_code::kInvalidAnnotation, warnings.front());
  for (const auto& w : warnings) log.warning("pod " + pod.namespace_ + "/" + pod.name + ": ignoring " + w);
  if (parsed) return std::move(*parsed);
  if (conf.strict_annotations) return std::unexpected(parsed.error());
  log.warning("ignoring the selection annotation of pod " + pod.namespace_ + "/" + pod.name + ": " + parsed.error().text());
  return std::vector<nad::SelectionElement>{};
}

/// Interface names as Multus gives them: an element's "interface" as given, else "net<N>" where
/// N is the attachment's position in the pod (the default network, CNI_IFNAME, is 0). A name
/// two attachments would share fails the ADD before anything is made.
Status name_interfaces(std::vector<Attachment>& atts) {
  std::set<std::string> used;
  for (size_t i = 0; i < atts.size(); ++i) {
    Attachment& att = atts[i];
    if (i > 0) att.ifname = att.element != nullptr && !att.element->interface.empty() ? att.element->interface : "net" + std::to_string(i);
    if (!used.insert(att.ifname).second) {
      return fail(cni_code::kConflict, "network " + (att.selection.empty() ? att.net.name : att.selection) + ": interface \"" +
                                           att.ifname + "\" is already used by a previous attachment of the pod");
    }
  }
  return {};
}

/// The attachment of one selection element.
Result<Attachment> plan_element(const PlumbConfig& conf, source::PodSource& store, const source::PodRef& pod,
                                const nad::SelectionElement& e) {
  std::string ns = e.namespace_.empty() ? pod.namespace_ : e.namespace_;
  if (!namespace_allowed(conf, pod.namespace_, ns)) {
    return fail(cni_code::kInvalidConfig, "pod " + pod.namespace_ + "/" + pod.name + " may not use NetworkAttachmentDefinition " + ns +
                                              "/" + e.name + ": namespaceIsolation allows only the pod's namespace and " +
                                              (conf.global_namespaces.empty() ? std::string("\"default\"") : "globalNamespaces"));
  }
  Attachment att = PLUMB_TRY(nad_attachment(store, conf, ns, e.name));
  att.element = &e;
  return att;
}

/// Builds, plans device-info for and parses every plugin of `att`, then prepares its IPAMClaim.
Status complete(Attachment& att, const cni::Env& env, const PlumbConfig& conf, source::PodSource& store,
                const source::PodRef& pod, Log& log) {
  PLUMB_TRY(build_plugins(att, conf, log));
  // A NAD annotated with k8s.v1.cni.cncf.io/resourceName gets kubelet's device and device-info (5.3.8).
  att.device_info.resource_name = att.net.resource_name;
  inject_device_id(att);
  // The device-info file path, handed as runtimeConfig.CNIDeviceInfoFile where declared.
  PLUMB_TRY(devinfo::plan(att.plugins, att.device_info, conf.device_info_dir, env.container_id, att.ifname));
  drivers::CniArgs args = env.args;
  args.insert(args.end(), att.add_args.begin(), att.add_args.end());
  auto parsed = parse_plugins(att.plugins, att.net.name, att.ifname, args, plugin_search(conf, env.path),
                              ipam_cluster(conf), driver_settings(conf));
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

drivers::DriverSettings driver_settings(const PlumbConfig& conf) {
  return drivers::DriverSettings{conf.tuning_allowlist, conf.bpffs_dir};
}

Result<std::vector<drivers::ParsedPlugin>> parse_plugins(const json::Value& plugins, const std::string& network,
                                                         const std::string& ifname, const drivers::CniArgs& cni_args,
                                                         const cni::PluginSearch& search,
                                                         const ipam::ClusterAccess& cluster,
                                                         const drivers::DriverSettings& settings) {
  if (!plugins.IsArray()) return fail(cni_code::kInvalidConfig, "network " + network + ": the plugin list is not a list");
  drivers::ParseInput in{network, ifname, cni_args, search, cluster, settings};
  std::vector<drivers::ParsedPlugin> out;
  for (const auto& p : plugins.GetArray()) out.push_back(PLUMB_TRY(drivers::parse_plugin(p, in)));
  return out;
}

namespace {

/// Multus's auxiliary CNI chain (auxiliaryCNIChainName): the drop-ins of "<directory of
/// clusterNetwork>/<name>/" after a passthru plugin, one more attachment after the selection's;
/// none when that directory has no drop-in. Errors: kInvalidConfig when clusterNetwork is not a
/// path (Multus's rule); auxiliary_chain's.
Result<std::optional<Attachment>> auxiliary_attachment(const PlumbConfig& conf) {
  if (conf.auxiliary_chain_name.empty()) return std::optional<Attachment>{};
  if (conf.cluster_network.find('/') == std::string::npos || conf.cluster_network.front() != '/') {
    return fail(cni_code::kInvalidConfig, "plumb config.auxiliaryCNIChainName \"" + conf.auxiliary_chain_name +
                                              "\": clusterNetwork must be a path (the chain's drop-ins are beside it), got \"" +
                                              conf.cluster_network + "\"");
  }
  const std::string dir = conf.cluster_network.substr(0, conf.cluster_network.rfind('/'));
  auto net = PLUMB_TRY(nad::auxiliary_chain(conf.auxiliary_chain_name, conf.cni_version, dir.empty() ? "/" : dir));
  if (!net) return std::optional<Attachment>{};
  Attachment att;
  att.net = std::move(*net);
  att.status_name = att.net.name;
  return std::optional<Attachment>(std::move(att));
}

}  // namespace

Result<PodPlan> plan(const cni::Env& env, const PlumbConfig& conf, source::PodSource& store, const source::PodRef& pod,
                     Log& log) {
  PodPlan out;
  auto annotations = PLUMB_TRY(source::annotations_for_add(store, pod, conf.pod_annotations));
  const auto* pod_annotations = annotations ? &*annotations : nullptr;
  out.attachments = PLUMB_TRY(default_attachments(env, conf, store, pod, pod_annotations));
  out.elements = PLUMB_TRY(selection_elements(conf, pod_annotations, pod, log));
  for (auto& e : out.elements) out.attachments.push_back(PLUMB_TRY(plan_element(conf, store, pod, e)));
  if (auto aux = PLUMB_TRY(auxiliary_attachment(conf))) out.attachments.push_back(std::move(*aux));
  PLUMB_TRY(name_interfaces(out.attachments));
  PLUMB_TRY(assign_device_ids(out.attachments, conf, pod));
  for (size_t i = 0; i < out.attachments.size(); ++i) {
    out.attachments[i].index = static_cast<int>(i);
    PLUMB_TRY(complete(out.attachments[i], env, conf, store, pod, log));
  }
  for (const auto& w : store.take_warnings()) log.warning(w);
  return out;
}

}  // namespace plumb::pod
