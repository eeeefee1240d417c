#include "engine/nft/expr.hpp"

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <sys/socket.h>

#include <libnftnl/expr.h>
#include <libnftnl/set.h>

#include <algorithm>
#include <new>

namespace plumb::nft::expr {

uint32_t concat(std::initializer_list<uint32_t> types) {
  constexpr uint32_t kTypeBits = 6;
  uint32_t t = 0;
  for (uint32_t x : types) t = (t << kTypeBits) | x;
  return t;
}

nftnl_expr* make(const char* name) {
  nftnl_expr* e = nftnl_expr_alloc(name);
  if (e == nullptr) throw std::bad_alloc();
  return e;
}

obj::Rule rule(const std::string& table, const std::string& chain) {
  obj::Rule r(nftnl_rule_alloc());
  if (!r) throw std::bad_alloc();
  nftnl_rule_set_u32(r.get(), NFTNL_RULE_FAMILY, obj::kFamily);
  nftnl_rule_set_str(r.get(), NFTNL_RULE_TABLE, table.c_str());
  nftnl_rule_set_str(r.get(), NFTNL_RULE_CHAIN, chain.c_str());
  return r;
}

obj::Set set(const std::string& table, const std::string& name) {
  obj::Set s(nftnl_set_alloc());
  if (!s) throw std::bad_alloc();
  nftnl_set_set_u32(s.get(), NFTNL_SET_FAMILY, obj::kFamily);
  nftnl_set_set_str(s.get(), NFTNL_SET_TABLE, table.c_str());
  nftnl_set_set_str(s.get(), NFTNL_SET_NAME, name.c_str());
  return s;
}

void meta(nftnl_rule* r, uint32_t key, uint32_t dreg) {
  nftnl_expr* e = make("meta");
  nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
  nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, dreg);
  nftnl_rule_add_expr(r, e);
}

void cmp(nftnl_rule* r, uint32_t op, const void* data, uint32_t len) {
  nftnl_expr* e = make("cmp");
  nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
  nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
  nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
  nftnl_rule_add_expr(r, e);
}

void nfproto_guard(nftnl_rule* r, int family) {
  meta(r, NFT_META_NFPROTO, NFT_REG_1);
  const uint8_t proto = family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6;
  cmp(r, NFT_CMP_EQ, &proto, 1);
}

void payload(nftnl_rule* r, uint32_t base, uint32_t offset, uint32_t len, uint32_t dreg) {
  nftnl_expr* p = make("payload");
  nftnl_expr_set_u32(p, NFTNL_EXPR_PAYLOAD_DREG, dreg);
  nftnl_expr_set_u32(p, NFTNL_EXPR_PAYLOAD_BASE, base);
  nftnl_expr_set_u32(p, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
  nftnl_expr_set_u32(p, NFTNL_EXPR_PAYLOAD_LEN, len);
  nftnl_rule_add_expr(r, p);
}

void lookup(nftnl_rule* r, const std::string& set_name, uint32_t set_id, std::optional<uint32_t> dreg, bool invert) {
  nftnl_expr* l = make("lookup");
  nftnl_expr_set_u32(l, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
  if (dreg) nftnl_expr_set_u32(l, NFTNL_EXPR_LOOKUP_DREG, *dreg);
  nftnl_expr_set_str(l, NFTNL_EXPR_LOOKUP_SET, set_name.c_str());
  if (set_id != 0) nftnl_expr_set_u32(l, NFTNL_EXPR_LOOKUP_SET_ID, set_id);
  if (invert) nftnl_expr_set_u32(l, NFTNL_EXPR_LOOKUP_FLAGS, NFT_LOOKUP_F_INV);
  nftnl_rule_add_expr(r, l);
}

void mask(nftnl_rule* r, const void* mask_bytes, uint32_t len) {
  std::vector<uint8_t> zero(len, 0);
  nftnl_expr* bw = make("bitwise");
  nftnl_expr_set_u32(bw, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
  nftnl_expr_set_u32(bw, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
  nftnl_expr_set_u32(bw, NFTNL_EXPR_BITWISE_LEN, len);
  nftnl_expr_set(bw, NFTNL_EXPR_BITWISE_MASK, mask_bytes, len);
  nftnl_expr_set(bw, NFTNL_EXPR_BITWISE_XOR, zero.data(), len);
  nftnl_rule_add_expr(r, bw);
}

void ct_bits(nftnl_rule* r, uint32_t key, uint32_t bits) {
  nftnl_expr* ct = make("ct");
  nftnl_expr_set_u32(ct, NFTNL_EXPR_CT_KEY, key);
  nftnl_expr_set_u32(ct, NFTNL_EXPR_CT_DREG, NFT_REG_1);
  nftnl_rule_add_expr(r, ct);
  mask(r, &bits, 4);
  const uint32_t zero = 0;
  cmp(r, NFT_CMP_NEQ, &zero, 4);
}

void verdict(nftnl_rule* r, int code, const std::string& chain) {
  nftnl_expr* imm = make("immediate");
  nftnl_expr_set_u32(imm, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
  nftnl_expr_set_u32(imm, NFTNL_EXPR_IMM_VERDICT, static_cast<uint32_t>(code));
  if (!chain.empty()) nftnl_expr_set_str(imm, NFTNL_EXPR_IMM_CHAIN, chain.c_str());
  nftnl_rule_add_expr(r, imm);
}

void addr_match(nftnl_rule* r, int family, bool source, const IpPrefix& prefix, bool negate) {
  const IpPrefix net = prefix.network();
  const uint32_t full = addr_len(family);
  nfproto_guard(r, family);
  const bool aligned = net.len % 8 == 0 && net.len > 0;
  const uint32_t len = aligned ? net.len / 8u : full;
  const uint32_t offset = family == AF_INET ? (source ? kIpv4Saddr : kIpv4Daddr) : (source ? kIpv6Saddr : kIpv6Daddr);
  payload(r, NFT_PAYLOAD_NETWORK_HEADER, offset, len, NFT_REG_1);
  if (!aligned) {
    std::vector<uint8_t> m(full, 0);
    for (unsigned bit = 0; bit < net.len; ++bit) m[bit / 8] |= static_cast<uint8_t>(0x80u >> (bit % 8));
    mask(r, m.data(), full);
  }
  cmp(r, negate ? NFT_CMP_NEQ : NFT_CMP_EQ, net.addr.bytes.data(), len);
}

void ifname_match(nftnl_rule* r, bool input, const std::string& name, bool negate) {
  meta(r, input ? NFT_META_IIFNAME : NFT_META_OIFNAME, NFT_REG_1);
  if (!name.empty() && name.back() == '+') {
    // iptables' "eth+": the prefix's bytes only (nft's "eth*").
    const std::string prefix = name.substr(0, name.size() - 1);
    cmp(r, negate ? NFT_CMP_NEQ : NFT_CMP_EQ, prefix.data(), static_cast<uint32_t>(prefix.size()));
    return;
  }
  std::vector<uint8_t> key;
  put_ifname(key, name);
  cmp(r, negate ? NFT_CMP_NEQ : NFT_CMP_EQ, key.data(), kIfnameLen);
}

void put_addr(std::vector<uint8_t>& out, const IpAddr& a) {
  out.insert(out.end(), a.bytes.begin(), a.bytes.begin() + static_cast<std::ptrdiff_t>(a.size()));
}

void put_ifname(std::vector<uint8_t>& out, const std::string& name) {
  std::vector<uint8_t> field(kIfnameLen, 0);
  std::copy_n(name.begin(), std::min<size_t>(name.size(), kIfnameLen - 1), field.begin());
  out.insert(out.end(), field.begin(), field.end());
}

}  // namespace plumb::nft::expr
