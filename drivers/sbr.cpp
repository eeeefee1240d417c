// The reference "sbr" (source-based routing) chained plugin, natively, in the pod namespace:
// for each address prevResult gives the attachment's interface, a rule "from <ip>/32 lookup T"
// (128 for IPv6) and a routing table T of its own (the first table from 100 up that no rule
// references and no route uses, the next free one for each further address) holding a default
// route via the address's gateway and copies of the interface's main-table routes that belong to
// the address (its subnet contains their source or gateway, or they have neither); then the
// interface's routes leave the main table, so only traffic from the pod's addresses uses them.
// Keys (as the reference): table (use this table: rules only, no routes moved), gateways (at most
// one IPv4 and one IPv6 address, used instead of prevResult's gateways), addSourceHints (keep the
// subnet routes in the main table with the address as source hint, remove only the others).
// Undo ("sbr.restore"): the rules deleted, the tables emptied, the main-table routes put back.
#include <sys/socket.h>

#include <algorithm>
#include <set>

#include "drivers/registry.hpp"
#include "drivers/steps.hpp"
#include "drivers/undo.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/route.hpp"
#include "engine/kernel/rule.hpp"

namespace plumb::drivers {
namespace {

constexpr uint32_t kFirstTable = 100;

/// The sbr plugin's configuration, validated.
struct SbrConfig : Config {
  std::optional<uint32_t> table;
  std::optional<IpAddr> gw4, gw6;
  bool add_source_hints = false;
};

Result<SbrConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  SbrConfig c;
  const std::string& where = in.network;
  if (auto t = PLUMB_TRY(json::get_int(conf, "table", where))) {
    if (*t <= 0 || *t > static_cast<int64_t>(UINT32_MAX)) {
      return fail(cni_code::kInvalidConfig, where + ".table " + std::to_string(*t) + " is not a routing table id (1..4294967295)");
    }
    c.table = static_cast<uint32_t>(*t);
  }
  auto gws = PLUMB_TRY(json::get_string_array(conf, "gateways", where)).value_or(std::vector<std::string>{});
  if (gws.size() > 2) return fail(cni_code::kInvalidConfig, where + ".gateways cannot contain more than 2 entries (one IPv4, one IPv6)");
  for (auto& g : gws) {
    auto a = IpAddr::parse(g);
    if (!a) return fail(cni_code::kInvalidConfig, where + ".gateways: invalid static gateway IP address: " + g);
    auto& slot = a->is_v4() ? c.gw4 : c.gw6;
    if (slot) {
      return fail(cni_code::kInvalidConfig, where + ".gateways contains multiple " + (a->is_v4() ? "IPv4" : "IPv6") + " addresses: " +
                                                slot->str() + " and " + g);
    }
    slot = *a;
  }
  c.add_source_hints = PLUMB_TRY(json::get_bool(conf, "addSourceHints", where)).value_or(false);
  return c;
}

/// prevResult's addresses of interface `ifname` (an address without interface index counts).
std::vector<cni::IpConfig> ip_configs(const cni::CniResult& prev, const std::string& ifname) {
  std::vector<cni::IpConfig> out;
  for (auto& ip : prev.ips) {
    if (ip.interface) {
      const int i = *ip.interface;
      if (i >= 0 && static_cast<size_t>(i) < prev.interfaces.size() && prev.interfaces[i].name != ifname) continue;
    }
    out.push_back(ip);
  }
  return out;
}

IpPrefix host_prefix(const IpAddr& a) { return IpPrefix{a, static_cast<uint8_t>(a.is_v4() ? 32 : 128)}; }

std::string rule_text(const IpPrefix& src, uint32_t table) { return src.str() + " " + std::to_string(table); }

/// A main-table route as sbr.restore records it: its destination as a network (the recorded
/// keys: undo.hpp; its MTU is not among them).
route::Route recorded_route(const route::Route& r) {
  route::Route out = r;
  out.dst = r.dst.network();
  return out;
}

/// What the pod namespace holds before sbr: every rule's table and every route's table.
struct Used {
  std::set<uint32_t> tables;
  std::vector<route::Route> link_routes;  ///< main-table routes of the interface
};

Result<Used> survey(netlink::Socket& pod, int index) {
  Used u;
  for (int family : {AF_INET, AF_INET6}) {
    for (auto& r : PLUMB_TRY(rule::list(pod, family))) u.tables.insert(r.table);
    for (auto& r : PLUMB_TRY(route::list(pod, family, route::kAllTables))) {
      u.tables.insert(r.table);
      if (r.table == RT_TABLE_MAIN && r.oif == index) u.link_routes.push_back(r);
    }
  }
  return u;
}

uint32_t next_free(const std::set<uint32_t>& used, uint32_t from) {
  while (used.count(from) != 0) ++from;
  return from;
}

/// One address's table: its default route and the copies of its routes (its rule: AddSourceRules).
Status route_address(Context& ctx, const SbrConfig& c, const cni::IpConfig& ip, int index, uint32_t table,
                     const std::vector<route::Route>& link_routes) {
  const std::optional<IpAddr>& fixed = ip.address.addr.is_v4() ? c.gw4 : c.gw6;
  std::optional<IpAddr> gw = fixed ? fixed : ip.gateway;
  if (gw) {
    route::Route def;
    def.dst = PLUMB_TRY(IpPrefix::parse(ip.address.addr.is_v4() ? "0.0.0.0/0" : "::/0"));
    def.gw = gw;
    def.oif = index;
    def.table = table;
    auto st = steps::run(ctx, steps::AddOwnLinkRoute{steps::Ns::kPod, def, false});
    if (!st) return std::unexpected(st.error().within(ctx.network + " sbr: add default route to " + gw->str()));
  }
  const IpPrefix subnet = ip.address.network();
  for (auto r : link_routes) {
    bool mine = (r.prefsrc && subnet.contains(*r.prefsrc)) || (r.gw && subnet.contains(*r.gw)) || (!r.prefsrc && !r.gw);
    if (!mine) continue;
    r.table = table;
    auto st = steps::run(ctx, steps::AddOwnLinkRoute{steps::Ns::kPod, r, true});
    if (!st) return std::unexpected(st.error().within(ctx.network + " sbr: copy route to table " + std::to_string(table)));
  }
  return {};
}

/// The main table after the copies: subnet routes with a source hint kept (addSourceHints) or
/// every route of the interface removed.
Status trim_main(Context& ctx, const SbrConfig& c, const std::vector<cni::IpConfig>& ips, int index,
                 const std::vector<route::Route>& link_routes) {
  if (c.add_source_hints) {
    for (auto& ip : ips) {
      route::Route hint;
      hint.dst = ip.address.network();
      hint.oif = index;
      hint.prefsrc = ip.address.addr;
      hint.scope = RT_SCOPE_LINK;
      (void)steps::run(
          ctx, steps::AddOwnLinkRoute{steps::Ns::kPod, hint, true});  // as the reference: a warning, not a failure
    }
  }
  for (auto& r : link_routes) {
    if (c.add_source_hints && r.scope == RT_SCOPE_LINK) continue;
    auto gone = steps::run(ctx, steps::RemoveOwnLinkRoute{steps::Ns::kPod, r});
    if (!gone) return std::unexpected(gone.error().within(ctx.network + " sbr: remove route from the main table"));
  }
  return {};
}

Result<cni::CniResult> sbr_add(Context& ctx, const SbrConfig& c, const cni::CniResult* prev) {
  if (prev == nullptr) return fail(cni_code::kInvalidConfig, ctx.network + ": sbr must be called as a chained plugin (no prevResult)");
  if (prev->ips.empty()) return fail(cni_code::kInvalidConfig, ctx.network + " sbr: no IP addresses supplied on interface " + ctx.ifname);
  std::vector<cni::IpConfig> ips = ip_configs(*prev, ctx.ifname);
  auto l = PLUMB_TRY(link::get(*ctx.pod, ctx.ifname));
  if (!l) return fail(cni_code::kKernel, ctx.network + " sbr: cannot find network interface " + ctx.ifname + " in " + ctx.netns_path);
  std::vector<route::Route> link_routes;  // the interface's main-table routes (not with a fixed table)

  steps::AddSourceRules rules;
  if (c.table) {
    for (auto& ip : ips) rules.rules.push_back(rule::Rule{host_prefix(ip.address.addr), *c.table});
  } else {
    Used used = PLUMB_TRY(survey(*ctx.pod, l->index));
    for (uint32_t t = next_free(used.tables, kFirstTable); rules.restore.tables.size() < ips.size();
         t = next_free(used.tables, t + 1)) {
      rules.restore.tables.push_back(t);
    }
    for (size_t i = 0; i < ips.size(); ++i)
      rules.rules.push_back(rule::Rule{host_prefix(ips[i].address.addr), rules.restore.tables[i]});
    for (auto& r : used.link_routes) {
      if (!(c.add_source_hints && r.scope == RT_SCOPE_LINK)) rules.restore.main_routes.push_back(recorded_route(r));
    }
    link_routes = std::move(used.link_routes);
  }
  for (auto& r : rules.rules) rules.restore.rules.push_back(rule_text(r.src, r.table));
  auto st = steps::run(ctx, rules);
  if (!st) return std::unexpected(st.error().within(ctx.network + " sbr"));
  if (c.table) return *prev;
  for (size_t i = 0; i < ips.size(); ++i)
    PLUMB_TRY(route_address(ctx, c, ips[i], l->index, rules.restore.tables[i], link_routes));
  PLUMB_TRY(trim_main(ctx, c, ips, l->index, link_routes));
  return *prev;
}

/// CHECK: every address still has its rule (the reference checks nothing).
Status sbr_check(Context& ctx, const SbrConfig& c, const cni::CniResult& prev) {
  for (auto& ip : ip_configs(prev, ctx.ifname)) {
    auto rules = PLUMB_TRY(rule::list(*ctx.pod, ip.address.addr.family));
    bool found = std::any_of(rules.begin(), rules.end(), [&](const rule::Rule& r) {
      return r.src == host_prefix(ip.address.addr) && (!c.table || r.table == *c.table);
    });
    if (!found) return fail(cni_code::kKernel, "CHECK: sbr rule from " + ip.address.addr.str() + " is missing in " + ctx.netns_path);
  }
  return {};
}

}  // namespace

const Driver kSbr = make_driver<SbrConfig, parse_config, sbr_add, sbr_check>("sbr");

namespace undo {
namespace {

/// Adds a route, an identical one already there being success (the reference's RouteReplace).
Status ensure_route(netlink::Socket& pod, const route::Route& r) {
  auto st = route::add(pod, r);
  if (!st && st.error().sys_errno != EEXIST) return st;
  return {};
}

}  // namespace

Status run_op(Context& ctx, const SbrRestore& op) {
  if (ctx.pod == nullptr) return {};  // the namespace, its rules and tables are gone
  std::optional<Error> first;
  auto note = [&](const Status& st) {
    if (!st && !first) first = st.error().within("undo sbr.restore");
  };
  for (auto& text : op.rules) {
    auto space = text.find(' ');
    auto src = IpPrefix::parse(text.substr(0, space));
    if (!src || space == std::string::npos) return fail(cni_code::kDecode, "undo sbr.restore: bad rule \"" + text + "\"");
    auto removed = rule::remove(*ctx.pod, rule::Rule{*src, static_cast<uint32_t>(std::stoul(text.substr(space + 1)))});
    if (!removed) note(std::unexpected(removed.error()));
  }
  for (uint32_t table : op.tables) {
    for (int family : {AF_INET, AF_INET6}) {
      auto routes = route::list(*ctx.pod, family, table);
      if (!routes) {
        note(std::unexpected(routes.error()));
        continue;
      }
      for (auto& r : *routes) {
        auto gone = route::remove(*ctx.pod, r);
        if (!gone) note(std::unexpected(gone.error()));
      }
    }
  }
  for (const auto& r : op.main_routes) {
    auto l = link::get(*ctx.pod, r.oif);
    if (!l || !*l) continue;  // the interface is gone, and its routes with it
    auto st = ensure_route(*ctx.pod, r);
    if (!st && st.error().sys_errno != ENETUNREACH) note(st);
  }
  if (first) return std::unexpected(*first);
  return {};
}

}  // namespace undo

}  // namespace plumb::drivers
