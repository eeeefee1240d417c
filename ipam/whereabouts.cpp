// whereabouts' Kubernetes objects: names, paths, encoding and decoding (whereabouts.hpp).
#include "ipam/whereabouts.hpp"

#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/socket.h>

#include <algorithm>

#include "ipam/cluster_internal.hpp"

namespace plumb::ipam::whereabouts {
namespace {

using cluster::internal::from_u128;
using cluster::internal::to_u128;
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void put(Writer& w, const char* key, const std::string& value) {
  w.Key(key);
  w.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
}

std::string dec(u128 v) {
  if (v == 0) return "0";
  std::string s;
  for (; v > 0; v /= 10) s.push_back(static_cast<char>('0' + static_cast<int>(v % 10)));
  std::reverse(s.begin(), s.end());
  return s;
}

std::optional<u128> parse_dec(std::string_view s) {
  if (s.empty() || s.size() > 39) return std::nullopt;
  u128 v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    u128 next = v * 10 + static_cast<unsigned>(c - '0');
    if (next / 10 != v) return std::nullopt;  // overflow
    v = next;
  }
  return v;
}

void write_allocation(Writer& w, const Allocation& a) {
  w.StartObject();
  put(w, "id", a.id);
  put(w, "podref", a.podref);
  if (!a.ifname.empty()) put(w, "ifname", a.ifname);  // whereabouts: `json:"ifname,omitempty"`
  w.EndObject();
}

void write_metadata(Writer& w, const std::string& ns, const std::string& name) {
  w.Key("metadata");
  w.StartObject();
  put(w, "name", name);
  put(w, "namespace", ns);
  w.EndObject();
}

void write_op(Writer& w, const char* op, const std::string& path) {
  put(w, "op", op);
  put(w, "path", path);
}

std::string text(const rapidjson::StringBuffer& sb) { return {sb.GetString(), sb.GetSize()}; }

std::string str_or_empty(const json::Value& obj, std::string_view key) {
  const json::Value* v = json::find(obj, key);
  return v != nullptr && v->IsString() ? v->GetString() : std::string();
}

std::string object_path(std::string_view plural, const std::string& ns, const std::string& name) {
  std::string p = std::string(kApiBase) + "/namespaces/" + ns + "/" + std::string(plural);
  if (!name.empty()) p += "/" + name;
  return p;
}

}  // namespace

std::string cidr_text(const IpPrefix& range) { return range.network().str(); }

std::string normalize_range(const IpPrefix& range) {
  std::string s = cidr_text(range);
  std::replace(s.begin(), s.end(), ':', '-');
  std::replace(s.begin(), s.end(), '/', '-');
  return s;
}

std::string pool_name(const std::string& network_name, const std::string& node, const IpPrefix& range) {
  std::string name = normalize_range(range);
  if (!node.empty()) name = node + "-" + name;
  if (!network_name.empty()) name = network_name + "-" + name;
  return name;
}

std::string reservation_name(const IpAddr& ip, const std::string& network_name) {
  std::string s = ip.str();
  if (!s.empty() && s.back() == ':') s += "0";
  std::replace(s.begin(), s.end(), ':', '-');
  return network_name.empty() ? s : network_name + "-" + s;
}

std::string pools_path(const std::string& ns, const std::string& name) { return object_path("ippools", ns, name); }
std::string reservations_path(const std::string& ns, const std::string& name) {
  return object_path("overlappingrangeipreservations", ns, name);
}
std::string slice_pools_path(const std::string& ns, const std::string& name) {
  return object_path("nodeslicepools", ns, name);
}

IpAddr IpPool::at(u128 offset) const { return from_u128(range.addr.family, to_u128(range.addr) + offset); }
u128 IpPool::offset_of(const IpAddr& ip) const { return to_u128(ip) - to_u128(range.addr); }

Result<IpPool> decode_pool(const json::Value& obj, const std::string& what) {
  if (!obj.IsObject()) return fail(cni_code::kDecode, what + " is not a JSON object");
  IpPool p;
  if (const json::Value* meta = json::find(obj, "metadata"); meta != nullptr && meta->IsObject()) {
    p.name = str_or_empty(*meta, "name");
    p.resource_version = str_or_empty(*meta, "resourceVersion");
  }
  const json::Value* spec = json::find(obj, "spec");
  if (spec == nullptr || !spec->IsObject()) return fail(cni_code::kDecode, what + " has no spec");
  p.range_text = str_or_empty(*spec, "range");
  auto range = IpPrefix::parse(p.range_text);
  if (!range) return fail(cni_code::kDecode, what + " spec.range \"" + p.range_text + "\" is not a CIDR");
  p.range = *range;
  const json::Value* allocs = json::find(*spec, "allocations");
  if (allocs == nullptr || allocs->IsNull()) return p;
  if (!allocs->IsObject()) return fail(cni_code::kDecode, what + " spec.allocations is not an object");
  for (auto it = allocs->MemberBegin(); it != allocs->MemberEnd(); ++it) {
    auto off = parse_dec({it->name.GetString(), it->name.GetStringLength()});
    if (!off) continue;  // whereabouts skips keys that are not offsets too
    if (!it->value.IsObject()) {
      return fail(cni_code::kDecode, what + " spec.allocations[\"" + std::string(it->name.GetString()) + "\"] is not an object");
    }
    Allocation& a = p.allocations[*off];  // one pass over the members: a pool is read on every ADD
    for (auto m = it->value.MemberBegin(); m != it->value.MemberEnd(); ++m) {
      if (!m->value.IsString()) continue;
      std::string_view key(m->name.GetString(), m->name.GetStringLength());
      std::string* field = key == "id" ? &a.id : key == "podref" ? &a.podref : key == "ifname" ? &a.ifname : nullptr;
      if (field != nullptr) field->assign(m->value.GetString(), m->value.GetStringLength());
    }
  }
  return p;
}

Result<IpPool> parse_pool(std::string text, const std::string& what) {
  rapidjson::Document d;  // in situ: strings stay in `text`, which outlives `d`
  d.ParseInsitu(text.data());
  if (d.HasParseError()) {
    return fail(cni_code::kDecode, "cannot decode " + what + ": " + rapidjson::GetParseError_En(d.GetParseError()) +
                                       " at offset " + std::to_string(d.GetErrorOffset()));
  }
  return decode_pool(d, what);
}

std::string encode_pool(const std::string& ns, const std::string& name, const IpPrefix& range,
                        const std::map<u128, Allocation>& allocations) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  put(w, "apiVersion", std::string(kApiVersion));
  put(w, "kind", "IPPool");
  write_metadata(w, ns, name);
  w.Key("spec");
  w.StartObject();
  put(w, "range", cidr_text(range));
  w.Key("allocations");
  w.StartObject();
  for (const auto& [off, a] : allocations) {
    w.Key(dec(off).c_str());
    write_allocation(w, a);
  }
  w.EndObject();
  w.EndObject();
  w.EndObject();
  return text(sb);
}

std::string claim_patch(u128 offset, const Allocation& a) {
  const std::string path = "/spec/allocations/" + dec(offset);
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartArray();
  w.StartObject();  // whereabouts' guard: "add" would replace, so the slot must test null
  write_op(w, "test", path);
  w.Key("value");
  w.Null();
  w.EndObject();
  w.StartObject();
  write_op(w, "add", path);
  w.Key("value");
  write_allocation(w, a);
  w.EndObject();
  w.EndArray();
  return text(sb);
}

std::string release_patch(const std::vector<std::pair<u128, std::string>>& slots) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartArray();
  for (const auto& [off, id] : slots) {
    const std::string path = "/spec/allocations/" + dec(off);
    w.StartObject();
    write_op(w, "test", path + "/id");
    put(w, "value", id);
    w.EndObject();
    w.StartObject();
    write_op(w, "remove", path);
    w.EndObject();
  }
  w.EndArray();
  return text(sb);
}

Result<Reservation> decode_reservation(const json::Value& obj, const std::string& what) {
  if (!obj.IsObject()) return fail(cni_code::kDecode, what + " is not a JSON object");
  Reservation r;
  if (const json::Value* meta = json::find(obj, "metadata"); meta != nullptr && meta->IsObject()) {
    r.name = str_or_empty(*meta, "name");
    r.uid = str_or_empty(*meta, "uid");
    r.resource_version = str_or_empty(*meta, "resourceVersion");
  }
  const json::Value* spec = json::find(obj, "spec");
  if (spec == nullptr || !spec->IsObject()) return fail(cni_code::kDecode, what + " has no spec");
  r.container_id = str_or_empty(*spec, "containerid");
  r.podref = str_or_empty(*spec, "podref");
  r.ifname = str_or_empty(*spec, "ifname");
  return r;
}

std::string encode_reservation(const std::string& ns, const std::string& name, const Allocation& a) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  put(w, "apiVersion", std::string(kApiVersion));
  put(w, "kind", "OverlappingRangeIPReservation");
  write_metadata(w, ns, name);
  w.Key("spec");
  w.StartObject();
  put(w, "containerid", a.id);
  put(w, "podref", a.podref);
  if (!a.ifname.empty()) put(w, "ifname", a.ifname);
  w.EndObject();
  w.EndObject();
  return text(sb);
}

std::string delete_preconditions(const std::string& uid, const std::string& resource_version) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  put(w, "apiVersion", "v1");
  put(w, "kind", "DeleteOptions");
  w.Key("preconditions");
  w.StartObject();
  if (!uid.empty()) put(w, "uid", uid);
  if (!resource_version.empty()) put(w, "resourceVersion", resource_version);
  w.EndObject();
  w.EndObject();
  return text(sb);
}

Result<NodeSlicePool> decode_slice_pool(const json::Value& obj, const std::string& what) {
  if (!obj.IsObject()) return fail(cni_code::kDecode, what + " is not a JSON object");
  NodeSlicePool p;
  if (const json::Value* meta = json::find(obj, "metadata"); meta != nullptr && meta->IsObject()) {
    p.name = str_or_empty(*meta, "name");
    p.resource_version = str_or_empty(*meta, "resourceVersion");
  }
  if (const json::Value* spec = json::find(obj, "spec"); spec != nullptr && spec->IsObject()) {
    p.range = str_or_empty(*spec, "range");
    p.slice_size = str_or_empty(*spec, "sliceSize");
  }
  const json::Value* status = json::find(obj, "status");
  const json::Value* allocs = status != nullptr && status->IsObject() ? json::find(*status, "allocations") : nullptr;
  if (allocs == nullptr || allocs->IsNull()) return p;
  if (!allocs->IsArray()) return fail(cni_code::kDecode, what + " status.allocations is not a list");
  p.has_status = true;
  for (const auto& e : allocs->GetArray()) {
    if (!e.IsObject()) return fail(cni_code::kDecode, what + " status.allocations has an entry that is not an object");
    p.allocations.emplace_back(str_or_empty(e, "nodeName"), str_or_empty(e, "sliceRange"));
  }
  return p;
}

namespace {

void write_slices(Writer& w, const std::vector<IpPrefix>& slices, size_t taken, const std::string& node) {
  w.StartArray();
  for (size_t i = 0; i < slices.size(); ++i) {
    w.StartObject();
    put(w, "nodeName", i == taken ? node : std::string());
    put(w, "sliceRange", cidr_text(slices[i]));
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace

std::string encode_slice_pool(const std::string& ns, const std::string& name, const IpPrefix& range,
                              const std::string& slice_size, const std::vector<IpPrefix>& slices, size_t taken,
                              const std::string& node) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  put(w, "apiVersion", std::string(kApiVersion));
  put(w, "kind", "NodeSlicePool");
  write_metadata(w, ns, name);
  w.Key("spec");
  w.StartObject();
  put(w, "range", cidr_text(range));
  put(w, "sliceSize", slice_size);
  w.EndObject();
  w.Key("status");
  w.StartObject();
  w.Key("allocations");
  write_slices(w, slices, taken, node);
  w.EndObject();
  w.EndObject();
  return text(sb);
}

std::string take_slice_patch(const NodeSlicePool& pool, const std::vector<IpPrefix>& slices, size_t index,
                             const std::string& node) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartArray();
  w.StartObject();  // one node, one slice: no other writer may have assigned one meanwhile
  write_op(w, "test", "/metadata/resourceVersion");
  put(w, "value", pool.resource_version);
  w.EndObject();
  if (pool.has_status) {
    const std::string path = "/status/allocations/" + std::to_string(index) + "/nodeName";
    w.StartObject();
    write_op(w, "test", path);
    put(w, "value", "");
    w.EndObject();
    w.StartObject();
    write_op(w, "replace", path);
    put(w, "value", node);
    w.EndObject();
  } else {
    w.StartObject();
    write_op(w, "add", "/status");
    w.Key("value");
    w.StartObject();
    w.Key("allocations");
    write_slices(w, slices, index, node);
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  return text(sb);
}

std::string free_slices_patch(const NodeSlicePool& pool, const std::vector<size_t>& indexes) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartArray();
  for (size_t i : indexes) {
    const std::string path = "/status/allocations/" + std::to_string(i) + "/nodeName";
    w.StartObject();
    write_op(w, "test", path);
    put(w, "value", pool.allocations[i].first);
    w.EndObject();
    w.StartObject();
    write_op(w, "replace", path);
    put(w, "value", "");
    w.EndObject();
  }
  w.EndArray();
  return text(sb);
}

Result<unsigned> parse_slice_size(const std::string& text_in, const IpPrefix& range) {
  std::string_view t = text_in;
  if (!t.empty() && t.front() == '/') t.remove_prefix(1);
  auto n = parse_dec(t);
  if (!n || *n > range.max_len() || *n < range.len) {
    return fail(cni_code::kInvalidConfig, "ipam.node_slice_size \"" + text_in + "\" must be a prefix length (\"/28\") from " +
                                              std::to_string(range.len) + " to " + std::to_string(range.max_len()) +
                                              " for range " + cidr_text(range));
  }
  return static_cast<unsigned>(*n);
}

Result<std::vector<IpPrefix>> divide(const IpPrefix& range, unsigned slice_len) {
  const IpPrefix net = range.network();
  if (slice_len - net.len > 16) {
    return fail(cni_code::kInvalidConfig, "ipam.node_slice_size /" + std::to_string(slice_len) + " divides " + cidr_text(range) +
                                              " into more than 65536 slices");
  }
  const size_t count = size_t{1} << (slice_len - net.len);
  const u128 step = u128{1} << (net.max_len() - slice_len);
  std::vector<IpPrefix> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    out.push_back(IpPrefix{from_u128(net.addr.family, to_u128(net.addr) + step * i), static_cast<uint8_t>(slice_len)});
  }
  return out;
}

}  // namespace plumb::ipam::whereabouts
