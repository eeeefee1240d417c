// Golden tests for plumb's port-mapping objects (engine/nft/portmap_objects.hpp) and the
// conntrack delete message: the rules' expressions must be exactly what nft(8) 1.0.6 generates
// for the rule text in portmap.hpp (expected lines taken from `nft --debug=netlink -f` of that
// text in an inet table), element keys must use nft's concatenation layout, and the conntrack
// delete must carry the tuple, zone and id as ctnetlink expects.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netfilter/nf_tables.h>
#include <sys/socket.h>

#include <libnftnl/set.h>

#include <string>
#include <vector>

#include "engine/nft/conntrack.hpp"
#include "engine/nft/objects.hpp"
#include "engine/nft/portmap.hpp"
#include "engine/nft/portmap_objects.hpp"

using namespace plumb;
namespace pm = plumb::nft::pmobj;

namespace {

IpAddr addr(const char* s) {
  auto a = IpAddr::parse(s);
  REQUIRE(a.has_value());
  return *a;
}

std::string text(const nft::obj::Rule& r) { return nft::obj::expr_text(r.get()); }

}  // namespace

TEST_CASE("the DNAT rules match nft's bytecode for both families, with and without a host address") {
  CHECK(text(pm::dnat_rule("plumb", pm::kChainDnat, AF_INET, true, 0)) ==
        "[ meta load nfproto => reg 1 ]\n"
        "[ cmp eq reg 1 0x00000002 ]\n"
        "[ meta load l4proto => reg 1 ]\n"
        "[ payload load 4b @ network header + 16 => reg 9 ]\n"
        "[ payload load 2b @ transport header + 2 => reg 10 ]\n"
        "[ lookup reg 1 set portmap4-hostip dreg 1 ]\n"
        "[ nat dnat ip addr_min reg 1 proto_min reg 9 ]\n");
  CHECK(text(pm::dnat_rule("plumb", pm::kChainDnat, AF_INET, false, 0)) ==
        "[ meta load nfproto => reg 1 ]\n"
        "[ cmp eq reg 1 0x00000002 ]\n"
        "[ meta load l4proto => reg 1 ]\n"
        "[ payload load 2b @ transport header + 2 => reg 9 ]\n"
        "[ lookup reg 1 set portmap4 dreg 1 ]\n"
        "[ nat dnat ip addr_min reg 1 proto_min reg 9 ]\n");
  CHECK(text(pm::dnat_rule("plumb", pm::kChainDnat, AF_INET6, true, 0)) ==
        "[ meta load nfproto => reg 1 ]\n"
        "[ cmp eq reg 1 0x0000000a ]\n"
        "[ meta load l4proto => reg 1 ]\n"
        "[ payload load 16b @ network header + 24 => reg 9 ]\n"
        "[ payload load 2b @ transport header + 2 => reg 13 ]\n"
        "[ lookup reg 1 set portmap6-hostip dreg 1 ]\n"
        "[ nat dnat ip6 addr_min reg 1 proto_min reg 2 ]\n");
  CHECK(text(pm::dnat_rule("plumb", pm::kChainDnat, AF_INET6, false, 0)) ==
        "[ meta load nfproto => reg 1 ]\n"
        "[ cmp eq reg 1 0x0000000a ]\n"
        "[ meta load l4proto => reg 1 ]\n"
        "[ payload load 2b @ transport header + 2 => reg 9 ]\n"
        "[ lookup reg 1 set portmap6 dreg 1 ]\n"
        "[ nat dnat ip6 addr_min reg 1 proto_min reg 2 ]\n");
}

TEST_CASE("fib daddr type local jump matches nft's bytecode") {
  CHECK(text(pm::local_jump_rule("plumb", pm::kChainOutput, pm::kChainDnat)) ==
        "[ fib daddr type => reg 1 ]\n"
        "[ cmp eq reg 1 0x00000002 ]\n"
        "[ immediate reg 0 jump -> portmap-dnat ]\n");
}

TEST_CASE("the masquerade rules match nft's bytecode") {
  CHECK(text(pm::masq_hairpin_rule("plumb", pm::kChainPostrouting, AF_INET6, 0)) ==
        "[ ct load status => reg 1 ]\n"
        "[ bitwise reg 1 = ( reg 1 & 0x00000020 ) ^ 0x00000000 ]\n"
        "[ cmp neq reg 1 0x00000000 ]\n"
        "[ meta load nfproto => reg 1 ]\n"
        "[ cmp eq reg 1 0x0000000a ]\n"
        "[ payload load 16b @ network header + 8 => reg 1 ]\n"
        "[ payload load 16b @ network header + 24 => reg 2 ]\n"
        "[ lookup reg 1 set portmap6-hairpin ]\n"
        "[ masq ]\n");
  CHECK(text(pm::masq_hairpin_rule("plumb", pm::kChainPostrouting, AF_INET, 0)) ==
        "[ ct load status => reg 1 ]\n"
        "[ bitwise reg 1 = ( reg 1 & 0x00000020 ) ^ 0x00000000 ]\n"
        "[ cmp neq reg 1 0x00000000 ]\n"
        "[ meta load nfproto => reg 1 ]\n"
        "[ cmp eq reg 1 0x00000002 ]\n"
        "[ payload load 4b @ network header + 12 => reg 1 ]\n"
        "[ payload load 4b @ network header + 16 => reg 9 ]\n"
        "[ lookup reg 1 set portmap4-hairpin ]\n"
        "[ masq ]\n");
  CHECK(text(pm::masq_localhost_rule("plumb", pm::kChainPostrouting, 0)) ==
        "[ ct load status => reg 1 ]\n"
        "[ bitwise reg 1 = ( reg 1 & 0x00000020 ) ^ 0x00000000 ]\n"
        "[ cmp neq reg 1 0x00000000 ]\n"
        "[ meta load nfproto => reg 1 ]\n"
        "[ cmp eq reg 1 0x00000002 ]\n"
        "[ payload load 1b @ network header + 12 => reg 1 ]\n"
        "[ cmp eq reg 1 0x0000007f ]\n"
        "[ payload load 4b @ network header + 16 => reg 1 ]\n"
        "[ lookup reg 1 set portmap4-localhost ]\n"
        "[ masq ]\n");
  CHECK(text(pm::masq_all_rule("plumb", pm::kChainPostrouting, AF_INET6, 0)) ==
        "[ ct load status => reg 1 ]\n"
        "[ bitwise reg 1 = ( reg 1 & 0x00000020 ) ^ 0x00000000 ]\n"
        "[ cmp neq reg 1 0x00000000 ]\n"
        "[ meta load nfproto => reg 1 ]\n"
        "[ cmp eq reg 1 0x0000000a ]\n"
        "[ payload load 16b @ network header + 24 => reg 1 ]\n"
        "[ lookup reg 1 set portmap6-masqall ]\n"
        "[ masq ]\n");
}

TEST_CASE("set declarations carry nft's concatenated type numbers and padded lengths") {
  // nft 1.0.6 sends these for `type inet_proto . inet_service : ipv4_addr . inet_service`
  // (0x30d / 8 : 0x1cd / 8) and the owner set's five-part key (0x02308369 / 44).
  auto m4 = pm::dnat_map("plumb", AF_INET, false, 1);
  CHECK(nftnl_set_get_u32(m4.get(), NFTNL_SET_KEY_TYPE) == 0x30d);
  CHECK(nftnl_set_get_u32(m4.get(), NFTNL_SET_KEY_LEN) == 8);
  CHECK(nftnl_set_get_u32(m4.get(), NFTNL_SET_DATA_TYPE) == 0x1cd);
  CHECK(nftnl_set_get_u32(m4.get(), NFTNL_SET_DATA_LEN) == 8);
  CHECK(nftnl_set_get_u32(m4.get(), NFTNL_SET_FLAGS) == NFT_SET_MAP);
  auto m6h = pm::dnat_map("plumb", AF_INET6, true, 1);
  CHECK(nftnl_set_get_u32(m6h.get(), NFTNL_SET_KEY_LEN) == 24);
  CHECK(nftnl_set_get_u32(m6h.get(), NFTNL_SET_DATA_LEN) == 20);
  CHECK(std::string(nftnl_set_get_str(m6h.get(), NFTNL_SET_NAME)) == "portmap6-hostip");
  auto own = pm::owner_set("plumb", 1);
  CHECK(nftnl_set_get_u32(own.get(), NFTNL_SET_KEY_TYPE) == 0x02308369);
  CHECK(nftnl_set_get_u32(own.get(), NFTNL_SET_KEY_LEN) == 44);
}

TEST_CASE("element keys and data use nft's concatenation layout") {
  // tcp . 8080 ; udp . 192.0.2.1 . 53 ; 203.0.113.5 . 80
  CHECK(pm::dnat_key(6, std::nullopt, 8080) == std::vector<uint8_t>{6, 0, 0, 0, 0x1f, 0x90, 0, 0});
  CHECK(pm::dnat_key(17, addr("192.0.2.1"), 53) ==
        std::vector<uint8_t>{17, 0, 0, 0, 192, 0, 2, 1, 0, 53, 0, 0});
  CHECK(pm::dnat_data(addr("203.0.113.5"), 80) == std::vector<uint8_t>{203, 0, 113, 5, 0, 80, 0, 0});
  CHECK(pm::dnat_data(addr("2001:db8::5"), 5353).size() == 20);
  auto k = pm::owner_key(AF_INET, 6, addr("198.51.100.1"), 8080, "0123456789abcde");
  REQUIRE(k.size() == 44);
  CHECK(k[0] == 2);   // NFPROTO_IPV4
  CHECK(k[4] == 6);   // tcp
  CHECK(std::vector<uint8_t>(k.begin() + 8, k.begin() + 24) ==
        std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 51, 100, 1});
  CHECK(k[24] == 0x1f);
  CHECK(k[25] == 0x90);
  CHECK(std::string(k.begin() + 28, k.begin() + 43) == "0123456789abcde");
  CHECK(k[43] == 0);  // NUL: the tag is an nft ifname string
  CHECK(pm::addr_key(addr("192.0.2.7"), true) == std::vector<uint8_t>{192, 0, 2, 7, 192, 0, 2, 7});
}

TEST_CASE("owner tags are 15 hex digits, distinct per container and interface, and stable") {
  const std::string a = nft::owner_tag("c1", "eth0");
  CHECK(a.size() == 15);
  CHECK(a.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(a == nft::owner_tag("c1", "eth0"));
  CHECK(a != nft::owner_tag("c1", "net1"));
  CHECK(a != nft::owner_tag("c2", "eth0"));
}

TEST_CASE("an element's comment round-trips through nft's user data encoding") {
  auto s = pm::set_ref("plumb", "portmap4");
  pm::add_element(s.get(), pm::dnat_key(6, std::nullopt, 80), pm::dnat_data(addr("192.0.2.9"), 8080), "ctr-1/eth0");
  auto* it = nftnl_set_elems_iter_create(s.get());
  REQUIRE(it != nullptr);
  nftnl_set_elem* e = nftnl_set_elems_iter_next(it);
  REQUIRE(e != nullptr);
  uint32_t len = 0;
  const auto* ud = static_cast<const uint8_t*>(nftnl_set_elem_get(e, NFTNL_SET_ELEM_USERDATA, &len));
  // nft's layout: type NFTNL_UDATA_SET_ELEM_COMMENT (0), length incl. NUL, the text.
  REQUIRE(len == 2 + 11);
  CHECK(ud[0] == 0);
  CHECK(ud[1] == 11);
  CHECK(pm::element_comment(e) == "ctr-1/eth0");
  nftnl_set_elems_iter_destroy(it);
}

TEST_CASE("a mapping describes its protocol, port and host address for messages") {
  nft::PortMapping m{17, std::nullopt, 5353, addr("2001:db8::5"), 53, {}};
  CHECK(nft::describe(m) == "udp host port 5353 on every IPv6 address");
  m.host_ip = addr("2001:db8::1");
  m.l4proto = 132;
  CHECK(nft::describe(m) == "sctp host port 5353 on 2001:db8::1");
}

TEST_CASE("the conntrack delete request carries the original tuple, zone and id") {
  nft::conntrack::Entry e;
  e.orig.src = addr("198.51.100.2");
  e.orig.dst = addr("198.51.100.1");
  e.orig.l4proto = 17;
  e.orig.sport = 40000;
  e.orig.dport = 8053;
  e.zone = 3;
  e.id = 0x11223344;
  std::vector<char> buf(512);
  const size_t len = nft::conntrack::build_delete(buf.data(), 77, AF_INET, e);
  const auto* nlh = reinterpret_cast<const nlmsghdr*>(buf.data());
  REQUIRE(len == nlh->nlmsg_len);
  CHECK(nlh->nlmsg_type == ((NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE));
  CHECK(nlh->nlmsg_flags == (NLM_F_REQUEST | NLM_F_ACK));
  CHECK(nlh->nlmsg_seq == 77);
  const auto* nfg = static_cast<const nfgenmsg*>(mnl_nlmsg_get_payload(nlh));
  CHECK(nfg->nfgen_family == AF_INET);
  CHECK(nfg->version == NFNETLINK_V0);
  // nlmsghdr 16 + nfgenmsg 4 + ORIG(4 + IP(4 + 8 + 8) + PROTO(4 + 8 + 8 + 8)) + ZONE 8 + ID 8
  CHECK(len == 16 + 4 + 4 + 20 + 28 + 8 + 8);
  // Walk it back with the same attribute layout.
  struct Tb {
    const nlattr* a[32] = {};
  };
  auto collect = [](const nlattr* a, void* data) -> int {
    auto* tb = static_cast<Tb*>(data);
    if (mnl_attr_get_type(a) < 32) tb->a[mnl_attr_get_type(a)] = a;
    return MNL_CB_OK;
  };
  Tb top, tuple, ip, proto_tb;
  REQUIRE(mnl_attr_parse(nlh, sizeof(nfgenmsg), collect, &top) >= 0);
  REQUIRE(top.a[CTA_TUPLE_ORIG] != nullptr);
  REQUIRE(top.a[CTA_ZONE] != nullptr);
  REQUIRE(top.a[CTA_ID] != nullptr);
  CHECK(ntohs(mnl_attr_get_u16(top.a[CTA_ZONE])) == 3);
  CHECK(ntohl(mnl_attr_get_u32(top.a[CTA_ID])) == 0x11223344u);
  REQUIRE(mnl_attr_parse_nested(top.a[CTA_TUPLE_ORIG], collect, &tuple) >= 0);
  REQUIRE(tuple.a[CTA_TUPLE_IP] != nullptr);
  REQUIRE(tuple.a[CTA_TUPLE_PROTO] != nullptr);
  REQUIRE(mnl_attr_parse_nested(tuple.a[CTA_TUPLE_IP], collect, &ip) >= 0);
  REQUIRE(mnl_attr_parse_nested(tuple.a[CTA_TUPLE_PROTO], collect, &proto_tb) >= 0);
  REQUIRE(ip.a[CTA_IP_V4_SRC] != nullptr);
  REQUIRE(ip.a[CTA_IP_V4_DST] != nullptr);
  REQUIRE(proto_tb.a[CTA_PROTO_NUM] != nullptr);
  REQUIRE(proto_tb.a[CTA_PROTO_SRC_PORT] != nullptr);
  REQUIRE(proto_tb.a[CTA_PROTO_DST_PORT] != nullptr);
  const uint32_t src = mnl_attr_get_u32(ip.a[CTA_IP_V4_SRC]);
  const uint32_t dst = mnl_attr_get_u32(ip.a[CTA_IP_V4_DST]);
  const uint8_t proto = mnl_attr_get_u8(proto_tb.a[CTA_PROTO_NUM]);
  const uint16_t sport = ntohs(mnl_attr_get_u16(proto_tb.a[CTA_PROTO_SRC_PORT]));
  const uint16_t dport = ntohs(mnl_attr_get_u16(proto_tb.a[CTA_PROTO_DST_PORT]));
  CHECK(src == htonl(0xc6336402));  // 198.51.100.2
  CHECK(dst == htonl(0xc6336401));
  CHECK(proto == 17);
  CHECK(sport == 40000);
  CHECK(dport == 8053);
}

TEST_CASE("conntrack filters select by protocol, host port, destination and DNAT target") {
  nft::conntrack::Entry e;
  e.orig = {addr("198.51.100.2"), addr("198.51.100.1"), 17, 40000, 8053};
  e.reply = {addr("203.0.113.5"), addr("198.51.100.2"), 17, 53, 40000};
  nft::conntrack::Filter f;
  f.family = AF_INET;
  f.l4proto = 17;
  f.orig_dport = 8053;
  CHECK(nft::conntrack::matches(f, e));
  f.reply_src = addr("203.0.113.5");
  f.reply_sport = 53;
  CHECK(nft::conntrack::matches(f, e));
  f.reply_src = addr("203.0.113.6");  // another pod's flow
  CHECK_FALSE(nft::conntrack::matches(f, e));
  f.reply_src.reset();
  f.orig_dst = {addr("198.51.100.9")};
  CHECK_FALSE(nft::conntrack::matches(f, e));
  f.orig_dst = {addr("198.51.100.9"), addr("198.51.100.1")};
  CHECK(nft::conntrack::matches(f, e));
  f.l4proto = 6;
  CHECK_FALSE(nft::conntrack::matches(f, e));
}
