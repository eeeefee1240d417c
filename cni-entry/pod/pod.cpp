#include "cni-entry/pod/pod.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "drivers/driver.hpp"
#include "engine/devinfo/devinfo.hpp"
#include "engine/kernel/link.hpp"
#include "cni-entry/npwg/nad.hpp"
#include "engine/netlink/socket.hpp"
#include "engine/kernel/netns.hpp"
#include "cni-entry/pod/claims.hpp"
#include "engine/kernel/route.hpp"
#include "cni-entry/source/source.hpp"
#include "engine/state/state.hpp"
#include "engine/state/journal.hpp"
#include "ipam/ipam.hpp"

namespace plumb::pod {
namespace {

constexpr std::string_view kInternalVersion = "1.1.0";

/// One planned attachment of the pod.
struct Attachment {
  int index = 0;
  bool is_default = false;
  std::string selection;    // "namespace/name" of the NAD; "" for a file-based default network
  std::string status_name;  // network-status "name"
  std::string ifname;
  nad::ResolvedNetwork net;
  const nad::SelectionElement* element = nullptr;
  json::Document plugins;   // array of plugin configs ready to run
  std::optional<claims::Use> claim;  // the IPAMClaim its addresses belong to (spec 8)
  devinfo::Plan device_info;  // [devinfo] its device-info file (spec 5.3.8), "" file = none
};

/// Sockets and namespace handles of one invocation.
struct Kernel {
  std::optional<netlink::Socket> node;
  std::optional<netns::Netns> pod_ns;
  std::optional<netlink::Socket> pod;
};

source::PodRef pod_ref(const cni::Env& env) {
  source::PodRef ref;
  ref.namespace_ = env.arg("K8S_POD_NAMESPACE").value_or("default");
  ref.name = env.arg("K8S_POD_NAME").value_or("");
  ref.uid = env.arg("K8S_POD_UID").value_or("");
  return ref;
}

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
    auto type = PLUMB_TRY(json::get_string(p, "type", "network " + att.net.name + " plugin"));
    if (!type) return fail(cni_code::kInvalidConfig, "network " + att.net.name + ": a plugin has no \"type\"");
    if (drivers::find(*type) == nullptr) {
      return fail(cni_code::kInvalidConfig, "network " + att.net.name + " (" + att.net.origin + "): plugin type \"" + *type +
                                                "\" is not implemented by plumb (it implements " + drivers::known_types() + ")");
    }
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

/// Plans every attachment of the pod, in order: clusterNetwork, defaultNetworks, then the
/// selection annotation's elements (6.2). Nothing touches the kernel here: unknown NADs, plugin
/// types, capabilities and interface names fail before any change.
Result<std::vector<Attachment>> plan(const cni::Env& env, const PlumbConfig& conf, source::PodSource& store,
                                     const source::PodRef& pod, std::vector<nad::SelectionElement>& elements, Log& log) {
  if (conf.cluster_network.empty()) return fail(cni_code::kInvalidConfig, "plumb config.clusterNetwork is required");
  std::vector<Attachment> out;
  {
    Attachment def;
    def.is_default = true;
    def.ifname = env.ifname;
    def.net = PLUMB_TRY(resolve_ref(store, conf, conf.cluster_network, &def.selection));
    def.status_name = def.net.name;
    out.push_back(std::move(def));
  }

  // The selection annotation: from the runtime (io.kubernetes.cri.pod-annotations) or the store.
  // [kube] runtime-provided annotations need no request; else the pod is read (UID checked).
  auto annotations = PLUMB_TRY(source::annotations_for_add(store, pod, conf.pod_annotations));
  if (annotations) {
    auto it = annotations->find(std::string(nad::kNetworksAnnotation));
    if (it != annotations->end()) {
      auto parsed = nad::parse_selection(it->second);
      if (parsed) {
        elements = std::move(*parsed);
      } else if (conf.strict_annotations) {
        return std::unexpected(parsed.error());
      } else {
        log.warning("ignoring the selection annotation of pod " + pod.namespace_ + "/" + pod.name + ": " + parsed.error().text());
      }
    }
  }

  std::set<std::string> explicit_names;
  for (auto& e : elements) {
    if (!e.interface.empty()) explicit_names.insert(e.interface);
  }
  std::set<std::string> used = {env.ifname};
  int generated = 0;
  auto next_name = [&]() {
    std::string n;
    do n = "net" + std::to_string(++generated);
    while (used.count(n) != 0 || explicit_names.count(n) != 0);
    return n;
  };

  for (auto& ref : conf.default_networks) {
    Attachment att;
    att.net = PLUMB_TRY(resolve_ref(store, conf, ref, &att.selection));
    att.status_name = att.selection.empty() ? att.net.name : att.selection;
    att.ifname = next_name();
    used.insert(att.ifname);
    out.push_back(std::move(att));
  }
  for (auto& e : elements) {
    Attachment att;
    std::string ns = e.namespace_.empty() ? pod.namespace_ : e.namespace_;
    if (!namespace_allowed(conf, pod.namespace_, ns)) {
      return fail(cni_code::kInvalidConfig, "pod " + pod.namespace_ + "/" + pod.name + " may not use NetworkAttachmentDefinition " + ns +
                                                "/" + e.name + ": namespaceIsolation allows only the pod's namespace, \"default\" and globalNamespaces");
    }
    auto def = PLUMB_TRY(store.network_attachment(ns, e.name));
    att.net = PLUMB_TRY(nad::resolve(def, conf.conf_dir));
    // [devinfo] a NAD annotated with k8s.v1.cni.cncf.io/resourceName gets device-info.
    if (auto rn = def.annotations.find(std::string(nad::kResourceNameAnnotation)); rn != def.annotations.end()) att.device_info.resource_name = rn->second;
    att.selection = ns + "/" + e.name;
    att.status_name = att.selection;
    att.element = &e;
    if (!e.interface.empty()) {
      if (used.count(e.interface) != 0) {
        return fail(cni_code::kConflict, "network " + att.selection + ": interface \"" + e.interface +
                                             "\" is already used by a previous attachment of the pod");
      }
      att.ifname = e.interface;
    } else {
      att.ifname = next_name();
    }
    used.insert(att.ifname);
    out.push_back(std::move(att));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].index = static_cast<int>(i);
    PLUMB_TRY(build_plugins(out[i], conf));
    // [kube] IPAMClaims (spec 8): hand the claim to host-local, record it for GC.
    out[i].claim = PLUMB_TRY(claims::prepare(store, conf.state_dir, pod.namespace_, out[i].element, out[i].plugins, out[i].net.name, log));
    // [devinfo] the device-info file path, handed as runtimeConfig.CNIDeviceInfoFile where declared.
    PLUMB_TRY(devinfo::plan(out[i].plugins, out[i].device_info, conf.device_info_dir, env.container_id, out[i].ifname));
  }
  return out;
}

drivers::Context make_context(const cni::Env& env, const PlumbConfig& conf, Kernel& k, const std::string& ifname,
                              const std::string& network) {
  drivers::Context ctx;
  ctx.sysfs_root = conf.sysfs_root;
  ctx.state_dir = conf.state_dir;
  ctx.bpffs_dir = conf.bpffs_dir;
  ctx.container_id = env.container_id;
  ctx.ifname = ifname;
  ctx.network = network;
  ctx.netns_path = k.pod_ns ? k.pod_ns->path() : "";
  ctx.pod_ns = k.pod_ns ? &*k.pod_ns : nullptr;
  ctx.node = k.node ? &*k.node : nullptr;
  ctx.pod = k.pod ? &*k.pod : nullptr;
  ctx.cni_args = env.args;
  return ctx;
}

/// Undoes one attachment from its record (ADD rollback: complete=false; DEL: as recorded) and
/// removes the record once everything is gone.
Status teardown(const cni::Env& env, const PlumbConfig& conf, Kernel& k, const state::StateDir& state, const state::AttachmentRecord& rec, bool complete) {
  auto ctx = make_context(env, conf, k, rec.ifname, rec.network);
  auto st = txn::unwind(rec.undo, complete, [&](const json::Value& op) { return drivers::run_undo(ctx, op); });
  if (!st) return std::unexpected(st.error().within("tear down " + rec.ifname + " (" + rec.network + ")"));
  return state.remove(rec);
}

/// Runs an attachment's plugins in order with prevResult chaining; returns the last result.
Result<cni::CniResult> attach(const cni::Env& env, const PlumbConfig& conf, Kernel& k, Attachment& att, txn::Journal& journal) {
  auto ctx = make_context(env, conf, k, att.ifname, att.net.name);
  ctx.journal = &journal;
  // [devinfo] the device plugin's file is copied before the chain runs; the driver completes it.
  ctx.device_info_file = att.device_info.file;
  PLUMB_TRY(devinfo::prepare(journal, conf.device_info_dir, att.device_info));
  std::optional<cni::CniResult> prev;
  auto& a = att.plugins.GetAllocator();
  for (auto& plugin : att.plugins.GetArray()) {
    if (prev) {
      auto encoded = PLUMB_TRY(cni::encode_result(*prev, att.net.cni_version));
      json::Value v;
      v.CopyFrom(encoded, a);
      json::set(plugin, "prevResult", std::move(v), a);
    }
    const drivers::Driver* d = drivers::find(plugin["type"].GetString());
    auto r = d->add(ctx, plugin, prev ? &*prev : nullptr);
    if (!r) return std::unexpected(r.error().within("network " + (att.selection.empty() ? att.net.name : att.selection) + " (" + att.ifname + ")"));
    prev = std::move(*r);
  }
  prev->cni_version = std::string(kInternalVersion);
  return *prev;
}

/// Applies "default-route" (4.1.2.1.9): default routes leave every other attachment's interface
/// and go via the element's gateways on its interface.
Status apply_default_route(Kernel& k, const Attachment& chosen, std::vector<cni::CniResult>& results,
                           const std::vector<Attachment>& atts) {
  const auto& gateways = *chosen.element->default_route;
  auto target = PLUMB_TRY(link::get(*k.pod, chosen.ifname));
  if (!target) return fail(cni_code::kKernel, "default-route: interface " + chosen.ifname + " not found");
  for (int family : {AF_INET, AF_INET6}) {
    auto routes = PLUMB_TRY(route::list(*k.pod, family));
    for (auto& r : routes) {
      if (r.is_default()) PLUMB_TRY(route::remove(*k.pod, r));
    }
  }
  uint32_t metric = 0;
  for (auto& gw : gateways) {
    route::Route r;
    r.dst = PLUMB_TRY(IpPrefix::parse(gw.is_v4() ? "0.0.0.0/0" : "::/0"));
    r.gw = gw;
    r.oif = target->index;
    r.priority = metric++;
    auto st = route::add(*k.pod, r);
    if (!st) return std::unexpected(st.error().within("default-route via " + gw.str() + " on " + chosen.ifname));
  }
  for (size_t i = 0; i < atts.size(); ++i) {
    auto& routes = results[i].routes;
    routes.erase(std::remove_if(routes.begin(), routes.end(), [](const cni::RouteEntry& r) { return r.dst.len == 0; }), routes.end());
    if (&atts[i] == &chosen) {
      for (auto& gw : gateways) {
        cni::RouteEntry e;
        e.dst = *IpPrefix::parse(gw.is_v4() ? "0.0.0.0/0" : "::/0");
        e.gw = gw;
        routes.push_back(std::move(e));
      }
    }
  }
  return {};
}

Result<Kernel> open_kernel(const std::string& netns_path, bool need_pod) {
  Kernel k;
  k.node = PLUMB_TRY(netlink::Socket::open());
  if (!netns_path.empty()) {
    auto ns = netns::Netns::open(netns_path);
    if (ns) {
      k.pod_ns = std::move(*ns);
      k.pod = PLUMB_TRY(netlink::Socket::open_in(k.pod_ns->fd()));
    } else if (need_pod) {
      return fail(cni_code::kInvalidEnv, "CNI_NETNS \"" + netns_path + "\" cannot be opened", ns.error().text());
    }
  } else if (need_pod) {
    return fail(cni_code::kInvalidEnv, "CNI_NETNS is required");
  }
  return k;
}

bool is_system_namespace(const PlumbConfig& conf, const std::string& ns) {
  return std::find(conf.system_namespaces.begin(), conf.system_namespaces.end(), ns) != conf.system_namespaces.end();
}

Result<std::string> encode_for_runtime(const json::Value& result_internal, const std::string& version) {
  auto r = PLUMB_TRY(cni::decode_result(result_internal, kInternalVersion));
  auto doc = PLUMB_TRY(cni::encode_result(r, version));
  return json::dump(doc);
}

Result<std::string> do_add(const cni::Env& env, const PlumbConfig& conf, Log& log) {
  state::StateDir state(conf.state_dir);
  auto lock = PLUMB_TRY(state.lock_container(env.container_id));
  Kernel k = PLUMB_TRY(open_kernel(env.netns, true));

  // CRI semantics: an ADD repeated for attachments that exist returns the recorded result; the
  // remains of an ADD that never completed are removed first.
  auto existing = PLUMB_TRY(state.read(env.container_id));
  if (!existing.empty()) {
    bool all_ready = std::all_of(existing.begin(), existing.end(), [](auto& r) { return r.phase == "ready"; });
    if (all_ready && existing.front().is_default && existing.front().ifname == env.ifname && existing.front().netns == env.netns) {
      log.info("ADD " + env.container_id + ": attachments exist, returning the recorded result");
      return encode_for_runtime(existing.front().result, conf.cni_version);
    }
    for (auto it = existing.rbegin(); it != existing.rend(); ++it) {
      auto st = teardown(env, conf, k, state, *it, it->phase == "ready");
      if (!st) return std::unexpected(st.error().within("remove the remains of an earlier ADD"));
    }
  }

  auto store = PLUMB_TRY(source::make_source(conf));  // [kube] API server or local store
  source::PodRef pod = pod_ref(env);
  std::vector<nad::SelectionElement> elements;
  auto atts = PLUMB_TRY(plan(env, conf, *store, pod, elements, log));

  std::vector<state::AttachmentRecord> records(atts.size());
  std::vector<cni::CniResult> results;
  std::optional<Error> failure;
  size_t done = 0;
  for (; done < atts.size(); ++done) {
    Attachment& att = atts[done];
    auto& rec = records[done];
    rec.container_id = env.container_id;
    rec.index = att.index;
    rec.ifname = att.ifname;
    rec.network = att.net.name;
    rec.selection = att.selection;
    rec.is_default = att.is_default;
    rec.pod_namespace = pod.namespace_;
    rec.pod_name = pod.name;
    rec.netns = env.netns;
    rec.config.CopyFrom(att.plugins, rec.config.GetAllocator());
    txn::Journal journal(state, rec);
    auto r = attach(env, conf, k, att, journal);
    if (!r) {
      failure = r.error();
      ++done;  // this attachment has partial changes to undo too
      break;
    }
    results.push_back(std::move(*r));
  }

  if (!failure) {
    // default-route on at most one element (validated by the parser).
    for (auto& att : atts) {
      if (att.element != nullptr && att.element->default_route) {
        auto st = apply_default_route(k, att, results, atts);
        if (!st) failure = st.error();
      }
    }
  }
  // [kube] IPAMClaims without status.ips get the addresses just allocated for them.
  for (size_t i = 0; i < atts.size() && !failure; ++i) {
    if (!atts[i].claim) continue;
    auto st = claims::publish(*store, *atts[i].claim, results[i]);
    if (!st) failure = st.error().within("network " + atts[i].selection + " (" + atts[i].ifname + ")");
  }
  std::vector<nad::StatusEntry> status;
  if (!failure) {
    for (size_t i = 0; i < atts.size(); ++i) {
      auto entry = nad::status_from_result(atts[i].status_name, results[i], atts[i].ifname, atts[i].is_default);
      if (!atts[i].device_info.file.empty()) {  // [devinfo] 5.3.8: the file's content, verbatim
        auto di = devinfo::read(atts[i].device_info.file);
        if (!di) failure = di.error();
        else if (*di) entry.device_info = std::move(**di);
      }
      if (atts[i].element != nullptr && atts[i].element->default_route) {
        for (auto& gw : *atts[i].element->default_route) entry.default_route.push_back(gw.str());
      }
      status.push_back(std::move(entry));
    }
    auto status_doc = json::parse(nad::encode_network_status(status), "network-status");
    for (size_t i = 0; i < atts.size() && !failure; ++i) {
      auto& rec = records[i];
      auto encoded = cni::encode_result(results[i], kInternalVersion);
      if (!encoded) {
        failure = encoded.error();
        break;
      }
      rec.result.CopyFrom(*encoded, rec.result.GetAllocator());
      if (status_doc && status_doc->IsArray() && i < status_doc->Size()) {
        rec.status.CopyFrom((*status_doc)[static_cast<rapidjson::SizeType>(i)], rec.status.GetAllocator());
      }
      rec.phase = "ready";
      auto st = state.write(rec);
      if (!st) failure = st.error().within("record attachment " + rec.ifname);
    }
  }
  if (!failure && !pod.name.empty() && !is_system_namespace(conf, pod.namespace_)) {
    auto st = store->write_network_status(pod, nad::encode_network_status(status));
    // [kube] statusErrorsFatal=false (default): the pod's networks work; a missing annotation
    // is reported in the log and does not undo them.
    if (!st && conf.status_errors_fatal) failure = st.error().within("write network-status of pod " + pod.namespace_ + "/" + pod.name);
    if (!st && !conf.status_errors_fatal) {
      log.error("ADD " + env.container_id + ": network-status of pod " + pod.namespace_ + "/" + pod.name + " not written (" +
                store->describe() + "), the attachments stay (statusErrorsFatal is false): " + st.error().text());
    }
  }

  if (failure) {
    // 7.2: undo everything this ADD did, newest first, including shared objects it created.
    bool all_gone = true;
    for (size_t i = done; i-- > 0;) {
      auto st = teardown(env, conf, k, state, records[i], /*complete=*/false);
      if (!st) {
        all_gone = false;
        log.error("ADD " + env.container_id + " rollback: " + st.error().text() + " (a DEL will retry)");
      }
    }
    if (all_gone) lock.unlink_path();
    return std::unexpected(*failure);
  }
  log.info("ADD " + env.container_id + ": " + std::to_string(atts.size()) + " attachment(s)");
  return encode_for_runtime(records.front().result, conf.cni_version);
}

Result<std::string> do_del(const cni::Env& env, const PlumbConfig& conf, Log& log) {
  state::StateDir state(conf.state_dir);
  // DEL must tear down the kernel side even when the state directory cannot take a lock file
  // (read-only or full filesystem): then it proceeds unlocked, as best effort.
  auto lock = state.lock_container(env.container_id);
  if (!lock) log.warning("DEL " + env.container_id + ": proceeding without the container lock: " + lock.error().text());
  auto records = PLUMB_TRY(state.read(env.container_id));
  Kernel k = PLUMB_TRY(open_kernel(env.netns, false));
  std::optional<Error> first;
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    auto st = teardown(env, conf, k, state, *it, it->phase == "ready");
    if (!st) {
      log.error("DEL " + env.container_id + ": " + st.error().text());
      if (!first) first = st.error();
    }
  }
  source::PodRef pod = pod_ref(env);
  if (!records.empty()) {
    pod.namespace_ = records.front().pod_namespace;
    pod.name = records.front().pod_name;
  }
  if (!pod.name.empty() && !is_system_namespace(conf, pod.namespace_)) {
    // [kube] Errors here are logged, never returned. The API server source makes no request
    // (DEL never waits on the API server); the local store removes its status file.
    auto store = source::make_source(conf);
    auto st = store ? (*store)->remove_network_status(pod) : Status(std::unexpected(store.error()));
    if (!st) log.warning("DEL " + env.container_id + ": network-status not removed: " + st.error().text());
  }
  if (first) return std::unexpected(*first);
  if (lock) lock->unlink_path();  // nothing of the container is left: no lock file either
  return std::string();
}

Result<std::string> do_check(const cni::Env& env, const PlumbConfig& conf) {
  state::StateDir state(conf.state_dir);
  auto lock = PLUMB_TRY(state.lock_container(env.container_id));
  auto records = PLUMB_TRY(state.read(env.container_id));
  if (records.empty()) return fail(cni_code::kUnknownContainer, "CHECK: container " + env.container_id + " has no attachments");
  Kernel k = PLUMB_TRY(open_kernel(env.netns, true));
  for (auto& rec : records) {
    if (rec.phase != "ready") return fail(cni_code::kKernel, "CHECK: attachment " + rec.ifname + " never completed");
    auto r = PLUMB_TRY(cni::decode_result(rec.result, kInternalVersion));
    auto ctx = make_context(env, conf, k, rec.ifname, rec.network);
    for (auto& plugin : rec.config.GetArray()) {
      const drivers::Driver* d = drivers::find(plugin["type"].GetString());
      if (d == nullptr) return fail(cni_code::kInvalidConfig, "CHECK: unknown plugin type in record of " + rec.ifname);
      auto st = d->check(ctx, plugin, r);
      if (!st) return std::unexpected(st.error().within("network " + rec.network + " (" + rec.ifname + ")"));
    }
  }
  if (conf.prev_result.IsObject()) {
    auto prev = PLUMB_TRY(cni::decode_result(conf.prev_result, conf.cni_version));
    auto recorded = PLUMB_TRY(cni::decode_result(records.front().result, kInternalVersion));
    for (auto& ip : prev.ips) {
      bool found = std::any_of(recorded.ips.begin(), recorded.ips.end(), [&](auto& r) { return r.address.addr == ip.address.addr; });
      if (!found) return fail(cni_code::kKernel, "CHECK: prevResult address " + ip.address.str() + " is not held by the attachment");
    }
  }
  return std::string();
}

// [cluster ipam] begin: GC of IPAM pools that outlive this node's records (etcd).
/// The distinct "ipam" objects of recorded plugin configs, keyed by network + config text.
using IpamConfigs = std::map<std::string, std::pair<std::string, json::Document>>;
void collect_ipams(const std::vector<state::AttachmentRecord>& records, IpamConfigs& out) {
  for (const auto& rec : records) {
    if (!rec.config.IsArray()) continue;
    for (const auto& plugin : rec.config.GetArray()) {
      const json::Value* ipam = json::find(plugin, "ipam");
      if (ipam == nullptr || !ipam->IsObject()) continue;
      std::string key = rec.network + "\n" + json::dump(*ipam);
      if (!out.contains(key)) out.emplace(key, std::pair{rec.network, json::clone(*ipam)});
    }
  }
}

/// Asks each IPAM (Ipam::gc) to release what this node holds for owners that are neither in the
/// valid list nor still recorded here (a record means an ADD in progress or a release pending,
/// which the record's own teardown retries). host-local and static do nothing.
Status gc_ipams(const PlumbConfig& conf, const state::StateDir& state, const IpamConfigs& ipams) {
  ipam::Ipam::KeepFn keep = [&](const std::string& cid, const std::string&) {
    if (std::any_of(conf.valid_attachments.begin(), conf.valid_attachments.end(), [&](auto& v) { return v.first == cid; })) {
      return true;
    }
    auto recs = state.read(cid);
    return !recs || !recs->empty();
  };
  Status first;
  for (const auto& [key, entry] : ipams) {
    auto made = ipam::make(entry.second);
    Status st = made ? Status{} : Status(std::unexpected(made.error()));
    if (made) {
      ipam::Request req;
      req.network_name = entry.first;
      req.ipam = &entry.second;
      st = (*made)->gc(req, keep);
    }
    if (!st && first) first = std::unexpected(st.error().within("GC of the addresses of network " + entry.first));
  }
  return first;
}
// [cluster ipam] end

Result<std::string> do_gc(const cni::Env& env, const PlumbConfig& conf, Log& log) {
  state::StateDir state(conf.state_dir);
  auto containers = PLUMB_TRY(state.containers());
  std::optional<Error> first;
  IpamConfigs ipams;  // [cluster ipam]
  for (auto& cid : containers) {
    auto lock = PLUMB_TRY(state.lock_container(cid));
    auto records = PLUMB_TRY(state.read(cid));
    if (records.empty()) {
      lock.unlink_path();
      continue;
    }
    collect_ipams(records, ipams);  // [cluster ipam]
    const auto& head = records.front();
    bool valid = std::any_of(conf.valid_attachments.begin(), conf.valid_attachments.end(),
                             [&](auto& v) { return v.first == cid && (!head.is_default || v.second == head.ifname); });
    if (valid) continue;
    cni::Env sub = env;
    sub.container_id = cid;
    auto k = open_kernel(head.netns, false);
    if (!k) {
      if (!first) first = k.error();
      continue;
    }
    bool all_gone = true;
    for (auto it = records.rbegin(); it != records.rend(); ++it) {
      auto st = teardown(sub, conf, *k, state, *it, it->phase == "ready");
      if (!st) {
        all_gone = false;
        log.error("GC " + cid + ": " + st.error().text());
        if (!first) first = st.error();
      }
    }
    if (all_gone) lock.unlink_path();
    log.info("GC removed the attachments of container " + cid);
  }
  if (auto st = gc_ipams(conf, state, ipams); !st) {  // [cluster ipam]
    log.error("GC: " + st.error().text());
    if (!first) first = st.error();
  }
  {
    // [kube] addresses held for IPAMClaims that no longer exist (no request without claims).
    auto src = source::make_source(conf);
    auto st = src ? claims::gc(**src, conf.state_dir, log) : Status(std::unexpected(src.error()));
    if (!st && !first) first = st.error();
  }
  if (first) return std::unexpected(*first);
  return std::string();
}

Result<std::string> do_status(const PlumbConfig& conf) {
  state::StateDir state(conf.state_dir);
  auto lock = state.lock_container("status-probe");
  if (!lock) return fail(cni_code::kPluginNotAvailable, "state directory " + conf.state_dir + " is not usable", lock.error().text());
  lock->unlink_path();
  // [kube] the pod source must be usable: the local store's directory readable, or the API
  // server reachable (else 51) with valid credentials (else 50).
  auto src = source::make_source(conf);
  if (!src) return fail(cni_code::kPluginNotAvailable, "plumb's pod source is not configured correctly: " + src.error().text());
  PLUMB_TRY((*src)->ready());
  return std::string();
}

}  // namespace

Result<std::string> run(const cni::Env& env, const PlumbConfig& conf, Log& log) {
  switch (env.command) {
    case cni::Command::Add:
      return do_add(env, conf, log);
    case cni::Command::Del:
      return do_del(env, conf, log);
    case cni::Command::Check:
      return do_check(env, conf);
    case cni::Command::Gc:
      return do_gc(env, conf, log);
    case cni::Command::Status:
      return do_status(conf);
    case cni::Command::Version:
      return std::string(cni::encode_version_info(conf.cni_version));
  }
  return fail(cni_code::kInvalidEnv, "unknown CNI_COMMAND");
}

}  // namespace plumb::pod
