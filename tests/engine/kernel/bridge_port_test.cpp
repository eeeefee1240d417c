// Bridge-port VLAN messages (engine/kernel/bridge_port.hpp): golden bytes written by hand from the
// UAPI layouts (linux/if_bridge.h, linux/rtnetlink.h), and [kernel] this machine's kernel, which
// has no bridge VLAN filtering, answering them with a feature error while port isolation works.
// With VLAN filtering (Debian's kernel) they are exercised by full-kernel/drivers/bridge.
#include <doctest/doctest.h>

#include "engine/kernel/bridge_port.hpp"
#include "engine/kernel/link.hpp"
#include "tests/support/full_kernel.hpp"
#include "tests/support/golden.hpp"

using namespace plumb;
using plumb::test::Bytes;
using plumb::test::check_bytes;

TEST_CASE("golden: VLAN 100 as PVID untagged on bridge port 7, and its removal (bridge vlan add/del ... master)") {
  const Bytes add = {
      // nlmsghdr: len 52, RTM_SETLINK (19), REQUEST
      0x34, 0x00, 0x00, 0x00, 0x13, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // ifinfomsg: AF_BRIDGE (7), index 7
      0x07, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // IFLA_AF_SPEC (26|NESTED = 0x801a) len 20
      0x14, 0x00, 0x1a, 0x80,
      //   IFLA_BRIDGE_FLAGS (0) u16 BRIDGE_FLAGS_MASTER (1) + 2 pad
      0x06, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
      //   IFLA_BRIDGE_VLAN_INFO (2) { u16 flags PVID|UNTAGGED = 6, u16 vid 100 }
      0x08, 0x00, 0x02, 0x00, 0x06, 0x00, 0x64, 0x00,
  };
  check_bytes(bridge_port::build_port_vlan(7, {100, true, true}, true).bytes(), add);
  Bytes del = add;
  del[4] = 0x11;  // RTM_DELLINK (17)
  del[48] = 0x00;  // no flags
  del[50] = 0x01;  // vid 1
  check_bytes(bridge_port::build_port_vlan(7, {1, false, false}, false).bytes(), del);
}

TEST_CASE("[kernel] port VLANs on this kernel: a clear feature error without VLAN filtering; isolation is set") {
  plumb::test::Node node;
  auto nl = netlink::Socket::open();
  REQUIRE(nl);
  REQUIRE(plumb::test::sh("ip link add brp0 type bridge && ip link add prt0 type veth peer name prt1 && "
                          "ip link set prt0 master brp0").exit_code == 0);
  auto port = link::get(*nl, std::string("prt0"));
  REQUIRE(port);
  REQUIRE(port->has_value());
  const int index = (*port)->index;
  auto st = bridge_port::add_vlan(*nl, index, {100, true, true});
  if (plumb::test::kernel_can_create("type bridge vlan_filtering 1")) {
    MESSAGE("this kernel has bridge VLAN filtering: the VLAN is added and read back");
    REQUIRE(st);
    auto v = bridge_port::vlans(*nl, index);
    REQUIRE(v);
    CHECK(std::find(v->begin(), v->end(), bridge_port::PortVlan{100, true, true}) != v->end());
  } else {
    REQUIRE_FALSE(st);
    CHECK(st.error().cni_code == cni_code::kKernelFeature);
    CHECK(st.error().text().find("add VLAN vid 100 pvid untagged to bridge port index") != std::string::npos);
    auto v = bridge_port::vlans(*nl, index);
    REQUIRE(v);
    CHECK(v->empty());
  }
  REQUIRE(bridge_port::set_isolated(*nl, index, true));
  auto d = plumb::test::link_detail("", "prt0");
  CHECK(d["linkinfo"]["info_slave_data"]["isolated"].GetBool());
}
