// Policy routing rules (engine/kernel/rule) and routes of every table against the real kernel,
// inside a private node namespace per case; state read back independently with `ip -j rule`.
#include <doctest/doctest.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <algorithm>
#include <string>

#include "engine/kernel/route.hpp"
#include "engine/kernel/rule.hpp"
#include "engine/netlink/socket.hpp"
#include "tests/engine/netlink/require_ok.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;
using plumb::test::Node;
using plumb::test::Proc;
using plumb::test::sh;

TEST_CASE("rule: from <addr> lookup <table> is added (the kernel picks the priority), listed, refused twice, removed once") {
  Node node;
  auto nl = netlink::Socket::open();
  REQUIRE_OK(nl);
  for (const char* src : {"192.0.2.5/32", "2001:db8::5/128"}) {
    INFO(src);
    auto p = IpPrefix::parse(src);
    REQUIRE_OK(p);
    rule::Rule r{*p, 4242};
    REQUIRE_OK(rule::add(*nl, r));
    const std::string family = p->addr.is_v4() ? "-4" : "-6";
    Proc shown = sh("ip " + family + " rule show");
    CHECK(shown.out.find("from " + p->addr.str() + " lookup 4242") != std::string::npos);
    auto listed = rule::list(*nl, p->addr.family);
    REQUIRE_OK(listed);
    auto it = std::find_if(listed->begin(), listed->end(), [&](const rule::Rule& x) { return x.src == *p && x.table == 4242; });
    REQUIRE(it != listed->end());
    CHECK(it->priority != 0);  // chosen by the kernel
    auto again = rule::add(*nl, rule::Rule{*p, 4242, it->priority});
    REQUIRE_FALSE(again);
    CHECK(again.error().cni_code == cni_code::kConflict);
    auto removed = rule::remove(*nl, r);
    REQUIRE_OK(removed);
    CHECK(*removed);
    auto gone = rule::remove(*nl, r);
    REQUIRE_OK(gone);
    CHECK_FALSE(*gone);
    CHECK(sh("ip " + family + " rule show").out.find("lookup 4242") == std::string::npos);
  }
}

TEST_CASE("route: list with kAllTables returns routes of every table, a table id filters") {
  Node node;
  REQUIRE(sh("ip link add d0 type veth peer name d1 && ip link set d0 up && ip route add blackhole 198.51.100.0/24 table 777 && "
             "ip route add 192.0.2.0/24 dev d0 table 778").exit_code == 0);
  auto nl = netlink::Socket::open();
  REQUIRE_OK(nl);
  auto all = route::list(*nl, AF_INET, route::kAllTables);
  REQUIRE_OK(all);
  auto in = [&](uint32_t table, const char* dst) {
    return std::any_of(all->begin(), all->end(), [&](const route::Route& r) { return r.table == table && r.dst.str() == dst; });
  };
  CHECK(in(777, "198.51.100.0/24"));
  CHECK(in(778, "192.0.2.0/24"));
  auto one = route::list(*nl, AF_INET, 778);
  REQUIRE_OK(one);
  REQUIRE(one->size() == 1);
  CHECK((*one)[0].dst.str() == "192.0.2.0/24");
}
