// engine/kernel/route against the real kernel, inside a private node namespace per case: routes
// added, listed and removed, default routes via a gateway among them. Kernel state is checked
// independently through iproute2 (`ip -j ...`).
#include "engine/kernel/route.hpp"

#include <doctest/doctest.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <string>
#include <vector>

#include "engine/base/netns.hpp"
#include "engine/kernel/addr.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/netconf.hpp"
#include "engine/kernel/sysctl.hpp"
#include "engine/netlink/socket.hpp"
#include "tests/engine/kernel/kernel_helpers.hpp"
#include "tests/engine/netlink/require_ok.hpp"
#include "tests/support/literals.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;
using namespace plumb::test::kernel;

namespace {

/// The routes the case adds on `idx` (192.0.2.10/24 and 2001:db8::10/64): the IPv4 and IPv6
/// defaults via a gateway, a link-scope route with metric and preferred source, and a route in
/// table 100 with an MTU metric.
struct Routes {
  route::Route def4, lnk, def6, t100;
};

Routes add_routes(netlink::Socket& nl, int idx) {
  Routes rs;
  rs.def4.dst = prefix("0.0.0.0/0");
  rs.def4.gw = ip("192.0.2.1");
  rs.def4.oif = idx;
  REQUIRE_OK(route::add(nl, rs.def4));

  rs.lnk.dst = prefix("198.51.100.0/24");
  rs.lnk.oif = idx;
  rs.lnk.priority = 50;
  rs.lnk.prefsrc = ip("192.0.2.10");
  REQUIRE_OK(route::add(nl, rs.lnk));

  rs.def6.dst = prefix("::/0");
  rs.def6.gw = ip("2001:db8::1");
  rs.def6.oif = idx;
  REQUIRE_OK(route::add(nl, rs.def6));

  rs.t100.dst = prefix("203.0.113.0/24");
  rs.t100.oif = idx;
  rs.t100.table = 100;
  rs.t100.mtu_bytes = 1400;
  REQUIRE_OK(route::add(nl, rs.t100));
  return rs;
}

/// The routes of add_routes as iproute2 lists them.
void check_iproute2_view() {
  auto d = plumb::test::ip_json("route show default");
  REQUIRE(d.Size() == 1);
  CHECK(str(d[0], "gateway") == "192.0.2.1");
  CHECK(str(d[0], "dev") == "r0");
  auto l = plumb::test::ip_json("route show 198.51.100.0/24");
  REQUIRE(l.Size() == 1);
  CHECK(str(l[0], "scope") == "link");
  CHECK(str(l[0], "prefsrc") == "192.0.2.10");
  CHECK(l[0]["metric"].GetInt() == 50);
  auto d6 = plumb::test::ip_json("-6 route show default");
  REQUIRE(d6.Size() == 1);
  CHECK(str(d6[0], "gateway") == "2001:db8::1");
  auto t = plumb::test::ip_json("route show table 100");
  REQUIRE(t.Size() == 1);
  CHECK(str(t[0], "dst") == "203.0.113.0/24");
  CHECK(t[0]["metrics"][0]["mtu"].GetInt() == 1400);
}

/// The routes of add_routes as route::list reads them back, per table and family.
void check_listed(netlink::Socket& nl, int idx) {
  auto main4 = route::list(nl, AF_INET);
  REQUIRE_OK(main4);
  auto find = [](const std::vector<route::Route>& v, const std::string& dst) -> const route::Route* {
    for (const auto& r : v) {
      if (r.dst.str() == dst) return &r;
    }
    return nullptr;
  };
  const route::Route* gd = find(*main4, "0.0.0.0/0");
  REQUIRE(gd != nullptr);
  REQUIRE(gd->gw);
  CHECK(gd->gw->str() == "192.0.2.1");
  CHECK(gd->oif == idx);
  CHECK(gd->is_default());
  const route::Route* gl = find(*main4, "198.51.100.0/24");
  REQUIRE(gl != nullptr);
  CHECK_FALSE(gl->gw);
  CHECK(gl->scope == RT_SCOPE_LINK);
  CHECK(gl->priority == 50);
  REQUIRE(gl->prefsrc);
  CHECK(gl->prefsrc->str() == "192.0.2.10");
  CHECK(find(*main4, "192.0.2.0/24") != nullptr);    // the kernel's prefix route
  CHECK(find(*main4, "203.0.113.0/24") == nullptr);  // other table
  for (const auto& r : *main4) CHECK(r.table == RT_TABLE_MAIN);

  auto tab = route::list(nl, AF_INET, 100);
  REQUIRE_OK(tab);
  REQUIRE(tab->size() == 1);
  CHECK((*tab)[0].dst.str() == "203.0.113.0/24");
  CHECK((*tab)[0].mtu_bytes == 1400);
  CHECK((*tab)[0].table == 100);

  auto main6 = route::list(nl, AF_INET6);
  REQUIRE_OK(main6);
  const route::Route* gd6 = find(*main6, "::/0");
  REQUIRE(gd6 != nullptr);
  CHECK(gd6->gw->str() == "2001:db8::1");
}

}  // namespace

TEST_CASE("routes: add, list and remove, including default routes via a gateway") {
  plumb::test::Node node;
  netlink::Socket nl = open_socket();
  make_veth(nl, "r0", "r1");
  set_up(nl, "r0");
  set_up(nl, "r1");
  int idx = must_get(nl, "r0").index;
  REQUIRE_OK(addr::add(nl, idx, prefix("192.0.2.10/24")));
  REQUIRE_OK(addr::add(nl, idx, prefix("2001:db8::10/64"), true));
  const Routes rs = add_routes(nl, idx);
  check_iproute2_view();
  check_listed(nl, idx);

  // Duplicates and removal.
  auto dup = route::add(nl, rs.def4);
  REQUIRE_FALSE(dup);
  CHECK(dup.error().sys_errno == EEXIST);
  for (const route::Route* r : {&rs.def4, &rs.lnk, &rs.def6, &rs.t100}) {
    INFO(r->dst.str());
    auto rm = route::remove(nl, *r);
    REQUIRE_OK(rm);
    CHECK(*rm);
    auto rm2 = route::remove(nl, *r);
    REQUIRE_OK(rm2);
    CHECK_FALSE(*rm2);
  }
  CHECK(plumb::test::ip_json("route show default").Size() == 0);
  CHECK(plumb::test::ip_json("-6 route show default").Size() == 0);
  CHECK(plumb::test::ip_json("route show table 100").Size() == 0);
  CHECK(plumb::test::ip_json("route show 198.51.100.0/24").Size() == 0);
}
