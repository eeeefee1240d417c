#include "engine/nft/portmap.hpp"

// netinet/in.h before the linux/ headers: glibc then keeps linux/in.h from redefining it.
#include <netinet/in.h>

#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <sys/socket.h>

#include <libnftnl/common.h>
#include <libnftnl/set.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "engine/nft/nfnl.hpp"
#include "engine/nft/nft.hpp"
#include "engine/nft/objects.hpp"
#include "engine/nft/portmap_objects.hpp"
#include "engine/base/text.hpp"

namespace plumb::nft {
namespace {

using nfnl::Batch;
using nfnl::Outcome;
using nfnl::Session;

constexpr int32_t kPrioDstnat = -100;  // NF_IP_PRI_NAT_DST, "priority dstnat"
constexpr int32_t kPrioSrcnat = 100;   // NF_IP_PRI_NAT_SRC, "priority srcnat"
constexpr int kAttempts = 3;

// Set ids of the base transaction (ids are scoped to one transaction).
enum SetId : uint32_t {
  kIdMap4 = 101,
  kIdMap4Host,
  kIdMap6,
  kIdMap6Host,
  kIdOwners,
  kIdHairpin4,
  kIdHairpin6,
  kIdLocalhost4,
  kIdMasqAll4,
  kIdMasqAll6,
};

constexpr const char* kNatChainFeature =
    "the kernel lacks nftables NAT chains for the inet family (nft_chain_nat, Linux >= 5.2)";
constexpr const char* kNatFeature = "the kernel lacks the nftables nat expression (nft_nat)";
constexpr const char* kFibFeature = "the kernel lacks the nftables fib expression (nft_fib_inet)";
constexpr const char* kCtMasqFeature =
    "the kernel lacks the nftables ct or masquerade expression (nft_ct, nft_masq)";

std::string table_ref() { return std::string("inet ") + kTableName; }
std::string set_ref_text(const std::string& name) { return table_ref() + " " + name; }

int family_of(const PortMapping& m) { return m.pod_ip.family; }

uint32_t map_id(int family, bool host) {
  if (family == AF_INET) return host ? kIdMap4Host : kIdMap4;
  return host ? kIdMap6Host : kIdMap6;
}

std::string owner_comment(const PodPortMappings& pm) { return pm.container_id + "/" + pm.ifname; }

std::string target_text(const IpAddr& a, uint16_t port) {
  return (a.is_v4() ? a.str() : "[" + a.str() + "]") + ":" + std::to_string(port);
}

// ---- the table's port-mapping objects ------------------------------------------------------

// One transaction: table, maps and sets (NLM_F_CREATE: kept if present), chain portmap-dnat with
// NLM_F_EXCL as the marker, its rules, the three base chains and their rules. The marker exists
// only if an earlier transaction created all of it, so EEXIST for it alone means "installed".
Status ensure_base(Session& s) {
  // Read first: the marker chain exists once everything does, and a transaction that ends in
  // EEXIST is aborted, which costs an RCU grace period (~13 ms here) on every pod.
  if (PLUMB_TRY(s.has_chain(obj::kFamily, kTableName, pmobj::kChainDnat))) return {};
  auto b = s.batch();
  const std::string t = kTableName;
  auto table = obj::table(t);
  b->add_table(NFT_MSG_NEWTABLE, NLM_F_CREATE, table.get(), "create table " + table_ref());

  std::vector<obj::Set> sets;
  for (int family : {AF_INET, AF_INET6}) {
    for (bool host : {false, true}) sets.push_back(pmobj::dnat_map(t, family, host, map_id(family, host)));
  }
  sets.push_back(pmobj::owner_set(t, kIdOwners));
  sets.push_back(pmobj::addr_set(t, pmobj::hairpin_set_name(AF_INET), AF_INET, true, kIdHairpin4));
  sets.push_back(pmobj::addr_set(t, pmobj::hairpin_set_name(AF_INET6), AF_INET6, true, kIdHairpin6));
  sets.push_back(pmobj::addr_set(t, pmobj::localhost_set_name(), AF_INET, false, kIdLocalhost4));
  sets.push_back(pmobj::addr_set(t, pmobj::masqall_set_name(AF_INET), AF_INET, false, kIdMasqAll4));
  sets.push_back(pmobj::addr_set(t, pmobj::masqall_set_name(AF_INET6), AF_INET6, false, kIdMasqAll6));
  for (auto& set : sets) {
    const char* name = nftnl_set_get_str(set.get(), NFTNL_SET_NAME);
    b->add_set(NFT_MSG_NEWSET, NLM_F_CREATE, set.get(), "create set " + set_ref_text(name));
  }

  auto dnat = obj::chain(t, pmobj::kChainDnat);
  const size_t marker = b->add_chain(NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, dnat.get(),
                                     "create chain " + set_ref_text(pmobj::kChainDnat));
  std::vector<obj::Rule> rules;
  auto add_rule = [&](obj::Rule r, const std::string& chain, const std::string& text, const char* feature) {
    b->add_rule(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, r.get(), "add rule " + set_ref_text(chain) + " " + text,
                feature);
    rules.push_back(std::move(r));
  };
  for (int family : {AF_INET, AF_INET6}) {
    for (bool host : {true, false}) {
      const std::string ipx = family == AF_INET ? "ip" : "ip6";
      add_rule(pmobj::dnat_rule(t, pmobj::kChainDnat, family, host, map_id(family, host)), pmobj::kChainDnat,
               "dnat " + ipx + " to ... map @" + pmobj::dnat_map_name(family, host), kNatFeature);
    }
  }

  std::vector<obj::Chain> chains;
  auto add_base = [&](const char* name, uint32_t hook, int32_t prio, const char* hook_name) {
    chains.push_back(obj::base_chain(t, name, "nat", hook, prio));
    b->add_chain(NFT_MSG_NEWCHAIN, NLM_F_CREATE, chains.back().get(),
                 "create chain " + set_ref_text(name) + " (type nat hook " + hook_name + ")", kNatChainFeature);
  };
  add_base(pmobj::kChainPrerouting, NF_INET_PRE_ROUTING, kPrioDstnat, "prerouting");
  add_rule(pmobj::local_jump_rule(t, pmobj::kChainPrerouting, pmobj::kChainDnat), pmobj::kChainPrerouting,
           std::string("fib daddr type local jump ") + pmobj::kChainDnat, kFibFeature);
  add_base(pmobj::kChainOutput, NF_INET_LOCAL_OUT, kPrioDstnat, "output");
  add_rule(pmobj::local_jump_rule(t, pmobj::kChainOutput, pmobj::kChainDnat), pmobj::kChainOutput,
           std::string("fib daddr type local jump ") + pmobj::kChainDnat, kFibFeature);
  add_base(pmobj::kChainPostrouting, NF_INET_POST_ROUTING, kPrioSrcnat, "postrouting");
  const std::string post = pmobj::kChainPostrouting;
  add_rule(pmobj::masq_hairpin_rule(t, post, AF_INET, kIdHairpin4), post,
           "ct status dnat ip saddr . ip daddr @" + pmobj::hairpin_set_name(AF_INET) + " masquerade", kCtMasqFeature);
  add_rule(pmobj::masq_hairpin_rule(t, post, AF_INET6, kIdHairpin6), post,
           "ct status dnat ip6 saddr . ip6 daddr @" + pmobj::hairpin_set_name(AF_INET6) + " masquerade",
           kCtMasqFeature);
  add_rule(pmobj::masq_localhost_rule(t, post, kIdLocalhost4), post,
           "ct status dnat ip saddr 127.0.0.0/8 ip daddr @" + pmobj::localhost_set_name() + " masquerade",
           kCtMasqFeature);
  add_rule(pmobj::masq_all_rule(t, post, AF_INET, kIdMasqAll4), post,
           "ct status dnat ip daddr @" + pmobj::masqall_set_name(AF_INET) + " masquerade", kCtMasqFeature);
  add_rule(pmobj::masq_all_rule(t, post, AF_INET6, kIdMasqAll6), post,
           "ct status dnat ip6 daddr @" + pmobj::masqall_set_name(AF_INET6) + " masquerade", kCtMasqFeature);

  PLUMB_TRY(b->finish());
  Outcome out = PLUMB_TRY(s.send(*b));
  if (out.ok()) return {};
  bool installed = out.batch_err == 0;
  for (size_t i = 0; i < out.acks.size() && installed; ++i) {
    installed = out.acks[i].seen && out.acks[i].err == (i == marker ? EEXIST : 0);
  }
  if (installed) return {};
  return std::unexpected(nfnl::to_error(*b, out));
}

// A condition class: its two DNAT maps (the first created with NLM_F_EXCL, the marker) and its
// rule `<conditions> meta nfproto ipvX dnat ... map @portmapX-<class>[-hostip]` for each, appended
// to portmap-dnat after the unconditioned rules.
Status ensure_class(Session& s, const Conditions& c) {
  const std::string cls = c.class_name();
  if (cls.empty()) return {};
  if (PLUMB_TRY(s.has_set(obj::kFamily, kTableName, pmobj::dnat_map_name(c.family, true, cls)))) return {};  // the marker
  auto b = s.batch();
  std::vector<obj::Set> maps;
  std::vector<obj::Rule> rules;
  size_t marker = 0;
  uint32_t id = 301;
  for (bool host : {true, false}) {
    maps.push_back(pmobj::dnat_map(kTableName, c.family, host, id, cls));
    const std::string name = pmobj::dnat_map_name(c.family, host, cls);
    const size_t i = b->add_set(NFT_MSG_NEWSET, NLM_F_CREATE | (host ? NLM_F_EXCL : 0), maps.back().get(), "create map " + set_ref_text(name));
    if (host) marker = i;
    rules.push_back(pmobj::dnat_rule(kTableName, pmobj::kChainDnat, c.family, host, id, &c));
    b->add_rule(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, rules.back().get(),
                "add rule " + set_ref_text(pmobj::kChainDnat) + " " + c.text + " dnat ... map @" + name, kNatFeature);
    ++id;
  }
  PLUMB_TRY(b->finish());
  Outcome out = PLUMB_TRY(s.send(*b));
  if (out.ok()) return {};
  bool installed = out.batch_err == 0;
  for (size_t i = 0; i < out.acks.size() && installed; ++i) installed = out.acks[i].seen && out.acks[i].err == (i == marker ? EEXIST : 0);
  if (installed) return {};
  return std::unexpected(nfnl::to_error(*b, out));
}

// ---- element lookups ----------------------------------------------------------------------

using nfnl::Element;

Result<std::optional<Element>> get_element(Session& s, const std::string& set, const std::vector<uint8_t>& key) {
  return s.get_element(kTableName, set, key);
}

std::string map_of(const PortMapping& m) { return pmobj::dnat_map_name(family_of(m), m.host_ip.has_value(), m.condition_class); }

Result<std::optional<PortMapTarget>> lookup(Session& s, int family, uint8_t l4proto, const std::optional<IpAddr>& host_ip,
                                            uint16_t host_port,
                                            const std::string& cls) {
  auto el = PLUMB_TRY(get_element(s, pmobj::dnat_map_name(family, host_ip.has_value(), cls), pmobj::dnat_key(l4proto, host_ip, host_port)));
  if (!el) return std::optional<PortMapTarget>{};
  PortMapTarget t;
  const size_t alen = family == AF_INET ? 4 : 16;
  if (el->data.size() == alen + 4) {
    t.pod_ip.family = family;
    std::copy_n(el->data.begin(), alen, t.pod_ip.bytes.begin());
    t.container_port = static_cast<uint16_t>((el->data[alen] << 8) | el->data[alen + 1]);
  }
  t.owner = el->comment;
  return std::optional<PortMapTarget>(std::move(t));
}

std::string owner_text(const std::string& comment) {
  if (comment.empty()) return "an unknown owner (the element has no comment)";
  auto slash = comment.rfind('/');
  if (slash == std::string::npos) return "container " + comment;
  return "container " + comment.substr(0, slash) + " (interface " + comment.substr(slash + 1) + ")";
}

// ---- validation and batches ----------------------------------------------------------------

Status validate(const PodPortMappings& pm) {
  if (pm.container_id.empty()) return fail(cni_code::kInvalidConfig, "port mappings: empty container ID");
  std::set<std::tuple<int, uint8_t, std::optional<IpAddr>, uint16_t>> seen;
  for (const PortMapping& m : pm.mappings) {
    const int fam = family_of(m);
    if (fam != AF_INET && fam != AF_INET6) {
      return fail(cni_code::kInvalidConfig, "port mapping " + describe(m) + ": pod address is not IPv4/IPv6");
    }
    if (m.l4proto != IPPROTO_TCP && m.l4proto != IPPROTO_UDP && m.l4proto != IPPROTO_SCTP) {
      return fail(cni_code::kInvalidConfig, "port mapping " + describe(m) + ": protocol must be tcp, udp or sctp");
    }
    if (m.host_port == 0 || m.container_port == 0) {
      return fail(cni_code::kInvalidConfig, "port mapping " + describe(m) + ": ports must be 1..65535");
    }
    if (m.host_ip && m.host_ip->family != fam) {
      return fail(cni_code::kInvalidConfig,
                  "port mapping " + describe(m) + ": host address and pod address " + m.pod_ip.str() + " differ in family");
    }
    if (!seen.insert({fam, m.l4proto, m.host_ip, m.host_port}).second) {
      return fail(cni_code::kInvalidConfig, "port mappings of container " + pm.container_id + " name " + describe(m) +
                                                " twice");
    }
  }
  for (const auto* list : {&pm.snat_pods, &pm.masq_all_pods}) {
    for (const IpAddr& a : *list) {
      if (a.family != AF_INET && a.family != AF_INET6) {
        return fail(cni_code::kInvalidConfig, "port mappings: a masquerade pod address is not IPv4/IPv6");
      }
    }
  }
  return {};
}

// Elements of `pm` grouped per set, in a stable order.
struct Groups {
  std::vector<std::vector<uint8_t>> owner_keys;                 // one per mapping
  std::map<std::string, std::vector<size_t>> dnat;              // map name -> mapping indices
  std::map<std::string, std::vector<std::vector<uint8_t>>> addr;  // address set -> keys
};

Groups group(const PodPortMappings& pm) {
  Groups g;
  const std::string tag = owner_tag(pm.container_id, pm.ifname);
  for (size_t i = 0; i < pm.mappings.size(); ++i) {
    const PortMapping& m = pm.mappings[i];
    g.owner_keys.push_back(pmobj::owner_key(family_of(m), m.l4proto, m.host_ip, m.host_port, tag));
    g.dnat[map_of(m)].push_back(i);
  }
  std::set<IpAddr> done;
  for (const IpAddr& a : pm.snat_pods) {
    if (!done.insert(a).second) continue;
    g.addr[pmobj::hairpin_set_name(a.family)].push_back(pmobj::addr_key(a, true));
    if (a.is_v4()) g.addr[pmobj::localhost_set_name()].push_back(pmobj::addr_key(a, false));
  }
  done.clear();
  for (const IpAddr& a : pm.masq_all_pods) {
    if (done.insert(a).second) g.addr[pmobj::masqall_set_name(a.family)].push_back(pmobj::addr_key(a, false));
  }
  return g;
}

struct AddBatch {
  std::unique_ptr<Batch> batch;
  std::vector<size_t> exclusive;  // messages whose EEXIST/EBUSY means "host port taken"
};

Result<AddBatch> add_batch(Session& s, const PodPortMappings& pm, const Groups& g) {
  AddBatch ab;
  ab.batch = s.batch();
  Batch& b = *ab.batch;
  const std::string who = "container " + pm.container_id + " (" + pm.ifname + ")";
  if (!g.owner_keys.empty()) {
    auto owners = pmobj::set_ref(kTableName, pmobj::kOwners);
    for (auto& k : g.owner_keys) pmobj::add_element(owners.get(), k);
    ab.exclusive.push_back(b.add_elems(NFT_MSG_NEWSETELEM, NLM_F_CREATE | NLM_F_EXCL, owners.get(),
                                       "add " + std::to_string(g.owner_keys.size()) + " host port owners of " + who +
                                           " to set " + set_ref_text(pmobj::kOwners)));
  }
  const std::string comment = owner_comment(pm);
  for (auto& [name, idx] : g.dnat) {
    auto map = pmobj::set_ref(kTableName, name);
    std::string list;
    for (size_t i : idx) {
      const PortMapping& m = pm.mappings[i];
      pmobj::add_element(map.get(), pmobj::dnat_key(m.l4proto, m.host_ip, m.host_port),
                         pmobj::dnat_data(m.pod_ip, m.container_port), comment);
      if (!list.empty()) list += ", ";
      list += l4proto_name(m.l4proto) + "/" + std::to_string(m.host_port) + " -> " + target_text(m.pod_ip, m.container_port);
    }
    ab.exclusive.push_back(b.add_elems(NFT_MSG_NEWSETELEM, NLM_F_CREATE | NLM_F_EXCL, map.get(),
                                       "add " + list + " of " + who + " to map " + set_ref_text(name)));
  }
  for (auto& [name, keys] : g.addr) {
    auto set = pmobj::set_ref(kTableName, name);
    for (auto& k : keys) pmobj::add_element(set.get(), k);
    b.add_elems(NFT_MSG_NEWSETELEM, NLM_F_CREATE, set.get(), "add pod addresses of " + who + " to set " + set_ref_text(name));
  }
  PLUMB_TRY(b.finish());
  return ab;
}

// The first mapping of pm whose host port is taken, as a kConflict error; nullopt if none is.
Result<std::optional<Error>> find_conflict(Session& s, const PodPortMappings& pm) {
  for (const PortMapping& m : pm.mappings) {
    auto t = PLUMB_TRY(lookup(s, family_of(m), m.l4proto, m.host_ip, m.host_port, m.condition_class));
    if (!t) continue;
    return std::optional<Error>(Error{
        cni_code::kConflict, EEXIST,
        describe(m) + " is already mapped to " + target_text(t->pod_ip, t->container_port) + " by " + owner_text(t->owner),
        "requested by container " + pm.container_id + " (" + pm.ifname + ") for " + target_text(m.pod_ip, m.container_port)});
  }
  return std::optional<Error>{};
}

using nfnl::only_errno;


}  // namespace

std::string owner_tag(const std::string& container_id, const std::string& ifname) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(text::fnv1a64(container_id + "/" + ifname)));
  return std::string(buf, 15);
}

std::string l4proto_name(uint8_t p) {
  switch (p) {
    case IPPROTO_TCP: return "tcp";
    case IPPROTO_UDP: return "udp";
    case IPPROTO_SCTP: return "sctp";
    default: return "protocol " + std::to_string(p);
  }
}

std::string describe(const PortMapping& m) {
  std::string where;
  if (m.host_ip) {
    where = m.host_ip->str();
  } else {
    where = m.pod_ip.family == AF_INET6 ? "every IPv6 address" : "every IPv4 address";
  }
  return l4proto_name(m.l4proto) + " host port " + std::to_string(m.host_port) + " on " + where;
}

Status add_port_mappings(const PodPortMappings& pm) {
  PLUMB_TRY(validate(pm));
  const std::string context = "port mappings of container " + pm.container_id + " (" + pm.ifname + ")";
  if (pm.mappings.empty() && pm.snat_pods.empty() && pm.masq_all_pods.empty()) return {};
  const Groups g = group(pm);
  auto session = Session::open();
  if (!session) return std::unexpected(session.error().within(context));
  // The elements are sent first, without reading the markers: the sets exist only once the
  // transaction that created them with the chains and rules committed, so a warm node pays one
  // transaction per pod and no look-up; a failure other than a taken host port installs the
  // objects (ensure_base/ensure_class) and sends the elements again.
  bool install = false;
  for (int attempt = 1;; ++attempt) {
    if (install) {
      if (auto st = ensure_base(*session); !st) return std::unexpected(st.error().within(context));
      for (const Conditions& c : pm.conditions) {
        if (auto st = ensure_class(*session, c); !st) return std::unexpected(st.error().within(context));
      }
    }
    auto ab = add_batch(*session, pm, g);
    if (!ab) return std::unexpected(ab.error().within(context));
    auto out = session->send(*ab->batch);
    if (!out) return std::unexpected(out.error().within(context));
    if (out->ok()) return {};
    bool taken = false;
    for (size_t i : ab->exclusive) {
      const int err = out->acks[i].err;
      taken |= out->acks[i].seen && (err == EEXIST || err == EBUSY);
    }
    if (taken) {
      auto conflict = find_conflict(*session, pm);
      if (!conflict) return std::unexpected(conflict.error().within(context));
      if (*conflict) return std::unexpected(**conflict);
      // The element vanished between our transaction and the look-up: try again. A last
      // failure means portmap-owners holds an entry without a mapping (edited by hand).
      if (attempt < kAttempts) continue;
      auto e = nfnl::to_error(*ab->batch, *out);
      e.msg += " (set " + set_ref_text(pmobj::kOwners) + " holds a host port of this request without a mapping)";
      return std::unexpected(e.within(context));
    }
    // Any other failure of the first transaction (ENOENT: the table or a set is not there yet)
    // is answered by installing the objects, whose own errors name what the kernel lacks.
    if (!install && attempt < kAttempts) {
      install = true;
      continue;
    }
    // ENOENT only: the table or a set was removed meanwhile; recreate and retry.
    if (attempt < kAttempts && only_errno(*out, ENOENT)) continue;
    return std::unexpected(nfnl::to_error(*ab->batch, *out).within(context));
  }
}

Result<PortMapRemoval> remove_port_mappings(const PodPortMappings& pm) {
  PLUMB_TRY(validate(pm));
  const std::string context = "remove port mappings of container " + pm.container_id + " (" + pm.ifname + ")";
  PortMapRemoval res;
  const Groups g = group(pm);
  auto session = Session::open();
  if (!session) return std::unexpected(session.error().within(context));
  Session& s = *session;

  // Each mapping: its owner element and its DNAT element in one transaction. ENOENT for the owner
  // element (not ours, already gone, no table) aborts it: the DNAT element stays untouched.
  for (size_t i = 0; i < pm.mappings.size(); ++i) {
    const PortMapping& m = pm.mappings[i];
    const std::string name = map_of(m);
    auto owner = pmobj::set_ref(kTableName, pmobj::kOwners);
    pmobj::add_element(owner.get(), g.owner_keys[i]);
    auto map = pmobj::set_ref(kTableName, name);
    pmobj::add_element(map.get(), pmobj::dnat_key(m.l4proto, m.host_ip, m.host_port));
    for (bool with_map : {true, false}) {
      auto b = s.batch();
      b->add_elems(NFT_MSG_DELSETELEM, 0, owner.get(),
                   "delete owner of " + describe(m) + " from set " + set_ref_text(pmobj::kOwners));
      if (with_map) b->add_elems(NFT_MSG_DELSETELEM, 0, map.get(), "delete " + describe(m) + " from map " + set_ref_text(name));
      PLUMB_TRY(b->finish());
      auto out = s.send(*b);
      if (!out) return std::unexpected(out.error().within(context));
      if (out->ok()) {
        res.removed.push_back(m);
        break;
      }
      if (!only_errno(*out, ENOENT)) return std::unexpected(nfnl::to_error(*b, *out).within(context));
      const bool owner_absent = out->acks[0].seen && out->acks[0].err == ENOENT;
      if (owner_absent) {
        res.not_owned.push_back(m);
        break;
      }
      // Ours, but its DNAT element is gone already: drop the owner element alone (next round).
    }
  }

  // Pod addresses in the masquerade sets: one transaction, or one per element when some are
  // already gone.
  std::vector<std::pair<std::string, const std::vector<uint8_t>*>> keys;
  for (auto& [name, list] : g.addr) {
    for (auto& k : list) keys.push_back({name, &k});
  }
  if (keys.empty()) return res;
  auto del_batch = [&](size_t from, size_t to) -> Result<std::unique_ptr<Batch>> {
    auto b = s.batch();
    std::vector<obj::Set> refs;
    for (size_t i = from; i < to; ++i) {
      refs.push_back(pmobj::set_ref(kTableName, keys[i].first));
      pmobj::add_element(refs.back().get(), *keys[i].second);
      b->add_elems(NFT_MSG_DELSETELEM, 0, refs.back().get(), "delete a pod address from set " + set_ref_text(keys[i].first));
    }
    PLUMB_TRY(b->finish());
    return b;
  };
  auto all = del_batch(0, keys.size());
  if (!all) return std::unexpected(all.error().within(context));
  auto out = s.send(**all);
  if (!out) return std::unexpected(out.error().within(context));
  if (out->ok()) return res;
  if (!only_errno(*out, ENOENT)) return std::unexpected(nfnl::to_error(**all, *out).within(context));
  for (size_t i = 0; i < keys.size(); ++i) {
    auto one = del_batch(i, i + 1);
    if (!one) return std::unexpected(one.error().within(context));
    auto o = s.send(**one);
    if (!o) return std::unexpected(o.error().within(context));
    if (!o->ok() && !only_errno(*o, ENOENT)) return std::unexpected(nfnl::to_error(**one, *o).within(context));
  }
  return res;
}

Result<std::optional<PortMapTarget>> find_port_mapping(int family, uint8_t l4proto, const std::optional<IpAddr>& host_ip,
                                                       uint16_t host_port, const std::string& condition_class) {
  if (family != AF_INET && family != AF_INET6) return fail(cni_code::kInvalidConfig, "port mapping look-up: bad family");
  if (host_ip && host_ip->family != family) {
    return fail(cni_code::kInvalidConfig, "port mapping look-up: host address " + host_ip->str() + " is not of the family");
  }
  Session s = PLUMB_TRY(Session::open());
  return lookup(s, family, l4proto, host_ip, host_port, condition_class);
}

Status check_port_mappings(const PodPortMappings& pm) {
  PLUMB_TRY(validate(pm));
  Session s = PLUMB_TRY(Session::open());
  const std::string me = owner_comment(pm);
  const std::string tag = owner_tag(pm.container_id, pm.ifname);
  for (const PortMapping& m : pm.mappings) {
    auto t = PLUMB_TRY(lookup(s, family_of(m), m.l4proto, m.host_ip, m.host_port, m.condition_class));
    if (!t) return fail(cni_code::kKernel, "CHECK: " + describe(m) + " is not mapped (no element in " +
                                               set_ref_text(map_of(m)) + ")");
    if (t->pod_ip != m.pod_ip || t->container_port != m.container_port) {
      return fail(cni_code::kKernel, "CHECK: " + describe(m) + " is mapped to " + target_text(t->pod_ip, t->container_port) +
                                         ", expected " + target_text(m.pod_ip, m.container_port));
    }
    if (t->owner != me.substr(0, 127)) {
      return fail(cni_code::kKernel, "CHECK: " + describe(m) + " belongs to " + owner_text(t->owner));
    }
    auto own = PLUMB_TRY(get_element(s, pmobj::kOwners, pmobj::owner_key(family_of(m), m.l4proto, m.host_ip, m.host_port, tag)));
    if (!own) return fail(cni_code::kKernel, "CHECK: " + describe(m) + " has no owner element in " + set_ref_text(pmobj::kOwners));
  }
  return {};
}

}  // namespace plumb::nft
