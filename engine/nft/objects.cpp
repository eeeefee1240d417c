#include "engine/nft/objects.hpp"

#include "engine/nft/expr.hpp"

#include <linux/netfilter/nf_tables.h>
#include <sys/socket.h>

#include <libnftnl/expr.h>

#include <new>
#include <sstream>
#include <vector>

namespace plumb::nft::obj {
namespace {

using expr::kIpv4Saddr;
using expr::kIpv6Saddr;
using expr::kTypeIpv4Addr;
using expr::kTypeIpv6Addr;
using expr::make;

Rule new_rule(const std::string& table, const std::string& chain) { return expr::rule(table, chain); }
Set new_set(const std::string& table, const std::string& name) { return expr::set(table, name); }

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
  expr::nfproto_guard(r.get(), family);
  expr::payload(r.get(), NFT_PAYLOAD_NETWORK_HEADER, family == AF_INET ? kIpv4Saddr : kIpv6Saddr, family == AF_INET ? 4 : 16, NFT_REG_1);
  nftnl_expr* lookup = make("lookup");
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
  Rule r = new_rule(table, chain);
  expr::addr_match(r.get(), prefix.addr.family, /*source=*/false, prefix, /*negate=*/false);
  expr::verdict(r.get(), NFT_RETURN);
  return r;
}

Rule masquerade_rule(const std::string& table, const std::string& chain) {
  Rule r = new_rule(table, chain);
  nftnl_rule_add_expr(r.get(), make("masq"));
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
