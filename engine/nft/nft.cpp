#include "engine/nft/nft.hpp"

#include <libnftnl/rule.h>
#include <libnftnl/udata.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "engine/nft/nfnl.hpp"
#include "engine/nft/objects.hpp"
#include "engine/base/text.hpp"

namespace plumb::nft {
namespace {

using nfnl::Batch;
using nfnl::Outcome;
using nfnl::Session;

constexpr const char* kPostrouting = "postrouting";
constexpr const char* kMasq4 = "masq4";
constexpr const char* kMasq6 = "masq6";
constexpr int32_t kPrioSrcnat = 100;  // NF_IP_PRI_NAT_SRC, "priority srcnat"
constexpr uint32_t kSetIdMasq4 = 1;
constexpr uint32_t kSetIdMasq6 = 2;
constexpr int kAttempts = 3;
constexpr size_t kMaxNameBody = 200;
constexpr size_t kHashSuffix = 9;  // "-" + 8 hex digits

constexpr const char* kNatFeature =
    "the kernel lacks nftables NAT chains for the inet family (nft_chain_nat, Linux >= 5.2)";
constexpr const char* kMasqFeature = "the kernel lacks the nftables masquerade expression (nft_masq)";

std::string table_ref() { return std::string("inet ") + kTableName; }

const char* map_for(const IpAddr& a) { return a.is_v4() ? kMasq4 : kMasq6; }

Status check_addr(const IpAddr& a, const std::string& what) {
  if (a.family != AF_INET && a.family != AF_INET6) {
    return fail(cni_code::kInvalidConfig, "masquerade: " + what + " is not an IPv4/IPv6 address");
  }
  return {};
}

// Creates table, maps, the postrouting chain and its two rules in one transaction. The chain is
// created with NLM_F_EXCL: it exists only if an earlier transaction created all of them, so
// EEXIST for it (and nothing else) means "already there". nf_tables serialises transactions
// (commit mutex), so of concurrent callers exactly one creates the rules.
Status ensure_base(Session& s) {
  auto b = s.batch();
  auto table = obj::table(kTableName);
  b->add_table(NFT_MSG_NEWTABLE, NLM_F_CREATE, table.get(), "create table " + table_ref());
  auto m4 = obj::verdict_map(kTableName, kMasq4, AF_INET, kSetIdMasq4);
  b->add_set(NFT_MSG_NEWSET, NLM_F_CREATE, m4.get(), "create map " + table_ref() + " " + kMasq4);
  auto m6 = obj::verdict_map(kTableName, kMasq6, AF_INET6, kSetIdMasq6);
  b->add_set(NFT_MSG_NEWSET, NLM_F_CREATE, m6.get(), "create map " + table_ref() + " " + kMasq6);
  auto chain = obj::base_chain(kTableName, kPostrouting, "nat", NF_INET_POST_ROUTING, kPrioSrcnat);
  const size_t chain_idx =
      b->add_chain(NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, chain.get(),
                   "create chain " + table_ref() + " " + kPostrouting + " (type nat hook postrouting)", kNatFeature);
  auto r4 = obj::saddr_vmap_rule(kTableName, kPostrouting, AF_INET, kMasq4, kSetIdMasq4);
  b->add_rule(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, r4.get(),
              "add rule " + table_ref() + " " + kPostrouting + " ip saddr vmap @" + kMasq4);
  auto r6 = obj::saddr_vmap_rule(kTableName, kPostrouting, AF_INET6, kMasq6, kSetIdMasq6);
  b->add_rule(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, r6.get(),
              "add rule " + table_ref() + " " + kPostrouting + " ip6 saddr vmap @" + kMasq6);
  PLUMB_TRY(b->finish());
  Outcome out = PLUMB_TRY(s.send(*b));
  if (out.ok()) return {};
  bool already = out.batch_err == 0;
  for (size_t i = 0; i < out.acks.size() && already; ++i) {
    const int want = i == chain_idx ? EEXIST : 0;
    already = out.acks[i].seen && out.acks[i].err == want;
  }
  if (already) return {};
  return std::unexpected(nfnl::to_error(*b, out));
}

struct NetworkBatch {
  std::unique_ptr<Batch> batch;
  size_t del_idx = SIZE_MAX;  // DELSETELEM (only when replacing)
  size_t add_idx = 0;         // NEWSETELEM
};

// One transaction: create chain masq-<net> (idempotent), flush it, add its rules, then
// [delete the pod's element,] add `pod_ip : jump masq-<net>`.
Result<NetworkBatch> network_batch(Session& s, const std::string& chain_name, const std::vector<IpPrefix>& subnets,
                                   const IpAddr& pod_ip, bool replace, const std::string& fingerprint) {
  NetworkBatch nb;
  nb.batch = s.batch();
  Batch& b = *nb.batch;
  const std::string chain_ref = table_ref() + " " + chain_name;
  auto chain = obj::chain(kTableName, chain_name);
  b.add_chain(NFT_MSG_NEWCHAIN, NLM_F_CREATE, chain.get(), "create chain " + chain_ref);
  auto all_rules = obj::chain_rules(kTableName, chain_name);
  b.add_rule(NFT_MSG_DELRULE, 0, all_rules.get(), "flush chain " + chain_ref);

  bool first_rule = true;
  auto add_return = [&](const IpPrefix& p) {
    auto r = obj::daddr_return_rule(kTableName, chain_name, p);
    if (first_rule) {
      // The first rule's comment records the subnets the chain encodes, rewritten with the
      // rules, so the next pod of the network can skip the rewrite (add_masquerade's fast path).
      nftnl_udata_buf* ub = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
      if (ub != nullptr) {
        nftnl_udata_put_strz(ub, NFTNL_UDATA_RULE_COMMENT, fingerprint.c_str());
        nftnl_rule_set_data(r.get(), NFTNL_RULE_USERDATA, nftnl_udata_buf_data(ub), nftnl_udata_buf_len(ub));
        nftnl_udata_buf_free(ub);
      }
      first_rule = false;
    }
    b.add_rule(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, r.get(),
               "add rule " + chain_ref + (p.addr.is_v4() ? " ip" : " ip6") + " daddr " + p.network().str() +
                   " return");
  };
  for (const IpPrefix& p : subnets) add_return(p);
  add_return(PLUMB_TRY(IpPrefix::parse("224.0.0.0/4")));
  add_return(PLUMB_TRY(IpPrefix::parse("ff00::/8")));
  auto masq = obj::masquerade_rule(kTableName, chain_name);
  b.add_rule(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, masq.get(), "add rule " + chain_ref + " masquerade",
             kMasqFeature);

  const std::string map_ref = table_ref() + " " + map_for(pod_ip);
  if (replace) {
    auto old = obj::map_element(kTableName, map_for(pod_ip), pod_ip, {});
    nb.del_idx = b.add_elems(NFT_MSG_DELSETELEM, 0, old.get(),
                             "delete element " + pod_ip.str() + " from map " + map_ref);
  }
  auto elem = obj::map_element(kTableName, map_for(pod_ip), pod_ip, chain_name);
  nb.add_idx = b.add_elems(NFT_MSG_NEWSETELEM, NLM_F_CREATE, elem.get(),
                           "add element " + pod_ip.str() + " : jump " + chain_name + " to map " + map_ref);
  PLUMB_TRY(b.finish());
  return nb;
}


}  // namespace

std::string masq_chain_name(const std::string& network) {
  std::string body = network;
  bool changed = false;
  for (char& c : body) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) {
      c = '_';
      changed = true;
    }
  }
  if (changed || body.size() > kMaxNameBody) {
    body.resize(std::min(body.size(), kMaxNameBody - kHashSuffix));
    char suffix[16];
    std::snprintf(suffix, sizeof suffix, "-%08x", text::fnv1a32(network));
    body += suffix;
  }
  return "masq-" + body;
}

Status add_masquerade(const std::string& network, const std::vector<IpPrefix>& subnets, const IpAddr& pod_ip) {
  if (network.empty()) return fail(cni_code::kInvalidConfig, "masquerade: empty network name");
  PLUMB_TRY(check_addr(pod_ip, "pod address"));
  std::vector<IpPrefix> nets;
  for (size_t i = 0; i < subnets.size(); ++i) {
    PLUMB_TRY(check_addr(subnets[i].addr, "subnet #" + std::to_string(i) + " of network \"" + network + "\""));
    if (subnets[i].len > subnets[i].max_len()) {
      return fail(cni_code::kInvalidConfig, "masquerade: subnet #" + std::to_string(i) + " of network \"" + network +
                                                "\" has prefix length " + std::to_string(subnets[i].len));
    }
    IpPrefix n = subnets[i].network();
    if (std::find(nets.begin(), nets.end(), n) == nets.end()) nets.push_back(n);
  }
  const std::string context = "masquerade " + pod_ip.str() + " on network \"" + network + "\"";
  const std::string chain_name = masq_chain_name(network);

  auto session = Session::open();
  if (!session) return std::unexpected(session.error().within(context));
  Session& s = *session;

  // Fast path: the network's chain already encodes these subnets (its first rule's comment says so), so the
  // table, maps and base chain exist too: one transaction adding the element, nothing else.
  // Creating objects or replacing rules costs the kernel an RCU grace period (~13 ms here) at
  // commit or socket close; adding an element does not.
  std::string fingerprint = "plumb-masq-v1";
  for (const IpPrefix& n : nets) {
    fingerprint += ' ';  // not `" " + str()`: GCC 12 -O3 misreports it (-Wrestrict, PR105651)
    fingerprint += n.str();
  }
  if (auto ud = s.first_rule_comment(kTableName, chain_name); ud && *ud && **ud == fingerprint) {
    auto fast = s.batch();
    auto elem = obj::map_element(kTableName, map_for(pod_ip), pod_ip, chain_name);
    fast->add_elems(NFT_MSG_NEWSETELEM, NLM_F_CREATE, elem.get(),
                    "add element " + pod_ip.str() + " : jump " + chain_name + " to map " + table_ref() + " " + map_for(pod_ip));
    PLUMB_TRY(fast->finish());
    auto out = s.send(*fast);
    if (out && out->ok()) return {};
    // Anything else (the address still maps to another network, a race with a table removal):
    // the full path below sorts it out.
  }

  bool replace = false;
  for (int attempt = 1;; ++attempt) {
    if (auto st = ensure_base(s); !st) return std::unexpected(st.error().within(context));
    auto nb = network_batch(s, chain_name, nets, pod_ip, replace, fingerprint);
    if (!nb) return std::unexpected(nb.error().within(context));
    auto out = s.send(*nb->batch);
    if (!out) return std::unexpected(out.error().within(context));
    if (out->ok()) return {};
    if (attempt < kAttempts && out->batch_err == 0) {
      // Retry only for races with other plumb processes or stale state:
      //  - the pod address still maps to another chain (EEXIST/EBUSY on add): replace it;
      //  - it vanished between our look and our delete (ENOENT on delete): plain add;
      //  - the table was removed meanwhile (ENOENT elsewhere): recreate it.
      bool retry = true, clash = false, vanished = false;
      for (size_t i = 0; i < out->acks.size(); ++i) {
        const int err = out->acks[i].err;
        if (err == 0) continue;
        if (i == nb->add_idx && (err == EEXIST || err == EBUSY)) {
          clash = true;
        } else if (i == nb->del_idx && err == ENOENT) {
          vanished = true;
        } else if (err != ENOENT) {
          retry = false;
        }
      }
      if (retry) {
        if (clash) replace = true;
        if (vanished) replace = false;
        continue;
      }
    }
    return std::unexpected(nfnl::to_error(*nb->batch, *out).within(context));
  }
}

Result<bool> del_masquerade(const IpAddr& pod_ip) {
  PLUMB_TRY(check_addr(pod_ip, "pod address"));
  const std::string context = "remove masquerade of " + pod_ip.str();
  auto session = Session::open();
  if (!session) return std::unexpected(session.error().within(context));
  auto b = session->batch();
  auto elem = obj::map_element(kTableName, map_for(pod_ip), pod_ip, {});
  b->add_elems(NFT_MSG_DELSETELEM, 0, elem.get(),
               "delete element " + pod_ip.str() + " from map " + table_ref() + " " + map_for(pod_ip));
  PLUMB_TRY(b->finish());
  auto out = session->send(*b);
  if (!out) return std::unexpected(out.error().within(context));
  if (out->ok()) return true;
  if (out->batch_err == 0 && out->acks[0].seen && out->acks[0].err == ENOENT) return false;
  return std::unexpected(nfnl::to_error(*b, *out).within(context));
}

Status remove_table() {
  auto session = Session::open();
  if (!session) return std::unexpected(session.error());
  auto b = session->batch();
  auto table = obj::table(kTableName);
  b->add_table(NFT_MSG_DELTABLE, 0, table.get(), "delete table " + table_ref());
  PLUMB_TRY(b->finish());
  Outcome out = PLUMB_TRY(session->send(*b));
  if (out.ok()) return {};
  if (out.batch_err == 0 && out.acks[0].seen && out.acks[0].err == ENOENT) return {};
  return std::unexpected(nfnl::to_error(*b, out));
}

}  // namespace plumb::nft
