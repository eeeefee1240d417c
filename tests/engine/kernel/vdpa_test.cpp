// vDPA (engine/kernel/vdpa.hpp): golden bytes of VDPA_CMD_DEV_GET and the nlctrl family request,
// parsing a DEV_GET reply (no privileges), a device's binding read from a fake sysfs tree
// ([fake sysfs]), and [kernel] this machine's kernel, which has no "vdpa" generic netlink family,
// giving a clear error (in a fresh private node namespace).
#include <doctest/doctest.h>
#include <linux/genetlink.h>

#include <vector>

#include "engine/kernel/vdpa.hpp"
#include "tests/support/golden.hpp"
#include "tests/support/private_node.hpp"
#include "tests/support/sriov_fakes.hpp"
#include "tests/support/temp_dir.hpp"

using namespace plumb;
using plumb::test::Bytes;
using plumb::test::check_bytes;
using plumb::test::Node;

TEST_CASE("golden: vdpa VDPA_CMD_DEV_GET dump and the nlctrl CTRL_CMD_GETFAMILY \"vdpa\" request") {
  const Bytes dev_get = {
      // nlmsghdr: len 20, type = the family id (0x1f here), REQUEST|DUMP
      0x14, 0x00, 0x00, 0x00, 0x1f, 0x00, 0x01, 0x03, 0, 0, 0, 0, 0, 0, 0, 0,
      // genlmsghdr: cmd VDPA_CMD_DEV_GET (5), version VDPA_GENL_VERSION (1), reserved 0
      0x05, 0x01, 0x00, 0x00};
  check_bytes(vdpa::build_dev_get_dump(0x1f).bytes(), dev_get);
  const Bytes family = {
      // nlmsghdr: len 32, GENL_ID_CTRL (0x10), REQUEST
      0x20, 0x00, 0x00, 0x00, 0x10, 0x00, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0,
      // genlmsghdr: CTRL_CMD_GETFAMILY (3), version 1
      0x03, 0x01, 0x00, 0x00,
      // CTRL_ATTR_FAMILY_NAME (2) len 9 "vdpa\0" + 3 pad
      0x09, 0x00, 0x02, 0x00, 'v', 'd', 'p', 'a', 0x00, 0x00, 0x00, 0x00};
  check_bytes(vdpa::build_get_family("vdpa").bytes(), family);
}

TEST_CASE("parse: a VDPA_CMD_DEV_GET reply names the device and its PCI management device") {
  netlink::Message m(0x1f, 0);
  auto* g = m.put_header<genlmsghdr>();
  g->cmd = 5;
  m.put_str(1, "pci");           // VDPA_ATTR_MGMTDEV_BUS_NAME
  m.put_str(2, "0000:65:00.2");  // VDPA_ATTR_MGMTDEV_DEV_NAME
  m.put_str(4, "vdpa0");         // VDPA_ATTR_DEV_NAME
  auto d = vdpa::parse_device(m.header());
  REQUIRE(d);
  CHECK(d->name == "vdpa0");
  CHECK(d->mgmt_bus == "pci");
  CHECK(d->mgmt_dev == "0000:65:00.2");
  std::vector<vdpa::Device> all = {{"vdpa9", "", "vdpasim_net"}, *d};
  CHECK(vdpa::find_by_pci(all, "0000:65:00.2")->name == "vdpa0");
  CHECK_FALSE(vdpa::find_by_pci(all, "0000:65:00.3").has_value());
}

TEST_CASE("[fake sysfs] sysfs: a vDPA device's binding: vhost_vdpa gives /dev/vhost-vdpa-N, virtio_vdpa the netdev") {
  test::TempDir t;
  test::FakeSysfs fs(t.path + "/sys");
  fs.add_pf("0000:65:00.0", "pf0", 2);
  fs.add_vf("0000:65:00.0", 0, "0000:65:00.2", "mlx5_core");
  fs.add_vf("0000:65:00.0", 1, "0000:65:00.3", "mlx5_core");
  fs.add_vdpa("vdpa0", "0000:65:00.2", "vhost_vdpa", 4);
  fs.add_vdpa("vdpa1", "0000:65:00.3", "virtio_vdpa", 1, "eth7");
  auto vh = vdpa::read_binding(fs.root(), "vdpa0");
  REQUIRE(vh);
  CHECK(vh->driver == "vhost_vdpa");
  CHECK(vh->vhost_path == "/dev/vhost-vdpa-4");
  auto vi = vdpa::read_binding(fs.root(), "vdpa1");
  REQUIRE(vi);
  CHECK(vi->driver == "virtio_vdpa");
  CHECK(vi->netdev == "eth7");
  CHECK_FALSE(vdpa::read_binding(fs.root(), "vdpa7"));
}

TEST_CASE("[kernel] this kernel has no \"vdpa\" generic netlink family: the listing fails clearly") {
  Node node;
  vdpa::GenlLister lister;
  auto l = lister.list();
  REQUIRE_FALSE(l);
  CHECK(l.error().cni_code == cni_code::kKernelFeature);
  CHECK(l.error().msg.find("no \"vdpa\" generic netlink family") != std::string::npos);
  // The resolver itself works: nlctrl knows itself.
  auto genl = netlink::Socket::open(NETLINK_GENERIC);
  REQUIRE(genl);
  auto id = vdpa::resolve_family(*genl, "nlctrl");
  REQUIRE(id);
  CHECK(*id == 0x10);
}
