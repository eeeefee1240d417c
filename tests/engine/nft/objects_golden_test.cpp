// Golden tests for the nftables objects plumb builds: the expression sequences must be exactly
// what nft(8) 1.0.6 generates for the same rule text in an inet table (the expected lines were
// taken from `nft --debug=netlink -f` of that text), so `nft list` shows them as that text.
// Also the per-network chain names and the batch framing/sequence numbers.
#include <doctest/doctest.h>

#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <arpa/inet.h>
#include <linux/netlink.h>
#include <sys/socket.h>

#include <string>

#include "engine/nft/nfnl.hpp"
#include "engine/nft/nft.hpp"
#include "engine/nft/objects.hpp"

using namespace plumb;

namespace {

IpPrefix pfx(const char* s) {
  auto p = IpPrefix::parse(s);
  REQUIRE(p.has_value());
  return *p;
}

std::string daddr_return(const char* prefix) {
  auto r = nft::obj::daddr_return_rule("plumb", "masq-a", pfx(prefix));
  return nft::obj::expr_text(r.get());
}

}  // namespace

TEST_CASE("ip saddr vmap / ip6 saddr vmap match nft's bytecode") {
  auto r4 = nft::obj::saddr_vmap_rule("plumb", "postrouting", AF_INET, "masq4", 1);
  CHECK(nft::obj::expr_text(r4.get()) ==
        "[ meta load nfproto => reg 1 ]\n"
        "[ cmp eq reg 1 0x00000002 ]\n"
        "[ payload load 4b @ network header + 12 => reg 1 ]\n"
        "[ lookup reg 1 set masq4 dreg 0 ]\n");
  auto r6 = nft::obj::saddr_vmap_rule("plumb", "postrouting", AF_INET6, "masq6", 2);
  CHECK(nft::obj::expr_text(r6.get()) ==
        "[ meta load nfproto => reg 1 ]\n"
        "[ cmp eq reg 1 0x0000000a ]\n"
        "[ payload load 16b @ network header + 8 => reg 1 ]\n"
        "[ lookup reg 1 set masq6 dreg 0 ]\n");
}

TEST_CASE("ip daddr <prefix> return matches nft's bytecode for aligned, unaligned and /0 prefixes") {
  CHECK(daddr_return("192.0.2.0/24") ==
        "[ meta load nfproto => reg 1 ]\n"
        "[ cmp eq reg 1 0x00000002 ]\n"
        "[ payload load 3b @ network header + 16 => reg 1 ]\n"
        "[ cmp eq reg 1 0x000200c0 ]\n"
        "[ immediate reg 0 return ]\n");
  // Host bits are ignored: 192.0.2.200/25 is 192.0.2.128/25.
  CHECK(daddr_return("192.0.2.200/25") ==
        "[ meta load nfproto => reg 1 ]\n"
        "[ cmp eq reg 1 0x00000002 ]\n"
        "[ payload load 4b @ network header + 16 => reg 1 ]\n"
        "[ bitwise reg 1 = ( reg 1 & 0x80ffffff ) ^ 0x00000000 ]\n"
        "[ cmp eq reg 1 0x800200c0 ]\n"
        "[ immediate reg 0 return ]\n");
  CHECK(daddr_return("224.0.0.0/4") ==
        "[ meta load nfproto => reg 1 ]\n"
        "[ cmp eq reg 1 0x00000002 ]\n"
        "[ payload load 4b @ network header + 16 => reg 1 ]\n"
        "[ bitwise reg 1 = ( reg 1 & 0x000000f0 ) ^ 0x00000000 ]\n"
        "[ cmp eq reg 1 0x000000e0 ]\n"
        "[ immediate reg 0 return ]\n");
  CHECK(daddr_return("0.0.0.0/0") ==
        "[ meta load nfproto => reg 1 ]\n"
        "[ cmp eq reg 1 0x00000002 ]\n"
        "[ payload load 4b @ network header + 16 => reg 1 ]\n"
        "[ bitwise reg 1 = ( reg 1 & 0x00000000 ) ^ 0x00000000 ]\n"
        "[ cmp eq reg 1 0x00000000 ]\n"
        "[ immediate reg 0 return ]\n");
  CHECK(daddr_return("2001:db8::/64") ==
        "[ meta load nfproto => reg 1 ]\n"
        "[ cmp eq reg 1 0x0000000a ]\n"
        "[ payload load 8b @ network header + 24 => reg 1 ]\n"
        "[ cmp eq reg 1 0xb80d0120 0x00000000 ]\n"
        "[ immediate reg 0 return ]\n");
  CHECK(daddr_return("ff00::/8") ==
        "[ meta load nfproto => reg 1 ]\n"
        "[ cmp eq reg 1 0x0000000a ]\n"
        "[ payload load 1b @ network header + 24 => reg 1 ]\n"
        "[ cmp eq reg 1 0x000000ff ]\n"
        "[ immediate reg 0 return ]\n");
}

TEST_CASE("masquerade is a single masq expression") {
  auto r = nft::obj::masquerade_rule("plumb", "masq-a");
  CHECK(nft::obj::expr_text(r.get()) == "[ masq ]\n");
}

TEST_CASE("masq_chain_name keeps clean names and hashes changed or long ones") {
  CHECK(nft::masq_chain_name("net1") == "masq-net1");
  CHECK(nft::masq_chain_name("My_Net-2") == "masq-My_Net-2");

  const std::string dotted = nft::masq_chain_name("kube-system/br.net");
  CHECK(dotted.starts_with("masq-kube-system_br_net-"));
  CHECK(dotted.size() == std::string("masq-kube-system_br_net-").size() + 8);
  // Two names that sanitise to the same text still get different chains.
  CHECK(nft::masq_chain_name("a.b") != nft::masq_chain_name("a/b"));
  CHECK(nft::masq_chain_name("a.b") == nft::masq_chain_name("a.b"));

  const std::string exact(200, 'x');
  CHECK(nft::masq_chain_name(exact) == "masq-" + exact);
  const std::string longer(201, 'x');
  const std::string hashed = nft::masq_chain_name(longer);
  CHECK(hashed.size() == 5 + 200);
  CHECK(hashed.starts_with("masq-" + std::string(191, 'x') + "-"));
  for (char c : hashed.substr(5)) {
    CHECK(((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'));
  }
}

TEST_CASE("a batch is BEGIN, the messages with consecutive sequence numbers and ACK, END") {
  nft::nfnl::Batch b(1000);
  auto t = nft::obj::table("plumb");
  CHECK(b.add_table(NFT_MSG_NEWTABLE, NLM_F_CREATE, t.get(), "create table") == 0);
  auto c = nft::obj::chain("plumb", "masq-a");
  CHECK(b.add_chain(NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, c.get(), "create chain") == 1);
  REQUIRE(b.finish().has_value());
  CHECK(b.seq_of(0) == 1001);
  CHECK(b.end_seq() == 1003);

  struct Want {
    uint16_t type;
    uint16_t flags;
    uint32_t seq;
  };
  const Want want[] = {
      {NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, 1000},
      {(NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWTABLE, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE, 1001},
      {(NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWCHAIN, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, 1002},
      {NFNL_MSG_BATCH_END, NLM_F_REQUEST, 1003},
  };
  int rest = static_cast<int>(b.size());
  const auto* nlh = static_cast<const nlmsghdr*>(b.data());
  size_t i = 0;
  for (; mnl_nlmsg_ok(nlh, rest); nlh = mnl_nlmsg_next(nlh, &rest), ++i) {
    REQUIRE(i < 4);
    CAPTURE(i);
    CHECK(nlh->nlmsg_type == want[i].type);
    CHECK(nlh->nlmsg_flags == want[i].flags);
    CHECK(nlh->nlmsg_seq == want[i].seq);
    const auto* gen = static_cast<const nfgenmsg*>(mnl_nlmsg_get_payload(nlh));
    if (i == 0 || i == 3) {
      CHECK(gen->nfgen_family == AF_UNSPEC);
      CHECK(ntohs(gen->res_id) == NFNL_SUBSYS_NFTABLES);
    } else {
      CHECK(gen->nfgen_family == NFPROTO_INET);
    }
  }
  CHECK(i == 4);
  CHECK(rest == 0);
}

TEST_CASE("to_error names the failed message and maps missing features to kKernelFeature") {
  nft::nfnl::Batch b(1);
  auto t = nft::obj::table("plumb");
  b.add_table(NFT_MSG_NEWTABLE, NLM_F_CREATE, t.get(), "create table inet plumb");
  auto r = nft::obj::masquerade_rule("plumb", "masq-a");
  b.add_rule(NFT_MSG_NEWRULE, NLM_F_CREATE, r.get(), "add rule masquerade", "no nft_masq");
  REQUIRE(b.finish().has_value());

  nft::nfnl::Outcome out;
  out.acks = {{true, 0, ""}, {true, ENOENT, "unknown expression"}};
  Error e = nft::nfnl::to_error(b, out);
  CHECK(e.cni_code == cni_code::kKernelFeature);
  CHECK(e.sys_errno == ENOENT);
  CHECK(e.msg.find("add rule masquerade") != std::string::npos);
  CHECK(e.msg.find("no nft_masq") != std::string::npos);
  CHECK(e.details == "unknown expression");

  out.acks = {{true, EPERM, "denied"}, {true, 0, ""}};
  e = nft::nfnl::to_error(b, out);
  CHECK(e.cni_code == cni_code::kKernel);
  CHECK(e.sys_errno == EPERM);
  CHECK(e.msg.find("create table inet plumb") != std::string::npos);

  out.acks = {{false, 0, ""}, {false, 0, ""}};
  out.batch_err = EOPNOTSUPP;
  e = nft::nfnl::to_error(b, out);
  CHECK(e.cni_code == cni_code::kKernelFeature);
  CHECK(e.msg.find("nf_tables") != std::string::npos);
}
