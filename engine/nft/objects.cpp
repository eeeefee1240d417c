#include "engine/nft/objects.hpp"

#include <linux/netfilter/nf_tables.h>
#include <sys/socket.h>

#include <libnftnl/expr.h>

#include <new>
#include <sstream>
#include <vector>

namespace plumb::nft::obj {
namespace {

// Data types of set keys as nft(8) numbers them (nftables datatype.h): what `nft list` shows.
constexpr uint32_t kTypeIpv4Addr = 7;  // TYPE_IPADDR
constexpr uint32_t kTypeIpv6Addr = 8;  // TYPE_IP6ADDR

// Offsets in the network header (RFC 791 / RFC 8200).
constexpr uint32_t kIpv4Saddr = 12, kIpv4Daddr = 16;
constexpr uint32_t kIpv6Saddr = 8, kIpv6Daddr = 24;

nftnl_expr* new_expr(const char* name) {
  nftnl_expr* e = nftnl_expr_alloc(name);
  if (e == nullptr) throw std::bad_alloc();
  return e;
}

// [ meta load nfproto => reg 1 ] [ cmp eq reg 1 <nfproto> ]: the inet-table guard nft puts in
// front of every ip/ip6 payload match.
void add_nfproto_guard(nftnl_rule* r, int family) {
  nftnl_expr* meta = new_expr("meta");
  nftnl_expr_set_u32(meta, NFTNL_EXPR_META_KEY, NFT_META_NFPROTO);
  nftnl_expr_set_u32(meta, NFTNL_EXPR_META_DREG, NFT_REG_1);
  nftnl_rule_add_expr(r, meta);

  nftnl_expr* cmp = new_expr("cmp");
  nftnl_expr_set_u32(cmp, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
  nftnl_expr_set_u32(cmp, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ);
  nftnl_expr_set_u8(cmp, NFTNL_EXPR_CMP_DATA, family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6);
  nftnl_rule_add_expr(r, cmp);
}

// [ payload load <len>b @ network header + <offset> => reg 1 ]
void add_payload_load(nftnl_rule* r, uint32_t offset, uint32_t len) {
  nftnl_expr* p = new_expr("payload");
  nftnl_expr_set_u32(p, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
  nftnl_expr_set_u32(p, NFTNL_EXPR_PAYLOAD_BASE, NFT_PAYLOAD_NETWORK_HEADER);
  nftnl_expr_set_u32(p, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
  nftnl_expr_set_u32(p, NFTNL_EXPR_PAYLOAD_LEN, len);
  nftnl_rule_add_expr(r, p);
}

Rule new_rule(const std::string& table, const std::string& chain) {
  Rule r(nftnl_rule_alloc());
  if (!r) throw std::bad_alloc();
  nftnl_rule_set_u32(r.get(), NFTNL_RULE_FAMILY, kFamily);
  nftnl_rule_set_str(r.get(), NFTNL_RULE_TABLE, table.c_str());
  nftnl_rule_set_str(r.get(), NFTNL_RULE_CHAIN, chain.c_str());
  return r;
}

Set new_set(const std::string& table, const std::string& name) {
  Set s(nftnl_set_alloc());
  if (!s) throw std::bad_alloc();
  nftnl_set_set_u32(s.get(), NFTNL_SET_FAMILY, kFamily);
  nftnl_set_set_str(s.get(), NFTNL_SET_TABLE, table.c_str());
  nftnl_set_set_str(s.get(), NFTNL_SET_NAME, name.c_str());
  return s;
}

}  // namespace

Table table(const std::string& name) {
  Table t(nftnl_table_alloc());
  if (!t) throw std::bad_alloc();
  nftnl_table_set_u32(t.get(), NFTNL_TABLE_FAMILY, kFamily);
  nftnl_table_set_str(t.get(), NFTNL_TABLE_NAME, name.c_str());
  return t;
}

Chain chain(const std::string& table, const std::string& name) {
  Chain c(nftnl_chain_alloc());
  if (!c) throw std::bad_alloc();
  nftnl_chain_set_u32(c.get(), NFTNL_CHAIN_FAMILY, kFamily);
  nftnl_chain_set_str(c.get(), NFTNL_CHAIN_TABLE, table.c_str());
  nftnl_chain_set_str(c.get(), NFTNL_CHAIN_NAME, name.c_str());
  return c;
}

Chain base_chain(const std::string& table, const std::string& name, const std::string& type, uint32_t hooknum,
                 int32_t prio) {
  Chain c = chain(table, name);
  nftnl_chain_set_str(c.get(), NFTNL_CHAIN_TYPE, type.c_str());
  nftnl_chain_set_u32(c.get(), NFTNL_CHAIN_HOOKNUM, hooknum);
  nftnl_chain_set_s32(c.get(), NFTNL_CHAIN_PRIO, prio);
  nftnl_chain_set_u32(c.get(), NFTNL_CHAIN_POLICY, NF_ACCEPT);
  return c;
}

Set verdict_map(const std::string& table, const std::string& name, int family, uint32_t set_id) {
  Set s = new_set(table, name);
  nftnl_set_set_u32(s.get(), NFTNL_SET_FLAGS, NFT_SET_MAP);
  nftnl_set_set_u32(s.get(), NFTNL_SET_KEY_TYPE, family == AF_INET ? kTypeIpv4Addr : kTypeIpv6Addr);
  nftnl_set_set_u32(s.get(), NFTNL_SET_KEY_LEN, family == AF_INET ? 4 : 16);
  // Verdict data: the kernel sizes it itself (struct nft_verdict), no NFTA_SET_DATA_LEN.
  nftnl_set_set_u32(s.get(), NFTNL_SET_DATA_TYPE, NFT_DATA_VERDICT);
  nftnl_set_set_u32(s.get(), NFTNL_SET_ID, set_id);
  return s;
}

Set map_element(const std::string& table, const std::string& map, const IpAddr& key, const std::string& target_chain) {
  Set s = new_set(table, map);
  nftnl_set_elem* e = nftnl_set_elem_alloc();
  if (e == nullptr) throw std::bad_alloc();
  nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key.bytes.data(), static_cast<uint32_t>(key.size()));
  if (!target_chain.empty()) {
    nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, static_cast<uint32_t>(NFT_JUMP));
    nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_CHAIN, target_chain.c_str());
  }
  nftnl_set_elem_add(s.get(), e);  // the set owns the element now
  return s;
}

Rule saddr_vmap_rule(const std::string& table, const std::string& chain, int family, const std::string& map,
                     uint32_t set_id) {
  Rule r = new_rule(table, chain);
  add_nfproto_guard(r.get(), family);
  add_payload_load(r.get(), family == AF_INET ? kIpv4Saddr : kIpv6Saddr, family == AF_INET ? 4 : 16);
  nftnl_expr* lookup = new_expr("lookup");
  nftnl_expr_set_u32(lookup, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
  nftnl_expr_set_u32(lookup, NFTNL_EXPR_LOOKUP_DREG, NFT_REG_VERDICT);
  nftnl_expr_set_str(lookup, NFTNL_EXPR_LOOKUP_SET, map.c_str());
  if (set_id != 0) nftnl_expr_set_u32(lookup, NFTNL_EXPR_LOOKUP_SET_ID, set_id);
  nftnl_rule_add_expr(r.get(), lookup);
  return r;
}

// Like nft: a prefix on a byte boundary loads only its bytes and compares them; any other
// prefix (including /0) loads the whole address, masks it with a bitwise and compares.
Rule daddr_return_rule(const std::string& table, const std::string& chain, const IpPrefix& prefix) {
  const IpPrefix net = prefix.network();
  const int family = net.addr.family;
  const uint32_t full = static_cast<uint32_t>(net.addr.size());
  Rule r = new_rule(table, chain);
  add_nfproto_guard(r.get(), family);
  const bool aligned = net.len % 8 == 0 && net.len > 0;
  const uint32_t len = aligned ? net.len / 8u : full;
  add_payload_load(r.get(), family == AF_INET ? kIpv4Daddr : kIpv6Daddr, len);
  if (!aligned) {
    std::vector<uint8_t> mask(full, 0), zero(full, 0);
    for (unsigned bit = 0; bit < net.len; ++bit) mask[bit / 8] |= static_cast<uint8_t>(0x80u >> (bit % 8));
    nftnl_expr* bw = new_expr("bitwise");
    nftnl_expr_set_u32(bw, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
    nftnl_expr_set_u32(bw, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
    nftnl_expr_set_u32(bw, NFTNL_EXPR_BITWISE_LEN, full);
    nftnl_expr_set(bw, NFTNL_EXPR_BITWISE_MASK, mask.data(), full);
    nftnl_expr_set(bw, NFTNL_EXPR_BITWISE_XOR, zero.data(), full);
    nftnl_rule_add_expr(r.get(), bw);
  }
  nftnl_expr* cmp = new_expr("cmp");
  nftnl_expr_set_u32(cmp, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
  nftnl_expr_set_u32(cmp, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ);
  nftnl_expr_set(cmp, NFTNL_EXPR_CMP_DATA, net.addr.bytes.data(), len);
  nftnl_rule_add_expr(r.get(), cmp);

  nftnl_expr* imm = new_expr("immediate");
  nftnl_expr_set_u32(imm, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
  nftnl_expr_set_u32(imm, NFTNL_EXPR_IMM_VERDICT, static_cast<uint32_t>(NFT_RETURN));
  nftnl_rule_add_expr(r.get(), imm);
  return r;
}

Rule masquerade_rule(const std::string& table, const std::string& chain) {
  Rule r = new_rule(table, chain);
  nftnl_rule_add_expr(r.get(), new_expr("masq"));
  return r;
}

Rule chain_rules(const std::string& table, const std::string& chain) { return new_rule(table, chain); }

std::string expr_text(const nftnl_rule* rule) {
  std::vector<char> buf(8192);
  int n = nftnl_rule_snprintf(buf.data(), buf.size(), rule, NFTNL_OUTPUT_DEFAULT, 0);
  if (n < 0) return {};
  if (static_cast<size_t>(n) >= buf.size()) {
    buf.resize(static_cast<size_t>(n) + 1);
    nftnl_rule_snprintf(buf.data(), buf.size(), rule, NFTNL_OUTPUT_DEFAULT, 0);
  }
  // First line names the rule (family table chain handle); the expressions follow, indented.
  std::istringstream in(std::string(buf.data()));
  std::string line, out;
  while (std::getline(in, line)) {
    auto start = line.find('[');
    if (start == std::string::npos) continue;
    auto end = line.find_last_not_of(' ');
    out += line.substr(start, end - start + 1);
    out += '\n';
  }
  return out;
}

}  // namespace plumb::nft::obj
