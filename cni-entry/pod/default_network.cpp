// The pod's default networks, chosen as Multus chooses them (default_network.hpp).
#include "cni-entry/pod/default_network.hpp"

#include "cni-entry/pod/verbs.hpp"

namespace plumb::pod {
namespace {

/// delegates[i] of plumb's config as a network (a .conf or .conflist shaped object).
Result<nad::ResolvedNetwork> delegate_network(const PlumbConfig& conf, rapidjson::SizeType i) {
  return nad::normalize(json::dump(conf.delegates[i]), "", "plumb config.delegates[" + std::to_string(i) + "]");
}

/// The pod's v1.multus-cni.io/default-network: one network, by name (in multusNamespace) or
/// namespace/name, in either selection format. As Multus runs it (the master plugin, with the
/// runtime's runtimeConfig): "interface" names its pod interface instead of CNI_IFNAME; "mac" and
/// "ips" reach its plugins as CNI_ARGS MAC= and IP= (comma-separated), not as runtimeConfig.
/// nullopt when not annotated.
Result<std::optional<Attachment>> annotated_default(source::PodSource& store, const PlumbConfig& conf,
                                                    const std::map<std::string, std::string>* annotations) {
  if (annotations == nullptr) return std::optional<Attachment>{};
  auto it = annotations->find(std::string(kDefaultNetworkAnnotation));
  if (it == annotations->end()) return std::optional<Attachment>{};
  const std::string where = "pod annotation " + std::string(kDefaultNetworkAnnotation);
  auto elements = nad::parse_selection(it->second);
  if (!elements) return std::unexpected(elements.error().within(where));
  if (elements->size() != 1) {
    return fail(cni_code::kInvalidAnnotation, where + " \"" + it->second + "\" names " + std::to_string(elements->size()) +
                                                  " networks: exactly one must be given");
  }
  const auto& e = elements->front();
  auto att = nad_attachment(store, conf, e.namespace_.empty() ? conf.multus_namespace : e.namespace_, e.name);
  if (!att) return std::unexpected(att.error().within(where));
  att->ifname = e.interface;  // validated by parse_selection; "" = CNI_IFNAME
  if (!e.mac.empty()) att->add_args.emplace_back("MAC", e.mac);
  if (!e.ips.empty()) {
    std::string ips;
    for (const auto& ip : e.ips) ips += (ips.empty() ? "" : ",") + ip;
    att->add_args.emplace_back("IP", ips);
  }
  return std::optional<Attachment>(std::move(*att));
}

}  // namespace

Result<Attachment> nad_attachment(source::PodSource& store, const PlumbConfig& conf, const std::string& ns, const std::string& name) {
  Attachment att;
  auto def = PLUMB_TRY(store.network_attachment(ns, name));
  att.net = PLUMB_TRY(nad::resolve(def, conf.conf_dir));
  if (auto rn = def.annotations.find(std::string(nad::kResourceNameAnnotation)); rn != def.annotations.end()) {
    att.device_info.resource_name = rn->second;
  }
  att.selection = ns + "/" + name;
  att.status_name = att.selection;
  return att;
}

Result<nad::ResolvedNetwork> resolve_reference(source::PodSource& store, const PlumbConfig& conf, const std::string& ref,
                                               std::string* qualified) {
  *qualified = "";
  if (!ref.empty() && ref.front() == '/') return nad::load_file_or_dir(ref);
  std::string ns = conf.multus_namespace, name = ref;
  const auto slash = ref.find('/');
  if (slash != std::string::npos) {
    ns = ref.substr(0, slash);
    name = ref.substr(slash + 1);
  }
  std::string nad_problem = "is not a valid NetworkAttachmentDefinition name";
  if (nad::is_dns1123_label(ns) && nad::is_dns1123_label(name)) {
    auto def = store.network_attachment(ns, name);
    if (def) {
      *qualified = ns + "/" + name;
      return nad::resolve(*def, conf.conf_dir);
    }
    if (def.error().cni_code != cni_code::kNotFound) return std::unexpected(def.error());
    nad_problem = "has no NetworkAttachmentDefinition " + ns + "/" + name;
  }
  if (slash != std::string::npos) {
    // namespace/name: a NAD or nothing; a malformed one is a configuration error.
    const bool valid = nad::is_dns1123_label(ns) && nad::is_dns1123_label(name);
    return fail(valid ? cni_code::kNotFound : cni_code::kInvalidConfig, "\"" + ref + "\" " + nad_problem);
  }
  // Multus's second choice: the CNI config named `ref` in confDir (.conflist first, then .conf/.json).
  nad::NetworkAttachmentDefinition by_name{ref, ns, "", {}};
  auto net = nad::resolve(by_name, conf.conf_dir);
  if (net || net.error().cni_code != cni_code::kNotFound) return net;
  return fail(cni_code::kNotFound, "\"" + ref + "\" " + nad_problem + " (" + store.describe() + ") and no CNI config named \"" +
                                       ref + "\" in confDir " + conf.conf_dir,
              net.error().details);
}

Result<nad::ResolvedNetwork> cluster_default(source::PodSource& store, const PlumbConfig& conf, std::string* qualified) {
  std::string ignored;
  if (qualified == nullptr) qualified = &ignored;
  qualified->clear();
  if (!conf.cluster_network.empty()) {
    auto net = resolve_reference(store, conf, conf.cluster_network, qualified);
    if (!net) return std::unexpected(net.error().within("plumb config.clusterNetwork"));
    return net;
  }
  if (conf.delegates.IsArray() && !conf.delegates.Empty()) return delegate_network(conf, 0);
  return fail(cni_code::kInvalidConfig, "plumb config: clusterNetwork (or Multus's delegates) is required");
}

Result<std::vector<Attachment>> default_attachments(const cni::Env& env, const PlumbConfig& conf, source::PodSource& store,
                                                    const source::PodRef& pod,
                                                    const std::map<std::string, std::string>* annotations) {
  std::vector<Attachment> out;
  auto annotated = PLUMB_TRY(annotated_default(store, conf, annotations));
  Attachment def = annotated ? std::move(*annotated) : Attachment{};
  if (!annotated) {
    def.net = PLUMB_TRY(cluster_default(store, conf, &def.selection));
    def.status_name = def.selection.empty() ? def.net.name : def.selection;  // Multus: "ns/name" for a NAD
  }
  def.is_default = true;
  if (def.ifname.empty()) def.ifname = env.ifname;
  out.push_back(std::move(def));
  if (conf.cluster_network.empty() && conf.delegates.IsArray()) {
    for (rapidjson::SizeType i = 1; i < conf.delegates.Size(); ++i) {
      Attachment att;
      att.net = PLUMB_TRY(delegate_network(conf, i));
      att.status_name = att.net.name;
      out.push_back(std::move(att));
    }
  }
  if (is_system_namespace(conf, pod.namespace_)) return out;  // Multus: no defaultNetworks for system namespaces
  for (const auto& ref : conf.default_networks) {
    Attachment att;
    auto net = resolve_reference(store, conf, ref, &att.selection);
    if (!net) return std::unexpected(net.error().within("plumb config.defaultNetworks"));
    att.net = std::move(*net);
    att.status_name = att.selection.empty() ? att.net.name : att.selection;
    out.push_back(std::move(att));
  }
  return out;
}

}  // namespace plumb::pod
