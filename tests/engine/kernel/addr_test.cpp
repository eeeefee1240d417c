// engine/kernel/addr against the real kernel, inside a private node namespace per case: IPv4 and
// IPv6 addresses added, listed and removed. Kernel state is checked independently through iproute2
// (`ip -j ...`).
#include "engine/kernel/addr.hpp"

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
#include "engine/kernel/link.hpp"
#include "engine/kernel/netconf.hpp"
#include "engine/kernel/route.hpp"
#include "engine/kernel/sysctl.hpp"
#include "engine/netlink/socket.hpp"
#include "tests/engine/kernel/kernel_helpers.hpp"
#include "tests/engine/netlink/require_ok.hpp"
#include "tests/support/literals.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;
using namespace plumb::test::kernel;

TEST_CASE("addresses: add, list and remove IPv4 and IPv6 (nodad visible to iproute2)") {
  plumb::test::Node node;
  netlink::Socket nl = open_socket();
  make_veth(nl, "a0", "a1");
  set_up(nl, "a0");
  set_up(nl, "a1");
  int idx = must_get(nl, "a0").index;

  REQUIRE_OK(addr::add(nl, idx, prefix("192.0.2.10/24")));
  REQUIRE_OK(addr::add(nl, idx, prefix("2001:db8::10/64"), true));

  auto j = plumb::test::ip_json("addr show dev a0");
  bool saw4 = false, saw6 = false;
  for (const auto& a : j[0]["addr_info"].GetArray()) {
    std::string local = a["local"].GetString();
    if (local == "192.0.2.10") {
      saw4 = true;
      CHECK(a["prefixlen"].GetInt() == 24);
      CHECK(str(a, "broadcast") == "192.0.2.255");
    }
    if (local == "2001:db8::10") {
      saw6 = true;
      CHECK(a["prefixlen"].GetInt() == 64);
      CHECK(a.HasMember("nodad"));
      CHECK(a["nodad"].GetBool());
      CHECK_FALSE(a.HasMember("tentative"));
    }
  }
  CHECK(saw4);
  CHECK(saw6);

  auto v4 = addr::list(nl, idx, AF_INET);
  REQUIRE_OK(v4);
  REQUIRE(v4->size() == 1);
  CHECK((*v4)[0].prefix.str() == "192.0.2.10/24");
  CHECK((*v4)[0].index == idx);
  CHECK((*v4)[0].scope == RT_SCOPE_UNIVERSE);

  auto v6 = addr::list(nl, idx, AF_INET6);
  REQUIRE_OK(v6);
  auto it =
      std::find_if(v6->begin(), v6->end(), [](const addr::AddrInfo& a) { return a.prefix.str() == "2001:db8::10/64"; });
  REQUIRE(it != v6->end());
  CHECK((it->flags & IFA_F_NODAD) != 0);
  for (const auto& a : *v6) CHECK(a.prefix.addr.family == AF_INET6);

  auto all = addr::list(nl);
  REQUIRE_OK(all);
  std::set<std::string> seen;
  for (const auto& a : *all) seen.insert(a.prefix.str());
  CHECK(seen.count("127.0.0.1/8") == 1);  // lo, another link
  CHECK(seen.count("192.0.2.10/24") == 1);
  CHECK(seen.count("2001:db8::10/64") == 1);

  auto dup = addr::add(nl, idx, prefix("192.0.2.10/24"));
  REQUIRE_FALSE(dup);
  CHECK(dup.error().sys_errno == EEXIST);
  CHECK(dup.error().cni_code == cni_code::kConflict);

  for (const char* p : {"192.0.2.10/24", "2001:db8::10/64"}) {
    INFO(p);
    auto rm = addr::remove(nl, idx, prefix(p));
    REQUIRE_OK(rm);
    CHECK(*rm);
    auto rm2 = addr::remove(nl, idx, prefix(p));
    REQUIRE_OK(rm2);
    CHECK_FALSE(*rm2);
  }
  j = plumb::test::ip_json("addr show dev a0");
  for (const auto& a : j[0]["addr_info"].GetArray()) {
    std::string local = a["local"].GetString();
    CHECK(local != "192.0.2.10");
    CHECK(local != "2001:db8::10");
  }
}
