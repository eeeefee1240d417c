#include "engine/nft/portmap_objects.hpp"

#include "engine/nft/expr.hpp"

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

using expr::addr_len;
using expr::addr_type;
using expr::concat;
using expr::kIpv4Daddr;
using expr::kIpv4Saddr;
using expr::kIpv6Daddr;
using expr::kIpv6Saddr;
using expr::kTypeIfname;
using expr::kTypeInetProto;
using expr::kTypeInetService;
using expr::kTypeIpv6Addr;
using expr::kTypeNfproto;
using expr::put_addr;

constexpr uint32_t kThDport = 2;        // destination port offset in the transport header

constexpr size_t kOwnerTagLen = 16;     // ifname-typed field: 15 characters and a NUL
constexpr size_t kCommentMax = 127;     // nft's NFTNL_UDATA_COMMENT_MAXLEN is 128 with the NUL

uint32_t padded(uint32_t len) { return (len + 3) / 4 * 4; }

// ct status dnat: [ ct load status => reg 1 ] [ bitwise reg 1 = ( reg 1 & 0x20 ) ^ 0 ]
// [ cmp neq reg 1 0 ]
void add_ct_status_dnat(nftnl_rule* r) { expr::ct_bits(r, NFT_CT_STATUS, IPS_DST_NAT); }

void add_masq(nftnl_rule* r) { nftnl_rule_add_expr(r, expr::make("masq")); }

void put_port(std::vector<uint8_t>& out, uint16_t port) {
  out.push_back(static_cast<uint8_t>(port >> 8));
  out.push_back(static_cast<uint8_t>(port & 0xff));
  out.push_back(0);
  out.push_back(0);
}


}  // namespace

std::string dnat_map_name(int family, bool host_ip, const std::string& condition_class) {
  return std::string(family == AF_INET ? "portmap4" : "portmap6") + (condition_class.empty() ? "" : "-" + condition_class) +
         (host_ip ? "-hostip" : "");
}
std::string hairpin_set_name(int family) { return family == AF_INET ? "portmap4-hairpin" : "portmap6-hairpin"; }
std::string localhost_set_name() { return "portmap4-localhost"; }
std::string masqall_set_name(int family) { return family == AF_INET ? "portmap4-masqall" : "portmap6-masqall"; }

obj::Set dnat_map(const std::string& table, int family, bool host_ip, uint32_t set_id, const std::string& condition_class) {
  obj::Set s = expr::set(table, dnat_map_name(family, host_ip, condition_class));
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
  obj::Set s = expr::set(table, kOwners);
  nftnl_set_set_u32(s.get(), NFTNL_SET_FLAGS, 0);
  nftnl_set_set_u32(s.get(), NFTNL_SET_KEY_TYPE,
                    concat({kTypeNfproto, kTypeInetProto, kTypeIpv6Addr, kTypeInetService, kTypeIfname}));
  nftnl_set_set_u32(s.get(), NFTNL_SET_KEY_LEN, 4 + 4 + 16 + 4 + kOwnerTagLen);
  nftnl_set_set_u32(s.get(), NFTNL_SET_ID, set_id);
  return s;
}

obj::Set addr_set(const std::string& table, const std::string& name, int family, bool pair, uint32_t set_id) {
  obj::Set s = expr::set(table, name);
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
obj::Rule dnat_rule(const std::string& table, const std::string& chain, int family, bool host_ip, uint32_t set_id,
                    const Conditions* conditions) {
  obj::Rule r = expr::rule(table, chain);
  expr::nfproto_guard(r.get(), family);
  if (conditions != nullptr) append_conditions(r.get(), *conditions);
  expr::meta(r.get(), NFT_META_L4PROTO, NFT_REG_1);
  uint32_t reg = NFT_REG32_01;
  if (host_ip) {
    expr::payload(r.get(), NFT_PAYLOAD_NETWORK_HEADER, family == AF_INET ? kIpv4Daddr : kIpv6Daddr, addr_len(family), reg);
    reg += addr_len(family) / 4;
  }
  expr::payload(r.get(), NFT_PAYLOAD_TRANSPORT_HEADER, kThDport, 2, reg);
  expr::lookup(r.get(), dnat_map_name(family, host_ip, conditions != nullptr ? conditions->class_name() : std::string()), set_id,
               NFT_REG_1);
  nftnl_expr* nat = expr::make("nat");
  nftnl_expr_set_u32(nat, NFTNL_EXPR_NAT_TYPE, NFT_NAT_DNAT);
  nftnl_expr_set_u32(nat, NFTNL_EXPR_NAT_FAMILY, family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6);
  nftnl_expr_set_u32(nat, NFTNL_EXPR_NAT_REG_ADDR_MIN, NFT_REG_1);
  nftnl_expr_set_u32(nat, NFTNL_EXPR_NAT_REG_PROTO_MIN, family == AF_INET ? NFT_REG32_01 : NFT_REG_2);
  nftnl_rule_add_expr(r.get(), nat);
  return r;
}

obj::Rule local_jump_rule(const std::string& table, const std::string& chain, const std::string& target) {
  obj::Rule r = expr::rule(table, chain);
  nftnl_expr* fib = expr::make("fib");
  nftnl_expr_set_u32(fib, NFTNL_EXPR_FIB_FLAGS, NFTA_FIB_F_DADDR);
  nftnl_expr_set_u32(fib, NFTNL_EXPR_FIB_RESULT, NFT_FIB_RESULT_ADDRTYPE);
  nftnl_expr_set_u32(fib, NFTNL_EXPR_FIB_DREG, NFT_REG_1);
  nftnl_rule_add_expr(r.get(), fib);
  const uint32_t local = RTN_LOCAL;
  expr::cmp(r.get(), NFT_CMP_EQ, &local, 4);
  nftnl_expr* imm = expr::make("immediate");
  nftnl_expr_set_u32(imm, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
  nftnl_expr_set_u32(imm, NFTNL_EXPR_IMM_VERDICT, static_cast<uint32_t>(NFT_JUMP));
  nftnl_expr_set_str(imm, NFTNL_EXPR_IMM_CHAIN, target.c_str());
  nftnl_rule_add_expr(r.get(), imm);
  return r;
}

obj::Rule masq_hairpin_rule(const std::string& table, const std::string& chain, int family, uint32_t set_id) {
  obj::Rule r = expr::rule(table, chain);
  add_ct_status_dnat(r.get());
  expr::nfproto_guard(r.get(), family);
  const uint32_t len = addr_len(family);
  expr::payload(r.get(), NFT_PAYLOAD_NETWORK_HEADER, family == AF_INET ? kIpv4Saddr : kIpv6Saddr, len, NFT_REG_1);
  expr::payload(r.get(), NFT_PAYLOAD_NETWORK_HEADER, family == AF_INET ? kIpv4Daddr : kIpv6Daddr, len,
              family == AF_INET ? static_cast<uint32_t>(NFT_REG32_01) : static_cast<uint32_t>(NFT_REG_2));
  expr::lookup(r.get(), hairpin_set_name(family), set_id, std::nullopt);
  add_masq(r.get());
  return r;
}

obj::Rule masq_localhost_rule(const std::string& table, const std::string& chain, uint32_t set_id) {
  obj::Rule r = expr::rule(table, chain);
  add_ct_status_dnat(r.get());
  expr::nfproto_guard(r.get(), AF_INET);
  expr::payload(r.get(), NFT_PAYLOAD_NETWORK_HEADER, kIpv4Saddr, 1, NFT_REG_1);
  const uint8_t loopback_net = 127;
  expr::cmp(r.get(), NFT_CMP_EQ, &loopback_net, 1);
  expr::payload(r.get(), NFT_PAYLOAD_NETWORK_HEADER, kIpv4Daddr, 4, NFT_REG_1);
  expr::lookup(r.get(), localhost_set_name(), set_id, std::nullopt);
  add_masq(r.get());
  return r;
}

obj::Rule masq_all_rule(const std::string& table, const std::string& chain, int family, uint32_t set_id) {
  obj::Rule r = expr::rule(table, chain);
  add_ct_status_dnat(r.get());
  expr::nfproto_guard(r.get(), family);
  expr::payload(r.get(), NFT_PAYLOAD_NETWORK_HEADER, family == AF_INET ? kIpv4Daddr : kIpv6Daddr, addr_len(family),
              NFT_REG_1);
  expr::lookup(r.get(), masqall_set_name(family), set_id, std::nullopt);
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

obj::Set set_ref(const std::string& table, const std::string& name) { return expr::set(table, name); }

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
