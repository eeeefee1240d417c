// engine/base/netns against the real kernel, inside a private node namespace per case: the Guard
// that returns a thread to its namespace, and the file type check of open.
#include "engine/base/netns.hpp"

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

#include "engine/kernel/addr.hpp"
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

TEST_CASE("netns: Guard returns to the original namespace; open checks the file type") {
  plumb::test::Node node;
  std::string pod = node.add_netns("pod1");
  netns::Netns ns = open_ns(pod);
  auto start = netns::Netns::current();
  REQUIRE_OK(start);
  CHECK(start->inode() != ns.inode());
  {
    auto g = netns::Guard::enter(ns);
    REQUIRE_OK(g);
    auto inside = netns::Netns::current();
    REQUIRE_OK(inside);
    CHECK(inside->inode() == ns.inode());
    // Moving the guard keeps one return, at the end of the new owner's life.
    netns::Guard moved(std::move(*g));
    auto still = netns::Netns::current();
    REQUIRE_OK(still);
    CHECK(still->inode() == ns.inode());
  }
  auto end = netns::Netns::current();
  REQUIRE_OK(end);
  CHECK(end->inode() == start->inode());

  auto dupd = netns::Netns::from_fd(ns.fd());
  REQUIRE_OK(dupd);
  CHECK(dupd->inode() == ns.inode());
  CHECK(dupd->fd() != ns.fd());

  auto missing = netns::Netns::open("/run/netns/nosuch");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().sys_errno == ENOENT);
  CHECK(missing.error().msg.find("/run/netns/nosuch") != std::string::npos);
  auto uts = netns::Netns::open("/proc/self/ns/uts");
  REQUIRE_FALSE(uts);
  CHECK(uts.error().sys_errno == EINVAL);
  auto regular = netns::Netns::open("/proc/self/status");
  REQUIRE_FALSE(regular);
  CHECK(regular.error().sys_errno == EINVAL);
}
