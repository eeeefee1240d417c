// The network-status annotation k8s.v1.cni.cncf.io/network-status (spec 5).
#include "cni-entry/npwg/nad.hpp"

namespace plumb::nad {
namespace {

using json::Value;
using Alloc = rapidjson::Document::AllocatorType;

Value str_value(std::string_view s, Alloc& a) { return Value(s.data(), static_cast<rapidjson::SizeType>(s.size()), a); }

void add(Value& obj, std::string_view key, Value v, Alloc& a) { obj.AddMember(str_value(key, a), std::move(v), a); }

Value str_array(const std::vector<std::string>& v, Alloc& a) {
  Value arr(rapidjson::kArrayType);
  for (const auto& s : v) arr.PushBack(str_value(s, a), a);
  return arr;
}

}  // namespace

StatusEntry status_from_result(const std::string& name, const cni::CniResult& r, const std::string& ifname,
                               bool is_default) {
  StatusEntry e;
  e.name = name;
  e.is_default = is_default;
  e.dns = r.dns;

  // 5.3.2.1 / 5.3.4.1: the first interface with a sandbox.
  std::optional<int> sandbox_index;
  for (size_t i = 0; i < r.interfaces.size(); ++i) {
    if (!r.interfaces[i].sandbox.empty()) {
      sandbox_index = static_cast<int>(i);
      const auto& itf = r.interfaces[i];
      e.interface = itf.name;
      e.mac = itf.mac;
      e.mtu_bytes = itf.mtu_bytes;
      break;
    }
  }
  // Results older than 0.3.0 have no interfaces: the interface is the CNI_IFNAME we used.
  // A newer result without any interface (an IPAM-shaped result) is treated alike.
  if (e.interface.empty() && (r.interfaces.empty() || cni::compare_versions(r.cni_version, "0.3.0") < 0)) {
    e.interface = ifname;
  }

  // 5.3.3.1: the ips of the sandbox interface; without one (or when none points at it) the ips
  // that name no interface. Addresses are given without their prefix length.
  if (sandbox_index) {
    for (const auto& ip : r.ips) {
      if (ip.interface && *ip.interface == *sandbox_index) e.ips.push_back(ip.address.addr.str());
    }
  }
  if (e.ips.empty()) {
    for (const auto& ip : r.ips) {
      if (!ip.interface || *ip.interface < 0) e.ips.push_back(ip.address.addr.str());
    }
  }
  // Multus (nadutils CreateNetworkStatus): the gateways of the result's default routes.
  for (const auto& rt : r.routes) {
    if (rt.dst.len == 0 && rt.gw) e.gateway.push_back(rt.gw->str());
  }
  return e;
}

std::string encode_network_status(const std::vector<StatusEntry>& entries) {
  json::Document d;
  d.SetArray();
  Alloc& a = d.GetAllocator();
  for (const auto& e : entries) {
    Value o(rapidjson::kObjectType);
    add(o, "name", str_value(e.name, a), a);
    if (!e.interface.empty()) add(o, "interface", str_value(e.interface, a), a);
    if (!e.ips.empty()) add(o, "ips", str_array(e.ips, a), a);
    // 5.3.4: "mac" only together with "interface"; 5.3.5 "mtu" is the MTU of that interface.
    if (!e.interface.empty() && !e.mac.empty()) add(o, "mac", str_value(e.mac, a), a);
    if (!e.interface.empty() && e.mtu_bytes) add(o, "mtu", Value(*e.mtu_bytes), a);
    add(o, "default", Value(e.is_default), a);
    if (!e.dns.empty()) {
      Value dns(rapidjson::kObjectType);
      if (!e.dns.nameservers.empty()) add(dns, "nameservers", str_array(e.dns.nameservers, a), a);
      if (!e.dns.domain.empty()) add(dns, "domain", str_value(e.dns.domain, a), a);
      if (!e.dns.search.empty()) add(dns, "search", str_array(e.dns.search, a), a);
      if (!e.dns.options.empty()) add(dns, "options", str_array(e.dns.options, a), a);
      add(o, "dns", std::move(dns), a);
    }
    if (!e.default_route.empty()) add(o, "default-route", str_array(e.default_route, a), a);
    if (e.device_info) add(o, "device-info", Value(*e.device_info, a), a);
    if (!e.gateway.empty()) add(o, "gateway", str_array(e.gateway, a), a);
    d.PushBack(std::move(o), a);
  }
  return json::dump(d);
}

Status check_network_status(const std::vector<StatusEntry>& entries) {
  size_t defaults = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    const std::string where = std::string(kNetworkStatusAnnotation) + ": entry " + std::to_string(i + 1);
    if (e.name.empty()) return fail(cni_code::kInternal, where + " has no \"name\"");
    if (e.is_default) ++defaults;
    if (e.device_info && !e.device_info->IsObject()) {
      return fail(cni_code::kInternal, where + " (" + e.name + "): \"device-info\" is not a map");
    }
  }
  if (defaults != 1) {
    return fail(cni_code::kInternal, std::string(kNetworkStatusAnnotation) + ": " + std::to_string(defaults) +
                                         " entries have \"default\": true, exactly one must");
  }
  return {};
}

}  // namespace plumb::nad
