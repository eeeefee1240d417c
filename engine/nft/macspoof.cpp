#include "engine/nft/macspoof.hpp"

#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter_bridge.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include <libnftnl/expr.h>
#include <libnftnl/set.h>
#include <libnftnl/udata.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <vector>

#include "engine/kernel/link.hpp"
#include "engine/nft/nfnl.hpp"
#include "engine/nft/objects.hpp"
#include "engine/nft/portmap_objects.hpp"

namespace plumb::nft {
namespace {

using nfnl::Session;

constexpr uint16_t kBridge = NFPROTO_BRIDGE;
constexpr const char* kPorts = "macspoof-ports";
constexpr const char* kAllowed = "macspoof-allowed";
constexpr const char* kChain = "macspoof";
constexpr int32_t kPriority = -300;  // the reference's spoof-check chain priority (NF_BR_PRI_NAT_DST_BRIDGED)
// nft(8) data types (nftables datatype.h): ifname, ether_addr; a concatenation packs 6 bits each.
constexpr uint32_t kTypeIfname = 41, kTypeEtherAddr = 9;
constexpr uint32_t kIfnameLen = 16;  // IFNAMSIZ: an ifname key is the NUL-padded name
constexpr uint32_t kEtherLen = 6, kEtherPadded = 8;  // concatenation components are 4-byte aligned
constexpr uint32_t kEtherSaddr = 6;                 // offset in the Ethernet header
enum SetId : uint32_t { kIdPorts = 201, kIdAllowed };
constexpr const char* kBridgeFeature = "the kernel lacks nftables for bridges (CONFIG_NF_TABLES_BRIDGE)";

std::string ref(const std::string& name) { return std::string("bridge ") + kBridgeTableName + " " + name; }

nftnl_expr* new_expr(const char* name) {
  nftnl_expr* e = nftnl_expr_alloc(name);
  if (e == nullptr) throw std::bad_alloc();
  return e;
}

obj::Set new_set(const std::string& name) {
  obj::Set s(nftnl_set_alloc());
  if (!s) throw std::bad_alloc();
  nftnl_set_set_u32(s.get(), NFTNL_SET_FAMILY, kBridge);
  nftnl_set_set_str(s.get(), NFTNL_SET_TABLE, kBridgeTableName);
  nftnl_set_set_str(s.get(), NFTNL_SET_NAME, name.c_str());
  return s;
}

/// `set macspoof-ports { type ifname; }` / `set macspoof-allowed { type ifname . ether_addr; }`.
obj::Set declare_set(const char* name, bool with_mac, uint32_t set_id) {
  obj::Set s = new_set(name);
  nftnl_set_set_u32(s.get(), NFTNL_SET_FLAGS, 0);
  nftnl_set_set_u32(s.get(), NFTNL_SET_KEY_TYPE, with_mac ? (kTypeIfname << 6) | kTypeEtherAddr : kTypeIfname);
  nftnl_set_set_u32(s.get(), NFTNL_SET_KEY_LEN, with_mac ? kIfnameLen + kEtherPadded : kIfnameLen);
  nftnl_set_set_u32(s.get(), NFTNL_SET_ID, set_id);
  if (!with_mac) {
    // nft's user data: the key is a string in host byte order (BYTEORDER_HOST_ENDIAN = 1), so
    // `nft list` prints the interface names (nft puts it on a concatenation's set too, as 0).
    nftnl_udata_buf* buf = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
    if (buf == nullptr) throw std::bad_alloc();
    nftnl_udata_put_u32(buf, NFTNL_UDATA_SET_KEYBYTEORDER, 1);
    nftnl_set_set_data(s.get(), NFTNL_SET_USERDATA, nftnl_udata_buf_data(buf), nftnl_udata_buf_len(buf));
    nftnl_udata_buf_free(buf);
  }
  return s;
}

void add_iifname(nftnl_rule* r, uint32_t dreg) {
  nftnl_expr* e = new_expr("meta");
  nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, NFT_META_IIFNAME);
  nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, dreg);
  nftnl_rule_add_expr(r, e);
}

void add_lookup(nftnl_rule* r, const char* set, uint32_t set_id, bool invert) {
  nftnl_expr* e = new_expr("lookup");
  nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
  nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
  nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, set_id);
  if (invert) nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS, NFT_LOOKUP_F_INV);
  nftnl_rule_add_expr(r, e);
}

/// `iifname @macspoof-ports iifname . ether saddr != @macspoof-allowed drop`, as nft 1.0.6 emits:
///   [ meta load iifname => reg 1 ] [ lookup reg 1 set macspoof-ports ]
///   [ meta load iifname => reg 1 ] [ payload load 6b @ link header + 6 => reg 2 ]
///   [ lookup reg 1 set macspoof-allowed 0x1 ] [ immediate reg 0 drop ]
obj::Rule check_rule() {
  obj::Rule r(nftnl_rule_alloc());
  if (!r) throw std::bad_alloc();
  nftnl_rule_set_u32(r.get(), NFTNL_RULE_FAMILY, kBridge);
  nftnl_rule_set_str(r.get(), NFTNL_RULE_TABLE, kBridgeTableName);
  nftnl_rule_set_str(r.get(), NFTNL_RULE_CHAIN, kChain);
  add_iifname(r.get(), NFT_REG_1);
  add_lookup(r.get(), kPorts, kIdPorts, false);
  add_iifname(r.get(), NFT_REG_1);
  nftnl_expr* p = new_expr("payload");
  nftnl_expr_set_u32(p, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_2);
  nftnl_expr_set_u32(p, NFTNL_EXPR_PAYLOAD_BASE, NFT_PAYLOAD_LL_HEADER);
  nftnl_expr_set_u32(p, NFTNL_EXPR_PAYLOAD_OFFSET, kEtherSaddr);
  nftnl_expr_set_u32(p, NFTNL_EXPR_PAYLOAD_LEN, kEtherLen);
  nftnl_rule_add_expr(r.get(), p);
  add_lookup(r.get(), kAllowed, kIdAllowed, true);
  nftnl_expr* verdict = new_expr("immediate");
  nftnl_expr_set_u32(verdict, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
  nftnl_expr_set_u32(verdict, NFTNL_EXPR_IMM_VERDICT, NF_DROP);
  nftnl_rule_add_expr(r.get(), verdict);
  return r;
}

std::vector<uint8_t> port_key(const std::string& port) {
  std::vector<uint8_t> k(kIfnameLen, 0);
  std::memcpy(k.data(), port.data(), port.size());
  return k;
}

std::vector<uint8_t> allowed_key(const std::string& port, const Mac& mac) {
  std::vector<uint8_t> k = port_key(port);
  k.resize(kIfnameLen + kEtherPadded, 0);
  std::memcpy(k.data() + kIfnameLen, mac.bytes.data(), kEtherLen);
  return k;
}

/// Table, sets, chain and rule in one transaction; the chain is created with NLM_F_EXCL as the
/// marker that an earlier transaction installed all of it (EEXIST for it alone: installed).
Status ensure_base(Session& s) {
  if (PLUMB_TRY(s.has_chain(kBridge, kBridgeTableName, kChain))) return {};  // the marker: installed
  auto b = s.batch(kBridge);
  obj::Table table(nftnl_table_alloc());
  if (!table) throw std::bad_alloc();
  nftnl_table_set_u32(table.get(), NFTNL_TABLE_FAMILY, kBridge);
  nftnl_table_set_str(table.get(), NFTNL_TABLE_NAME, kBridgeTableName);
  b->add_table(NFT_MSG_NEWTABLE, NLM_F_CREATE, table.get(), "create table bridge plumb");
  obj::Set ports = declare_set(kPorts, false, kIdPorts);
  obj::Set allowed = declare_set(kAllowed, true, kIdAllowed);
  b->add_set(NFT_MSG_NEWSET, NLM_F_CREATE, ports.get(), "create set " + ref(kPorts));
  b->add_set(NFT_MSG_NEWSET, NLM_F_CREATE, allowed.get(), "create set " + ref(kAllowed));
  obj::Chain chain(nftnl_chain_alloc());
  if (!chain) throw std::bad_alloc();
  nftnl_chain_set_u32(chain.get(), NFTNL_CHAIN_FAMILY, kBridge);
  nftnl_chain_set_str(chain.get(), NFTNL_CHAIN_TABLE, kBridgeTableName);
  nftnl_chain_set_str(chain.get(), NFTNL_CHAIN_NAME, kChain);
  nftnl_chain_set_str(chain.get(), NFTNL_CHAIN_TYPE, "filter");
  nftnl_chain_set_u32(chain.get(), NFTNL_CHAIN_HOOKNUM, NF_BR_PRE_ROUTING);
  nftnl_chain_set_s32(chain.get(), NFTNL_CHAIN_PRIO, kPriority);
  nftnl_chain_set_u32(chain.get(), NFTNL_CHAIN_POLICY, NF_ACCEPT);
  const size_t marker = b->add_chain(NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, chain.get(),
                                     "create chain " + ref(kChain) + " (type filter hook prerouting)", kBridgeFeature);
  obj::Rule rule = check_rule();
  b->add_rule(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, rule.get(),
              "add rule " + ref(kChain) + " iifname @macspoof-ports iifname . ether saddr != @macspoof-allowed drop");
  PLUMB_TRY(b->finish());
  auto out = PLUMB_TRY(s.send(*b));
  if (out.ok()) return {};
  bool installed = out.acks.size() > marker && out.acks[marker].err == EEXIST;
  for (size_t i = 0; i < out.acks.size() && installed; ++i) installed = i == marker || !out.acks[i].seen || out.acks[i].err == 0;
  if (installed) return {};
  return std::unexpected(nfnl::to_error(*b, out));
}

/// One NEWSETELEM/DELSETELEM transaction for an element of `set`. ENOENT comes back as false.
Result<bool> change_element(Session& s, uint16_t type, const char* set, const std::vector<uint8_t>& key, const std::string& comment,
                            const std::string& what) {
  auto b = s.batch(kBridge);
  obj::Set elems = new_set(set);
  pmobj::add_element(elems.get(), key, {}, comment);
  b->add_elems(type, type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0, elems.get(), what);
  PLUMB_TRY(b->finish());
  auto out = PLUMB_TRY(s.send(*b));
  if (out.ok()) return true;
  if (!out.acks.empty() && out.acks[0].err == ENOENT) return false;
  return std::unexpected(nfnl::to_error(*b, out));
}

Result<bool> has_element(Session& s, const char* set, const std::vector<uint8_t>& key) {
  obj::Set q = new_set(set);
  pmobj::add_element(q.get(), key);
  netlink::Message m = nfnl::request(NFT_MSG_GETSETELEM, kBridge, 0, [&](nlmsghdr* nlh) { nftnl_set_elems_nlmsg_build_payload(nlh, q.get()); });
  bool found = false;
  auto st = s.socket().query(m, "nftables: get element of " + ref(set), [&](const nlmsghdr* h) -> Status {
    found |= NFNL_MSG_TYPE(h->nlmsg_type) == NFT_MSG_NEWSETELEM;
    return {};
  });
  if (!st && st.error().sys_errno == ENOENT) return false;
  if (!st) return std::unexpected(st.error());
  return found;
}

Status check_port(const std::string& port) {
  if (!link::valid_ifname(port)) return fail(cni_code::kInvalidConfig, "macspoofchk: invalid port name \"" + port + "\"");
  return {};
}

}  // namespace

Status add_macspoof(const std::string& port, const Mac& mac, const std::string& owner) {
  PLUMB_TRY(check_port(port));
  auto s = PLUMB_TRY(Session::open());
  PLUMB_TRY(ensure_base(s));
  const std::string what = " (" + port + " . " + mac.str() + ")";
  PLUMB_TRY(change_element(s, NFT_MSG_NEWSETELEM, kAllowed, allowed_key(port, mac), owner, "add element " + ref(kAllowed) + what));
  PLUMB_TRY(change_element(s, NFT_MSG_NEWSETELEM, kPorts, port_key(port), owner, "add element " + ref(kPorts) + " (" + port + ")"));
  return {};
}

Result<bool> del_macspoof(const std::string& port, const Mac& mac) {
  PLUMB_TRY(check_port(port));
  auto s = PLUMB_TRY(Session::open());
  // The port first: from then on its frames are not checked, so none is dropped by a half-removed pair.
  bool a = PLUMB_TRY(change_element(s, NFT_MSG_DELSETELEM, kPorts, port_key(port), {}, "delete element " + ref(kPorts) + " (" + port + ")"));
  bool b = PLUMB_TRY(change_element(s, NFT_MSG_DELSETELEM, kAllowed, allowed_key(port, mac), {},
                                    "delete element " + ref(kAllowed) + " (" + port + " . " + mac.str() + ")"));
  return a || b;
}

Status check_macspoof(const std::string& port, const Mac& mac) {
  PLUMB_TRY(check_port(port));
  auto s = PLUMB_TRY(Session::open());
  if (!PLUMB_TRY(has_element(s, kPorts, port_key(port)))) return fail(cni_code::kKernel, "CHECK: macspoofchk: " + port + " is not in " + ref(kPorts));
  if (!PLUMB_TRY(has_element(s, kAllowed, allowed_key(port, mac)))) {
    return fail(cni_code::kKernel, "CHECK: macspoofchk: " + port + " . " + mac.str() + " is not in " + ref(kAllowed));
  }
  return {};
}

}  // namespace plumb::nft
