#include "engine/nft/portmap_objects.hpp"

#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <libnftnl/expr.h>
#include <libnftnl/udata.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <new>

namespace plumb::nft::pmobj {
namespace {

// nft(8) data type numbers (nftables datatype.h); a concatenation's type is the component types
// packed 6 bits each, first component in the most significant position.
constexpr uint32_t kTypeNfproto = 2;       // nf_proto
constexpr uint32_t kTypeIpv4Addr = 7;      // ipv4_addr
constexpr uint32_t kTypeIpv6Addr = 8;      // ipv6_addr
constexpr uint32_t kTypeInetProto = 12;    // inet_proto
constexpr uint32_t kTypeInetService = 13;  // inet_service
constexpr uint32_t kTypeIfname = 41;       // ifname
constexpr uint32_t kTypeBits = 6;

constexpr uint32_t concat(std::initializer_list<uint32_t> types) {
  uint32_t t = 0;
  for (uint32_t x : types) t = (t << kTypeBits) | x;
  return t;
}

// Offsets in the network header (RFC 791 / RFC 8200) and the transport header.
constexpr uint32_t kIpv4Saddr = 12, kIpv4Daddr = 16;
constexpr uint32_t kIpv6Saddr = 8, kIpv6Daddr = 24;
constexpr uint32_t kThDport = 2;

constexpr size_t kOwnerTagLen = 16;     // ifname-typed field: 15 characters and a NUL
constexpr size_t kCommentMax = 127;     // nft's NFTNL_UDATA_COMMENT_MAXLEN is 128 with the NUL

uint32_t addr_type(int family) { return family == AF_INET ? kTypeIpv4Addr : kTypeIpv6Addr; }
uint32_t addr_len(int family) { return family == AF_INET ? 4 : 16; }
uint32_t padded(uint32_t len) { return (len + 3) / 4 * 4; }

nftnl_expr* new_expr(const char* name) {
  nftnl_expr* e = nftnl_expr_alloc(name);
  if (e == nullptr) throw std::bad_alloc();
  return e;
}

obj::Rule new_rule(const std::string& table, const std::string& chain) {
  obj::Rule r(nftnl_rule_alloc());
  if (!r) throw std::bad_alloc();
  nftnl_rule_set_u32(r.get(), NFTNL_RULE_FAMILY, obj::kFamily);
  nftnl_rule_set_str(r.get(), NFTNL_RULE_TABLE, table.c_str());
  nftnl_rule_set_str(r.get(), NFTNL_RULE_CHAIN, chain.c_str());
  return r;
}

obj::Set new_set(const std::string& table, const std::string& name) {
  obj::Set s(nftnl_set_alloc());
  if (!s) throw std::bad_alloc();
  nftnl_set_set_u32(s.get(), NFTNL_SET_FAMILY, obj::kFamily);
  nftnl_set_set_str(s.get(), NFTNL_SET_TABLE, table.c_str());
  nftnl_set_set_str(s.get(), NFTNL_SET_NAME, name.c_str());
  return s;
}

void add_meta(nftnl_rule* r, uint32_t key, uint32_t dreg) {
  nftnl_expr* e = new_expr("meta");
  nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
  nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, dreg);
  nftnl_rule_add_expr(r, e);
}

void add_cmp(nftnl_rule* r, uint32_t op, const void* data, uint32_t len) {
  nftnl_expr* e = new_expr("cmp");
  nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
  nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
  nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
  nftnl_rule_add_expr(r, e);
}

// [ meta load nfproto => reg 1 ] [ cmp eq reg 1 <nfproto> ]
void add_nfproto_guard(nftnl_rule* r, int family) {
  add_meta(r, NFT_META_NFPROTO, NFT_REG_1);
  const uint8_t proto = family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6;
  add_cmp(r, NFT_CMP_EQ, &proto, 1);
}

void add_payload(nftnl_rule* r, uint32_t base, uint32_t offset, uint32_t len, uint32_t dreg) {
  nftnl_expr* p = new_expr("payload");
  nftnl_expr_set_u32(p, NFTNL_EXPR_PAYLOAD_DREG, dreg);
  nftnl_expr_set_u32(p, NFTNL_EXPR_PAYLOAD_BASE, base);
  nftnl_expr_set_u32(p, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
  nftnl_expr_set_u32(p, NFTNL_EXPR_PAYLOAD_LEN, len);
  nftnl_rule_add_expr(r, p);
}

void add_lookup(nftnl_rule* r, const std::string& set, uint32_t set_id, std::optional<uint32_t> dreg) {
  nftnl_expr* l = new_expr("lookup");
  nftnl_expr_set_u32(l, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
  if (dreg) nftnl_expr_set_u32(l, NFTNL_EXPR_LOOKUP_DREG, *dreg);
  nftnl_expr_set_str(l, NFTNL_EXPR_LOOKUP_SET, set.c_str());
  if (set_id != 0) nftnl_expr_set_u32(l, NFTNL_EXPR_LOOKUP_SET_ID, set_id);
  nftnl_rule_add_expr(r, l);
}

// ct status dnat: [ ct load status => reg 1 ] [ bitwise reg 1 = ( reg 1 & 0x20 ) ^ 0 ]
// [ cmp neq reg 1 0 ]
void add_ct_status_dnat(nftnl_rule* r) {
  nftnl_expr* ct = new_expr("ct");
  nftnl_expr_set_u32(ct, NFTNL_EXPR_CT_KEY, NFT_CT_STATUS);
  nftnl_expr_set_u32(ct, NFTNL_EXPR_CT_DREG, NFT_REG_1);
  nftnl_rule_add_expr(r, ct);
  const uint32_t mask = IPS_DST_NAT, zero = 0;
  nftnl_expr* bw = new_expr("bitwise");
  nftnl_expr_set_u32(bw, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
  nftnl_expr_set_u32(bw, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
  nftnl_expr_set_u32(bw, NFTNL_EXPR_BITWISE_LEN, 4);
  nftnl_expr_set(bw, NFTNL_EXPR_BITWISE_MASK, &mask, 4);
  nftnl_expr_set(bw, NFTNL_EXPR_BITWISE_XOR, &zero, 4);
  nftnl_rule_add_expr(r, bw);
  add_cmp(r, NFT_CMP_NEQ, &zero, 4);
}

void add_masq(nftnl_rule* r) { nftnl_rule_add_expr(r, new_expr("masq")); }

void put_port(std::vector<uint8_t>& out, uint16_t port) {
  out.push_back(static_cast<uint8_t>(port >> 8));
  out.push_back(static_cast<uint8_t>(port & 0xff));
  out.push_back(0);
  out.push_back(0);
}

void put_addr(std::vector<uint8_t>& out, const IpAddr& a) {
  out.insert(out.end(), a.bytes.begin(), a.bytes.begin() + static_cast<std::ptrdiff_t>(a.size()));
}

}  // namespace

std::string dnat_map_name(int family, bool host_ip) {
  return std::string(family == AF_INET ? "portmap4" : "portmap6") + (host_ip ? "-hostip" : "");
}
std::string hairpin_set_name(int family) { return family == AF_INET ? "portmap4-hairpin" : "portmap6-hairpin"; }
std::string localhost_set_name() { return "portmap4-localhost"; }
std::string masqall_set_name(int family) { return family == AF_INET ? "portmap4-masqall" : "portmap6-masqall"; }

obj::Set dnat_map(const std::string& table, int family, bool host_ip, uint32_t set_id) {
  obj::Set s = new_set(table, dnat_map_name(family, host_ip));
  const uint32_t key_type = host_ip ? concat({kTypeInetProto, addr_type(family), kTypeInetService})
                                    : concat({kTypeInetProto, kTypeInetService});
  const uint32_t key_len = 4 + (host_ip ? padded(addr_len(family)) : 0) + 4;
  nftnl_set_set_u32(s.get(), NFTNL_SET_FLAGS, NFT_SET_MAP);
  nftnl_set_set_u32(s.get(), NFTNL_SET_KEY_TYPE, key_type);
  nftnl_set_set_u32(s.get(), NFTNL_SET_KEY_LEN, key_len);
  nftnl_set_set_u32(s.get(), NFTNL_SET_DATA_TYPE, concat({addr_type(family), kTypeInetService}));
  nftnl_set_set_u32(s.get(), NFTNL_SET_DATA_LEN, addr_len(family) + 4);
  nftnl_set_set_u32(s.get(), NFTNL_SET_ID, set_id);
  return s;
}

obj::Set owner_set(const std::string& table, uint32_t set_id) {
  obj::Set s = new_set(table, kOwners);
  nftnl_set_set_u32(s.get(), NFTNL_SET_FLAGS, 0);
  nftnl_set_set_u32(s.get(), NFTNL_SET_KEY_TYPE,
                    concat({kTypeNfproto, kTypeInetProto, kTypeIpv6Addr, kTypeInetService, kTypeIfname}));
  nftnl_set_set_u32(s.get(), NFTNL_SET_KEY_LEN, 4 + 4 + 16 + 4 + kOwnerTagLen);
  nftnl_set_set_u32(s.get(), NFTNL_SET_ID, set_id);
  return s;
}

obj::Set addr_set(const std::string& table, const std::string& name, int family, bool pair, uint32_t set_id) {
  obj::Set s = new_set(table, name);
  nftnl_set_set_u32(s.get(), NFTNL_SET_FLAGS, 0);
  nftnl_set_set_u32(s.get(), NFTNL_SET_KEY_TYPE,
                    pair ? concat({addr_type(family), addr_type(family)}) : addr_type(family));
  nftnl_set_set_u32(s.get(), NFTNL_SET_KEY_LEN, addr_len(family) * (pair ? 2 : 1));
  nftnl_set_set_u32(s.get(), NFTNL_SET_ID, set_id);
  return s;
}

// Registers as nft numbers them for concatenations: 32-bit registers NFT_REG32_00 (8) upwards,
// which overlay the 16-byte NFT_REG_1..4; the nat expression names the port register in the
// 16-byte numbering when the address fills NFT_REG_1 (IPv6), as nft does.
obj::Rule dnat_rule(const std::string& table, const std::string& chain, int family, bool host_ip, uint32_t set_id) {
  obj::Rule r = new_rule(table, chain);
  add_nfproto_guard(r.get(), family);
  add_meta(r.get(), NFT_META_L4PROTO, NFT_REG_1);
  uint32_t reg = NFT_REG32_01;
  if (host_ip) {
    add_payload(r.get(), NFT_PAYLOAD_NETWORK_HEADER, family == AF_INET ? kIpv4Daddr : kIpv6Daddr, addr_len(family), reg);
    reg += addr_len(family) / 4;
  }
  add_payload(r.get(), NFT_PAYLOAD_TRANSPORT_HEADER, kThDport, 2, reg);
  add_lookup(r.get(), dnat_map_name(family, host_ip), set_id, NFT_REG_1);
  nftnl_expr* nat = new_expr("nat");
  nftnl_expr_set_u32(nat, NFTNL_EXPR_NAT_TYPE, NFT_NAT_DNAT);
  nftnl_expr_set_u32(nat, NFTNL_EXPR_NAT_FAMILY, family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6);
  nftnl_expr_set_u32(nat, NFTNL_EXPR_NAT_REG_ADDR_MIN, NFT_REG_1);
  nftnl_expr_set_u32(nat, NFTNL_EXPR_NAT_REG_PROTO_MIN, family == AF_INET ? NFT_REG32_01 : NFT_REG_2);
  nftnl_rule_add_expr(r.get(), nat);
  return r;
}

obj::Rule local_jump_rule(const std::string& table, const std::string& chain, const std::string& target) {
  obj::Rule r = new_rule(table, chain);
  nftnl_expr* fib = new_expr("fib");
  nftnl_expr_set_u32(fib, NFTNL_EXPR_FIB_FLAGS, NFTA_FIB_F_DADDR);
  nftnl_expr_set_u32(fib, NFTNL_EXPR_FIB_RESULT, NFT_FIB_RESULT_ADDRTYPE);
  nftnl_expr_set_u32(fib, NFTNL_EXPR_FIB_DREG, NFT_REG_1);
  nftnl_rule_add_expr(r.get(), fib);
  const uint32_t local = RTN_LOCAL;
  add_cmp(r.get(), NFT_CMP_EQ, &local, 4);
  nftnl_expr* imm = new_expr("immediate");
  nftnl_expr_set_u32(imm, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
  nftnl_expr_set_u32(imm, NFTNL_EXPR_IMM_VERDICT, static_cast<uint32_t>(NFT_JUMP));
  nftnl_expr_set_str(imm, NFTNL_EXPR_IMM_CHAIN, target.c_str());
  nftnl_rule_add_expr(r.get(), imm);
  return r;
}

obj::Rule masq_hairpin_rule(const std::string& table, const std::string& chain, int family, uint32_t set_id) {
  obj::Rule r = new_rule(table, chain);
  add_ct_status_dnat(r.get());
  add_nfproto_guard(r.get(), family);
  const uint32_t len = addr_len(family);
  add_payload(r.get(), NFT_PAYLOAD_NETWORK_HEADER, family == AF_INET ? kIpv4Saddr : kIpv6Saddr, len, NFT_REG_1);
  add_payload(r.get(), NFT_PAYLOAD_NETWORK_HEADER, family == AF_INET ? kIpv4Daddr : kIpv6Daddr, len,
              family == AF_INET ? static_cast<uint32_t>(NFT_REG32_01) : static_cast<uint32_t>(NFT_REG_2));
  add_lookup(r.get(), hairpin_set_name(family), set_id, std::nullopt);
  add_masq(r.get());
  return r;
}

obj::Rule masq_localhost_rule(const std::string& table, const std::string& chain, uint32_t set_id) {
  obj::Rule r = new_rule(table, chain);
  add_ct_status_dnat(r.get());
  add_nfproto_guard(r.get(), AF_INET);
  add_payload(r.get(), NFT_PAYLOAD_NETWORK_HEADER, kIpv4Saddr, 1, NFT_REG_1);
  const uint8_t loopback_net = 127;
  add_cmp(r.get(), NFT_CMP_EQ, &loopback_net, 1);
  add_payload(r.get(), NFT_PAYLOAD_NETWORK_HEADER, kIpv4Daddr, 4, NFT_REG_1);
  add_lookup(r.get(), localhost_set_name(), set_id, std::nullopt);
  add_masq(r.get());
  return r;
}

obj::Rule masq_all_rule(const std::string& table, const std::string& chain, int family, uint32_t set_id) {
  obj::Rule r = new_rule(table, chain);
  add_ct_status_dnat(r.get());
  add_nfproto_guard(r.get(), family);
  add_payload(r.get(), NFT_PAYLOAD_NETWORK_HEADER, family == AF_INET ? kIpv4Daddr : kIpv6Daddr, addr_len(family),
              NFT_REG_1);
  add_lookup(r.get(), masqall_set_name(family), set_id, std::nullopt);
  add_masq(r.get());
  return r;
}

std::vector<uint8_t> dnat_key(uint8_t l4proto, const std::optional<IpAddr>& host_ip, uint16_t host_port) {
  std::vector<uint8_t> k = {l4proto, 0, 0, 0};
  if (host_ip) put_addr(k, *host_ip);
  put_port(k, host_port);
  return k;
}

std::vector<uint8_t> dnat_data(const IpAddr& pod, uint16_t container_port) {
  std::vector<uint8_t> d;
  put_addr(d, pod);
  put_port(d, container_port);
  return d;
}

std::vector<uint8_t> owner_key(int family, uint8_t l4proto, const std::optional<IpAddr>& host_ip, uint16_t host_port,
                               const std::string& owner_tag) {
  std::vector<uint8_t> k = {static_cast<uint8_t>(family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6), 0, 0, 0,
                            l4proto, 0, 0, 0};
  std::array<uint8_t, 16> addr{};
  if (host_ip && host_ip->is_v4()) {
    addr[10] = addr[11] = 0xff;  // ::ffff:a.b.c.d
    std::copy_n(host_ip->bytes.begin(), 4, addr.begin() + 12);
  } else if (host_ip) {
    addr = host_ip->bytes;
  }
  k.insert(k.end(), addr.begin(), addr.end());
  put_port(k, host_port);
  std::array<uint8_t, kOwnerTagLen> tag{};
  std::memcpy(tag.data(), owner_tag.data(), std::min(owner_tag.size(), kOwnerTagLen - 1));
  k.insert(k.end(), tag.begin(), tag.end());
  return k;
}

std::vector<uint8_t> addr_key(const IpAddr& a, bool pair) {
  std::vector<uint8_t> k;
  put_addr(k, a);
  if (pair) put_addr(k, a);
  return k;
}

obj::Set set_ref(const std::string& table, const std::string& name) { return new_set(table, name); }

void add_element(nftnl_set* s, const std::vector<uint8_t>& key, const std::vector<uint8_t>& data,
                 const std::string& comment) {
  nftnl_set_elem* e = nftnl_set_elem_alloc();
  if (e == nullptr) throw std::bad_alloc();
  nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key.data(), static_cast<uint32_t>(key.size()));
  if (!data.empty()) nftnl_set_elem_set(e, NFTNL_SET_ELEM_DATA, data.data(), static_cast<uint32_t>(data.size()));
  if (!comment.empty()) {
    nftnl_udata_buf* buf = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
    if (buf == nullptr) {
      nftnl_set_elem_free(e);
      throw std::bad_alloc();
    }
    const std::string text = comment.substr(0, kCommentMax);
    nftnl_udata_put_strz(buf, NFTNL_UDATA_SET_ELEM_COMMENT, text.c_str());
    nftnl_set_elem_set(e, NFTNL_SET_ELEM_USERDATA, nftnl_udata_buf_data(buf), nftnl_udata_buf_len(buf));
    nftnl_udata_buf_free(buf);
  }
  nftnl_set_elem_add(s, e);  // the set owns the element now
}

namespace {
int comment_cb(const nftnl_udata* attr, void* data) {
  if (nftnl_udata_type(attr) != NFTNL_UDATA_SET_ELEM_COMMENT) return 0;
  const uint8_t len = nftnl_udata_len(attr);
  const char* s = static_cast<const char*>(nftnl_udata_get(attr));
  if (len == 0 || s[len - 1] != '\0') return -1;  // not a NUL-terminated string: ignore
  *static_cast<std::string*>(data) = std::string(s, len - 1);
  return 0;
}
}  // namespace

std::string element_comment(nftnl_set_elem* e) {
  if (!nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_USERDATA)) return {};
  uint32_t len = 0;
  const void* ud = nftnl_set_elem_get(e, NFTNL_SET_ELEM_USERDATA, &len);
  std::string out;
  if (ud == nullptr || nftnl_udata_parse(ud, len, comment_cb, &out) < 0) return {};
  return out;
}

}  // namespace plumb::nft::pmobj
