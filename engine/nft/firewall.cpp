#include "engine/nft/firewall.hpp"

#include <netinet/in.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <sys/socket.h>

#include <libnftnl/set.h>
#include <libnftnl/udata.h>

#include <algorithm>
#include <array>
#include <new>

#include "engine/nft/expr.hpp"
#include "engine/nft/nfnl.hpp"
#include "engine/nft/nft.hpp"
#include "engine/nft/portmap.hpp"
#include "engine/nft/portmap_objects.hpp"

namespace plumb::nft {
namespace {

using nfnl::Outcome;
using nfnl::Session;

constexpr const char* kForward = "firewall-forward";
constexpr const char* kIsolation = "firewall-isolation";
constexpr const char* kAdmin = "firewall-admin";
constexpr const char* kAddr4 = "firewall4";
constexpr const char* kAddr6 = "firewall6";
constexpr const char* kOwners = "firewall-owners";
constexpr const char* kBridges = "firewall-bridges";
constexpr const char* kBridgePairs = "firewall-bridge-pairs";
constexpr const char* kIsolatedPairs = "firewall-isolated-pairs";
constexpr const char* kBridgeOwners = "firewall-bridge-owners";
constexpr const char* kIsolatedOwners = "firewall-isolated-owners";
constexpr int32_t kPrioFilter = 0;  // "priority filter"
constexpr int kAttempts = 3;

constexpr const char* kFilterFeature = "the kernel lacks nftables filter chains or the ct/lookup expressions (nft_ct)";

// Set ids of the base transaction.
enum SetId : uint32_t {
  kId4 = 201,
  kId6,
  kIdOwners,
  kIdBridges,
  kIdBridgePairs,
  kIdIsolatedPairs,
  kIdBridgeOwners,
  kIdIsolatedOwners
};

std::string ref(const std::string& name) { return std::string("inet ") + kTableName + " " + name; }
const char* addr_set(const IpAddr& a) { return a.is_v4() ? kAddr4 : kAddr6; }
std::string owner_comment(const FirewallPod& p) { return p.container_id + "/" + p.ifname; }

obj::Set make_set(const std::string& name, uint32_t type, uint32_t len, uint32_t id) {
  obj::Set s = expr::set(kTableName, name);
  nftnl_set_set_u32(s.get(), NFTNL_SET_FLAGS, 0);
  nftnl_set_set_u32(s.get(), NFTNL_SET_KEY_TYPE, type);
  nftnl_set_set_u32(s.get(), NFTNL_SET_KEY_LEN, len);
  nftnl_set_set_u32(s.get(), NFTNL_SET_ID, id);
  if (type == expr::kTypeIfname) {
    // nft(8) reads a plain (not concatenated) key as big endian unless the set's user data says
    // otherwise; interface names are host-endian strings (its datatype), as nft records it.
    constexpr uint32_t kByteorderHost = 1;  // nftables' BYTEORDER_HOST_ENDIAN
    nftnl_udata_buf* ub = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
    if (ub == nullptr) throw std::bad_alloc();
    nftnl_udata_put_u32(ub, NFTNL_UDATA_SET_KEYBYTEORDER, kByteorderHost);
    nftnl_set_set_data(s.get(), NFTNL_SET_USERDATA, nftnl_udata_buf_data(ub), nftnl_udata_buf_len(ub));
    nftnl_udata_buf_free(ub);
  }
  return s;
}

std::vector<obj::Set> base_sets() {
  using namespace expr;
  std::vector<obj::Set> v;
  v.push_back(make_set(kAddr4, kTypeIpv4Addr, 4, kId4));
  v.push_back(make_set(kAddr6, kTypeIpv6Addr, 16, kId6));
  v.push_back(make_set(kOwners, concat({kTypeIpv6Addr, kTypeIfname}), 16 + kIfnameLen, kIdOwners));
  v.push_back(make_set(kBridges, kTypeIfname, kIfnameLen, kIdBridges));
  v.push_back(make_set(kBridgePairs, concat({kTypeIfname, kTypeIfname}), 2 * kIfnameLen, kIdBridgePairs));
  v.push_back(make_set(kIsolatedPairs, concat({kTypeIfname, kTypeIfname}), 2 * kIfnameLen, kIdIsolatedPairs));
  for (auto [name, id] : {std::pair{kBridgeOwners, kIdBridgeOwners}, std::pair{kIsolatedOwners, kIdIsolatedOwners}}) {
    v.push_back(make_set(name, concat({kTypeIfname, kTypeIfname}), 2 * kIfnameLen, id));
  }
  return v;
}

/// `meta iifname . meta oifname @set <verdict>`.
obj::Rule pair_rule(const char* set, uint32_t id, int verdict) {
  obj::Rule r = expr::rule(kTableName, kIsolation);
  expr::meta(r.get(), NFT_META_IIFNAME, NFT_REG_1);
  expr::meta(r.get(), NFT_META_OIFNAME, NFT_REG32_04);
  expr::lookup(r.get(), set, id, std::nullopt);
  expr::verdict(r.get(), verdict);
  return r;
}

/// `meta iifname @firewall-bridges meta oifname @firewall-bridges drop`.
obj::Rule cross_bridge_rule() {
  obj::Rule r = expr::rule(kTableName, kIsolation);
  expr::meta(r.get(), NFT_META_IIFNAME, NFT_REG_1);
  expr::lookup(r.get(), kBridges, kIdBridges, std::nullopt);
  expr::meta(r.get(), NFT_META_OIFNAME, NFT_REG_1);
  expr::lookup(r.get(), kBridges, kIdBridges, std::nullopt);
  expr::verdict(r.get(), NF_DROP);
  return r;
}

/// `ip|ip6 daddr @set ct state established,related accept` (reply) or `ip|ip6 saddr @set accept`.
obj::Rule admit_rule(int family, bool reply) {
  obj::Rule r = expr::rule(kTableName, kForward);
  expr::nfproto_guard(r.get(), family);
  const bool v4 = family == AF_INET;
  const uint32_t offset = reply ? (v4 ? expr::kIpv4Daddr : expr::kIpv6Daddr) : (v4 ? expr::kIpv4Saddr : expr::kIpv6Saddr);
  expr::payload(r.get(), NFT_PAYLOAD_NETWORK_HEADER, offset, expr::addr_len(family), NFT_REG_1);
  expr::lookup(r.get(), v4 ? kAddr4 : kAddr6, v4 ? kId4 : kId6, std::nullopt);
  if (reply) expr::ct_bits(r.get(), NFT_CT_STATE, static_cast<uint32_t>(NF_CT_STATE_BIT(IP_CT_ESTABLISHED) | NF_CT_STATE_BIT(IP_CT_RELATED)));
  expr::verdict(r.get(), NF_ACCEPT);
  return r;
}

obj::Rule jump_rule(const char* chain, const std::string& target) {
  obj::Rule r = expr::rule(kTableName, chain);
  expr::verdict(r.get(), NFT_JUMP, target);
  return r;
}

/// Sends a transaction whose message `marker` was created with NLM_F_EXCL: EEXIST there (and no
/// other error) means an earlier transaction installed everything.
Status send_marked(Session& s, nfnl::Batch& b, size_t marker) {
  PLUMB_TRY(b.finish());
  Outcome out = PLUMB_TRY(s.send(b));
  if (out.ok()) return {};
  bool installed = out.batch_err == 0;
  for (size_t i = 0; i < out.acks.size() && installed; ++i) installed = out.acks[i].seen && out.acks[i].err == (i == marker ? EEXIST : 0);
  if (installed) return {};
  return std::unexpected(nfnl::to_error(b, out));
}

Status ensure_base(Session& s) {
  if (PLUMB_TRY(s.has_chain(obj::kFamily, kTableName, kForward))) return {};  // the marker: installed
  auto b = s.batch();
  auto table = obj::table(kTableName);
  b->add_table(NFT_MSG_NEWTABLE, NLM_F_CREATE, table.get(), "create table inet " + std::string(kTableName));
  auto sets = base_sets();
  for (auto& set : sets) {
    b->add_set(NFT_MSG_NEWSET, NLM_F_CREATE, set.get(), "create set " + ref(nftnl_set_get_str(set.get(), NFTNL_SET_NAME)));
  }
  std::vector<obj::Chain> chains;
  for (const char* name : {kIsolation, kAdmin}) {
    chains.push_back(obj::chain(kTableName, name));
    b->add_chain(NFT_MSG_NEWCHAIN, NLM_F_CREATE, chains.back().get(), "create chain " + ref(name));
  }
  chains.push_back(obj::base_chain(kTableName, kForward, "filter", NF_INET_FORWARD, kPrioFilter));
  const size_t marker = b->add_chain(NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, chains.back().get(),
                                     "create chain " + ref(kForward) + " (type filter hook forward)", kFilterFeature);
  std::vector<obj::Rule> rules;
  rules.push_back(pair_rule(kIsolatedPairs, kIdIsolatedPairs, NF_DROP));
  rules.push_back(pair_rule(kBridgePairs, kIdBridgePairs, NFT_RETURN));
  rules.push_back(cross_bridge_rule());
  rules.push_back(jump_rule(kForward, kIsolation));
  rules.push_back(jump_rule(kForward, kAdmin));
  for (int family : {AF_INET, AF_INET6}) {
    rules.push_back(admit_rule(family, true));
    rules.push_back(admit_rule(family, false));
  }
  for (auto& r : rules) {
    const char* chain = nftnl_rule_get_str(r.get(), NFTNL_RULE_CHAIN);
    b->add_rule(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, r.get(), "add rule to " + ref(chain), kFilterFeature);
  }
  return send_marked(s, *b, marker);
}

/// The admin chain (created empty) and its jump from firewall-admin, once.
Status ensure_admin(Session& s, const std::string& name) {
  if (PLUMB_TRY(s.has_chain(obj::kFamily, kTableName, name))) return {};  // the marker: installed
  auto b = s.batch();
  auto chain = obj::chain(kTableName, name);
  const size_t marker = b->add_chain(NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, chain.get(), "create chain " + ref(name));
  auto jump = jump_rule(kAdmin, name);
  b->add_rule(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, jump.get(), "add rule " + ref(kAdmin) + " jump " + name);
  return send_marked(s, *b, marker);
}

std::vector<uint8_t> owner_key(const IpAddr& a, const std::string& tag) {
  std::array<uint8_t, 16> mapped{};
  if (a.is_v4()) {
    mapped[10] = mapped[11] = 0xff;  // ::ffff:a.b.c.d
    std::copy_n(a.bytes.begin(), 4, mapped.begin() + 12);
  } else {
    mapped = a.bytes;
  }
  std::vector<uint8_t> k(mapped.begin(), mapped.end());
  expr::put_ifname(k, tag);
  return k;
}

std::vector<uint8_t> addr_key(const IpAddr& a) {
  std::vector<uint8_t> k;
  expr::put_addr(k, a);
  return k;
}

Status validate(const FirewallPod& pod) {
  if (pod.container_id.empty()) return fail(cni_code::kInvalidConfig, "firewall: empty container ID");
  if (!valid_admin_chain(pod.admin_chain)) {
    return fail(cni_code::kInvalidConfig, "firewall: iptablesAdminChainName \"" + pod.admin_chain +
                                              "\" is not a chain name plumb can create in table inet plumb "
                                              "(1..200 of [A-Za-z0-9_.-], not firewall-*, portmap-*, masq-* or postrouting)");
  }
  for (auto& a : pod.addresses) {
    if (a.family != AF_INET && a.family != AF_INET6) return fail(cni_code::kInvalidConfig, "firewall: an address is not IPv4/IPv6");
  }
  return {};
}

/// The kConflict error for an address admitted for someone else, or nullopt when it is ours (or
/// gone meanwhile).
Result<std::optional<Error>> conflict(Session& s, const FirewallPod& pod) {
  for (auto& a : pod.addresses) {
    auto el = PLUMB_TRY(s.get_element(kTableName, addr_set(a), addr_key(a)));
    if (el && el->comment != owner_comment(pod).substr(0, 127)) {
      return std::optional<Error>(Error{cni_code::kConflict, EEXIST, "firewall: address " + a.str() + " is already admitted for " +
                                                                        (el->comment.empty() ? std::string("another owner") : el->comment), {}});
    }
  }
  return std::optional<Error>{};
}

/// An ifname key, or the ifname . ifname key of a pair (bridge . bridge, bridge . owner tag).
std::vector<uint8_t> bridge_key(const std::string& first, const std::string& second = "") {
  std::vector<uint8_t> k;
  expr::put_ifname(k, first);
  if (!second.empty()) expr::put_ifname(k, second);
  return k;
}

/// Adds `bridge` to the isolation sets (isolated: also to the isolated pairs) and, when `owner` is
/// not empty, the owner's claims on them, in one transaction (creating the claim sets a table of
/// an older plumb lacks).
Status add_isolation(Session& s, const std::string& bridge, bool isolated, const std::string& owner) {
  auto b = s.batch();
  std::vector<obj::Set> claim_sets;
  if (!owner.empty()) {
    for (auto& set : base_sets()) {
      const std::string name = nftnl_set_get_str(set.get(), NFTNL_SET_NAME);
      if (name != kBridgeOwners && name != kIsolatedOwners) continue;
      claim_sets.push_back(std::move(set));
      b->add_set(NFT_MSG_NEWSET, NLM_F_CREATE, claim_sets.back().get(), "create set " + ref(name));
    }
  }
  std::vector<std::pair<const char*, std::vector<uint8_t>>> elements = {{kBridges, bridge_key(bridge)},
                                                                        {kBridgePairs, bridge_key(bridge, bridge)}};
  if (isolated) elements.emplace_back(kIsolatedPairs, bridge_key(bridge, bridge));
  if (!owner.empty()) elements.emplace_back(kBridgeOwners, bridge_key(bridge, owner));
  if (!owner.empty() && isolated) elements.emplace_back(kIsolatedOwners, bridge_key(bridge, owner));
  std::vector<obj::Set> refs;
  for (auto& [set, key] : elements) {
    refs.push_back(pmobj::set_ref(kTableName, set));
    pmobj::add_element(refs.back().get(), key);
    b->add_elems(NFT_MSG_NEWSETELEM, NLM_F_CREATE, refs.back().get(), "add " + bridge + " to " + ref(set));
  }
  PLUMB_TRY(b->finish());
  Outcome out = PLUMB_TRY(s.send(*b));
  if (out.ok()) return {};
  return std::unexpected(nfnl::to_error(*b, out));
}

/// Deletes element `key` of `set`; a missing element, set or table is success.
Status del_if_present(Session& s, const char* set, const std::vector<uint8_t>& key, const std::string& what) {
  auto b = s.batch();
  auto r = pmobj::set_ref(kTableName, set);
  pmobj::add_element(r.get(), key);
  b->add_elems(NFT_MSG_DELSETELEM, 0, r.get(), what + " from " + ref(set));
  PLUMB_TRY(b->finish());
  Outcome out = PLUMB_TRY(s.send(*b));
  if (out.ok() || nfnl::only_errno(out, ENOENT)) return {};
  return std::unexpected(nfnl::to_error(*b, out));
}

/// What claimed() looks for in a dump: an element whose key starts with `prefix`.
struct Search {
  const std::vector<uint8_t>* prefix;
  bool found = false;
};

/// nftnl_set_elem_foreach's callback for claimed(); `d`: the Search.
int has_prefix(nftnl_set_elem* e, void* d) {
  auto* out = static_cast<Search*>(d);
  uint32_t len = 0;
  const auto* key = static_cast<const uint8_t*>(nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &len));
  out->found |=
      key != nullptr && len >= out->prefix->size() && std::equal(out->prefix->begin(), out->prefix->end(), key);
  return 0;
}

/// Whether claim set `set` holds an element bridge . <any owner> (one NFT_MSG_GETSETELEM dump; a
/// missing set or table: no).
Result<bool> claimed(Session& s, const char* set, const std::string& bridge) {
  const std::string what = "nftables: list set " + ref(set);
  const std::vector<uint8_t> prefix = bridge_key(bridge);
  obj::Set q = pmobj::set_ref(kTableName, set);
  netlink::Message m = nfnl::request(NFT_MSG_GETSETELEM, obj::kFamily, NLM_F_DUMP,
                                     [&](nlmsghdr* nlh) { nftnl_set_elems_nlmsg_build_payload(nlh, q.get()); });
  Search search{&prefix};
  auto st = s.socket().dump(m, what, [&](const nlmsghdr* h) -> Status {
    if (search.found) return {};
    obj::Set parsed(nftnl_set_alloc());  // a GETSETELEM dump answers NFT_MSG_NEWSETELEM messages only
    if (!parsed || nftnl_set_elems_nlmsg_parse(h, parsed.get()) < 0) {
      return fail_errno(EBADMSG, what + ": unreadable reply");
    }
    nftnl_set_elem_foreach(parsed.get(), has_prefix, &search);
    return {};
  });
  if (!st && st.error().sys_errno == ENOENT) return false;
  if (!st) return std::unexpected(st.error());
  return search.found;
}

Status validate_claim(const std::string& bridge, const std::string& owner, const std::string& context) {
  if (bridge.empty() || bridge.size() >= expr::kIfnameLen)
    return fail(cni_code::kInvalidConfig, context + ": invalid bridge name");
  if (owner.empty() || owner.size() >= expr::kIfnameLen)
    return fail(cni_code::kInvalidConfig, context + ": invalid owner tag");
  return {};
}

/// firewall_release_bridge's work: the owner's claims out, then the elements no other claim
/// needs; last, what claims need now put back (an ADD isolating the bridge between the reads and
/// the deletions, its claim and elements added in one transaction, may have lost its elements).
Status release(Session& s, const std::string& bridge, bool isolated, const std::string& owner) {
  PLUMB_TRY(del_if_present(s, kBridgeOwners, bridge_key(bridge, owner), "delete the claim of " + owner));
  if (isolated)
    PLUMB_TRY(del_if_present(s, kIsolatedOwners, bridge_key(bridge, owner), "delete the claim of " + owner));
  const std::vector<uint8_t> one = bridge_key(bridge), pair = bridge_key(bridge, bridge);
  if (!PLUMB_TRY(claimed(s, kIsolatedOwners, bridge)))
    PLUMB_TRY(del_if_present(s, kIsolatedPairs, pair, "delete " + bridge));
  if (!PLUMB_TRY(claimed(s, kBridgeOwners, bridge))) {
    PLUMB_TRY(del_if_present(s, kBridgePairs, pair, "delete " + bridge));
    PLUMB_TRY(del_if_present(s, kBridges, one, "delete " + bridge));
  }
  if (!PLUMB_TRY(claimed(s, kBridgeOwners, bridge))) return {};
  return add_isolation(s, bridge, PLUMB_TRY(claimed(s, kIsolatedOwners, bridge)), "");
}

}  // namespace

bool valid_admin_chain(const std::string& name) {
  if (name.empty() || name.size() > 200 || name == "postrouting") return false;
  for (const char* own : {"firewall-", "portmap-", "masq-"}) {
    if (name.rfind(own, 0) == 0) return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
  });
}

Status firewall_add(const FirewallPod& pod) {
  PLUMB_TRY(validate(pod));
  const std::string context = "firewall: admit container " + pod.container_id + " (" + pod.ifname + ")";
  Session s = PLUMB_TRY(Session::open());
  const std::string tag = owner_tag(pod.container_id, pod.ifname);
  for (int attempt = 1;; ++attempt) {
    if (auto st = ensure_base(s); !st) return std::unexpected(st.error().within(context));
    if (auto st = ensure_admin(s, pod.admin_chain); !st) return std::unexpected(st.error().within(context));
    if (pod.addresses.empty()) return {};
    auto b = s.batch();
    auto owners = pmobj::set_ref(kTableName, kOwners);
    for (auto& a : pod.addresses) pmobj::add_element(owners.get(), owner_key(a, tag));
    b->add_elems(NFT_MSG_NEWSETELEM, NLM_F_CREATE | NLM_F_EXCL, owners.get(), "add owners to " + ref(kOwners));
    std::vector<obj::Set> refs;
    for (const char* name : {kAddr4, kAddr6}) {
      refs.push_back(pmobj::set_ref(kTableName, name));
      bool any = false;
      for (auto& a : pod.addresses) {
        if (addr_set(a) != name) continue;
        pmobj::add_element(refs.back().get(), addr_key(a), {}, owner_comment(pod));
        any = true;
      }
      if (any) b->add_elems(NFT_MSG_NEWSETELEM, NLM_F_CREATE | NLM_F_EXCL, refs.back().get(), "add addresses to " + ref(name));
    }
    PLUMB_TRY(b->finish());
    Outcome out = PLUMB_TRY(s.send(*b));
    if (out.ok()) return {};
    if (nfnl::only_errno(out, EEXIST) || nfnl::only_errno(out, EBUSY)) {
      auto c = PLUMB_TRY(conflict(s, pod));
      if (c) return std::unexpected(c->within(context));
      return {};  // admitted for this attachment already (a repeated ADD)
    }
    if (attempt < kAttempts && nfnl::only_errno(out, ENOENT)) continue;  // the table vanished meanwhile
    return std::unexpected(nfnl::to_error(*b, out).within(context));
  }
}

Status firewall_isolate_bridge(const std::string& bridge, bool isolated, const std::string& owner) {
  const std::string context = "firewall: isolate bridge " + bridge;
  PLUMB_TRY(validate_claim(bridge, owner, context));
  Session s = PLUMB_TRY(Session::open());
  auto st = ensure_base(s);
  if (st) st = add_isolation(s, bridge, isolated, owner);
  if (!st) return std::unexpected(st.error().within(context));
  return {};
}

Status firewall_release_bridge(const std::string& bridge, bool isolated, const std::string& owner) {
  const std::string context = "firewall: release bridge " + bridge;
  PLUMB_TRY(validate_claim(bridge, owner, context));
  Session s = PLUMB_TRY(Session::open());
  if (auto st = release(s, bridge, isolated, owner); !st) return std::unexpected(st.error().within(context));
  return {};
}

Result<size_t> firewall_remove(const FirewallPod& pod) {
  PLUMB_TRY(validate(pod));
  const std::string context = "firewall: remove container " + pod.container_id + " (" + pod.ifname + ")";
  Session s = PLUMB_TRY(Session::open());
  const std::string tag = owner_tag(pod.container_id, pod.ifname);
  size_t removed = 0;
  for (auto& a : pod.addresses) {
    auto owner = pmobj::set_ref(kTableName, kOwners);
    pmobj::add_element(owner.get(), owner_key(a, tag));
    auto addr = pmobj::set_ref(kTableName, addr_set(a));
    pmobj::add_element(addr.get(), addr_key(a));
    for (bool with_addr : {true, false}) {
      auto b = s.batch();
      b->add_elems(NFT_MSG_DELSETELEM, 0, owner.get(), "delete owner of " + a.str() + " from " + ref(kOwners));
      if (with_addr) b->add_elems(NFT_MSG_DELSETELEM, 0, addr.get(), "delete " + a.str() + " from " + ref(addr_set(a)));
      PLUMB_TRY(b->finish());
      Outcome out = PLUMB_TRY(s.send(*b));
      if (out.ok()) {
        removed += with_addr ? 1 : 0;
        break;
      }
      if (!nfnl::only_errno(out, ENOENT)) return std::unexpected(nfnl::to_error(*b, out).within(context));
      if (out.acks[0].seen && out.acks[0].err == ENOENT) break;  // not ours (or gone): left alone
      // Ours, but the address element is gone already: drop the owner element alone.
    }
  }
  return removed;
}

Status firewall_check(const FirewallPod& pod) {
  PLUMB_TRY(validate(pod));
  Session s = PLUMB_TRY(Session::open());
  auto rules = PLUMB_TRY(s.first_rule_comment(kTableName, kForward));
  if (!rules) return fail(cni_code::kKernel, "CHECK: firewall chain " + ref(kForward) + " does not exist");
  for (auto& a : pod.addresses) {
    auto el = PLUMB_TRY(s.get_element(kTableName, addr_set(a), addr_key(a)));
    if (!el) return fail(cni_code::kKernel, "CHECK: firewall: " + a.str() + " is not admitted (no element in " + ref(addr_set(a)) + ")");
    if (el->comment != owner_comment(pod).substr(0, 127)) {
      return fail(cni_code::kKernel, "CHECK: firewall: " + a.str() + " is admitted for " + el->comment);
    }
  }
  return {};
}

}  // namespace plumb::nft
