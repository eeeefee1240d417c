// host-local's configuration (host_local.hpp): ranges and range sets with the reference plugin's
// defaults and rules, the whole "ipam" object, the reference allocator's round-robin order, and
// resolvConf. No disk access but reading resolvConf; the allocator itself is host_local.cpp.
#include <sstream>

#include "engine/base/file.hpp"
#include "engine/base/text.hpp"
#include "ipam/host_local.hpp"

namespace plumb::ipam {
namespace {

IpAddr first_host(const IpPrefix& subnet) { return subnet.network().addr.plus(1); }

/// Last address the reference allocates by default: the subnet's last, minus one for IPv4
/// (the broadcast address). Subnets are at most /30 here, so the last byte never borrows.
IpAddr default_end(const IpPrefix& subnet) {
  IpAddr a = subnet.last();
  if (a.is_v4()) a.bytes[3] = static_cast<uint8_t>(a.bytes[3] - 1);
  return a;
}

bool overlaps(const Range& a, const Range& b) {
  return a.start.family == b.start.family && a.start <= b.end && b.start <= a.end;
}

/// Reads an optional address field of a range and checks it lies in the subnet.
Result<std::optional<IpAddr>> range_addr(const json::Value& v, std::string_view key, const std::string& where,
                                         const IpPrefix& subnet) {
  auto text = PLUMB_TRY(json::get_string(v, key, where));
  if (!text) return std::optional<IpAddr>{};
  std::string field = where + "." + std::string(key);
  auto a = IpAddr::parse(*text);
  if (!a) return std::unexpected(a.error().within(field));
  if (a->family != subnet.addr.family) {
    return fail(cni_code::kInvalidConfig,
                field + " \"" + *text + "\" is not of the same address family as subnet " + subnet.str());
  }
  if (!subnet.contains(*a)) {
    return fail(cni_code::kInvalidConfig, field + " \"" + *text + "\" is not in subnet " + subnet.str());
  }
  return std::optional<IpAddr>(*a);
}

}  // namespace

bool Range::contains(const IpAddr& a) const {
  return a.family == start.family && subnet.contains(a) && start <= a && a <= end;
}

bool Range::allocatable(const IpAddr& a) const {
  if (!contains(a) || a == gateway) return false;
  if (a.is_v4() && (a == subnet.addr || a == subnet.last())) return false;
  return true;
}

std::string Range::str() const { return subnet.str() + " (" + start.str() + "-" + end.str() + ")"; }

std::string range_set_str(const RangeSet& set) {
  std::string out;
  for (const Range& r : set) out += (out.empty() ? "" : ", ") + r.str();
  return out;
}

std::optional<size_t> range_for(const RangeSet& set, const IpAddr& a) {
  for (size_t i = 0; i < set.size(); ++i) {
    if (set[i].contains(a)) return i;
  }
  return std::nullopt;
}

Result<Range> parse_range(const json::Value& v, const std::string& where) {
  if (!v.IsObject()) return fail(cni_code::kInvalidConfig, where + " must be an object, got " + json::quote(v));
  auto text = PLUMB_TRY(json::get_string(v, "subnet", where));
  if (!text) return fail(cni_code::kInvalidConfig, where + ".subnet is missing");
  auto p = IpPrefix::parse(*text);
  if (!p) return std::unexpected(p.error().within(where + ".subnet"));
  if (p->network() != *p) {
    return fail(cni_code::kInvalidConfig, where + ".subnet \"" + *text + "\" has host bits set (the network is " +
                                              p->network().str() + ")");
  }
  if (p->len + 2u > p->max_len()) {
    return fail(cni_code::kInvalidConfig, where + ".subnet \"" + *text + "\" is too small to allocate from");
  }
  Range r;
  r.subnet = *p;
  auto gw = PLUMB_TRY(range_addr(v, "gateway", where, r.subnet));
  auto start = PLUMB_TRY(range_addr(v, "rangeStart", where, r.subnet));
  auto end = PLUMB_TRY(range_addr(v, "rangeEnd", where, r.subnet));
  r.gateway = gw ? *gw : first_host(r.subnet);
  r.start = start ? *start : first_host(r.subnet);
  r.end = end ? *end : default_end(r.subnet);
  if (r.end < r.start) {
    return fail(cni_code::kInvalidConfig,
                where + ".rangeStart " + r.start.str() + " is after " + where + ".rangeEnd " + r.end.str());
  }
  return r;
}

Result<RangeSet> parse_range_set(const json::Value& v, const std::string& where) {
  if (!v.IsArray()) return fail(cni_code::kInvalidConfig, where + " must be an array of ranges, got " + json::quote(v));
  if (v.Empty()) return fail(cni_code::kInvalidConfig, where + " is an empty range set");
  RangeSet set;
  for (rapidjson::SizeType j = 0; j < v.Size(); ++j) {
    std::string at = where + "[" + std::to_string(j) + "]";
    Range r = PLUMB_TRY(parse_range(v[j], at));
    if (!set.empty() && r.subnet.addr.family != set.front().subnet.addr.family) {
      return fail(cni_code::kInvalidConfig, where + " mixes IPv4 and IPv6 ranges (" + set.front().subnet.str() +
                                                " and " + r.subnet.str() + "); use one range set per family");
    }
    for (size_t k = 0; k < set.size(); ++k) {
      if (overlaps(set[k], r)) {
        return fail(cni_code::kInvalidConfig, where + "[" + std::to_string(k) + "] " + set[k].str() + " and " + at +
                                                  " " + r.str() + " overlap");
      }
    }
    set.push_back(r);
  }
  return set;
}

Status check_range_sets_disjoint(const std::vector<RangeSet>& sets, std::string_view where) {
  for (size_t i = 0; i < sets.size(); ++i) {
    for (size_t j = i + 1; j < sets.size(); ++j) {
      for (const Range& a : sets[i]) {
        for (const Range& b : sets[j]) {
          if (overlaps(a, b)) {
            return fail(cni_code::kInvalidConfig, std::string(where) + ": range set " + std::to_string(i) + " (" +
                                                      a.str() + ") overlaps range set " + std::to_string(j) + " (" +
                                                      b.str() + ")");
          }
        }
      }
    }
  }
  return {};
}

Result<HostLocalConfig> parse_host_local_config(const json::Value& ipam) {
  if (!ipam.IsObject()) return fail(cni_code::kInvalidConfig, "ipam must be an object, got " + json::quote(ipam));
  HostLocalConfig c;
  if (json::find(ipam, "subnet") != nullptr) {
    c.ranges.push_back(RangeSet{PLUMB_TRY(parse_range(ipam, "ipam"))});
  } else {
    for (const char* key : {"rangeStart", "rangeEnd", "gateway"}) {
      if (json::find(ipam, key) != nullptr) {
        return fail(cni_code::kInvalidConfig, std::string("ipam.") + key + " is set without ipam.subnet");
      }
    }
  }
  const json::Value* ranges = PLUMB_TRY(json::get_array(ipam, "ranges", "ipam"));
  if (ranges != nullptr) {
    for (rapidjson::SizeType i = 0; i < ranges->Size(); ++i) {
      c.ranges.push_back(PLUMB_TRY(parse_range_set((*ranges)[i], "ipam.ranges[" + std::to_string(i) + "]")));
    }
  }
  if (c.ranges.empty()) return fail(cni_code::kInvalidConfig, "ipam has no ranges: set ipam.ranges or ipam.subnet");
  PLUMB_TRY(check_range_sets_disjoint(c.ranges, "ipam.ranges"));
  c.routes = PLUMB_TRY(detail::parse_routes(ipam, "ipam"));
  auto dir = PLUMB_TRY(json::get_string(ipam, "dataDir", "ipam"));
  if (dir && !dir->empty()) c.data_dir = *dir;
  auto resolv = PLUMB_TRY(json::get_string(ipam, "resolvConf", "ipam"));
  if (resolv) c.resolv_conf = *resolv;
  return c;
}

RangeIter::RangeIter(const RangeSet& set, const std::optional<IpAddr>& last_reserved) : set_(set) {
  if (!last_reserved) return;
  if (auto idx = range_for(set, *last_reserved)) {
    idx_ = *idx;
    cur_ = *last_reserved;  // the first next() moves past it
  }
}

std::optional<std::pair<IpAddr, size_t>> RangeIter::next() {
  if (set_.empty()) return std::nullopt;
  for (;;) {
    const Range* r = &set_[idx_];
    if (!cur_) {
      cur_ = r->start;
      first_ = cur_;
    } else {
      if (*cur_ == r->end) {
        idx_ = (idx_ + 1) % set_.size();
        r = &set_[idx_];
        cur_ = r->start;
      } else {
        cur_ = cur_->plus(1);
      }
      if (!first_) {
        first_ = cur_;
      } else if (*cur_ == *first_) {
        return std::nullopt;  // one full turn
      }
    }
    if (r->allocatable(*cur_)) return std::pair{*cur_, idx_};
  }
}

Result<cni::Dns> parse_resolv_conf(const std::string& path) {
  auto content = read_file(path, "host-local ipam.resolvConf");
  if (!content) return std::unexpected(Error{cni_code::kIo, content.error().sys_errno, content.error().msg, {}});
  cni::Dns dns;
  for (std::string_view line : text::split(*content, '\n')) {
    std::string_view t = text::trim(line);
    if (t.empty() || t.front() == '#' || t.front() == ';') continue;
    std::istringstream fields{std::string(t)};
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    if (f.size() < 2) continue;
    if (f[0] == "nameserver") {
      dns.nameservers.push_back(f[1]);
    } else if (f[0] == "domain") {
      dns.domain = f[1];
    } else if (f[0] == "search") {
      dns.search.insert(dns.search.end(), f.begin() + 1, f.end());
    } else if (f[0] == "options") {
      dns.options.insert(dns.options.end(), f.begin() + 1, f.end());
    }
  }
  return dns;
}

}  // namespace plumb::ipam
