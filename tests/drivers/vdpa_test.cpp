// The vdpa driver (drivers/vdpa.cpp) called in-process, each case in a fresh private node: the
// vDPA listing is a fake ([fake vdpa]) because this kernel has no vdpa family; a virtio_vdpa
// device's netdev is a real veth end in the node namespace ([kernel netdevs]); the sysfs tree is a
// fake one per case (tests/support/vf_harness.hpp).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "tests/support/pod_fixture.hpp"
#include "tests/support/vf_harness.hpp"

using namespace plumb;
using namespace plumb::test;
using namespace plumb::vf;
using plumb::drivers::vf_attach::read_allocation;

TEST_CASE("[fake vdpa] vhost_vdpa device: found by its VF's PCI address, nothing moves, /dev/vhost-vdpa-N in device-info") {
  Node node;
  Bench b(node);
  vdpa_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "net4", "pod1");
  a.with_device_info("mellanox.com/vdpa", "0000:65:00.2");
  auto r = a.add("vdpa", vdpa_conf("0000:65:00.2", b.ipam("203.0.113.0/24")));
  INFO((r ? std::string() : r.error().text()));
  REQUIRE(r);
  CHECK(r->interfaces[0].pci_id == "0000:65:00.2");
  CHECK(r->ips.size() == 1);
  CHECK_FALSE(ip_link("pod1", "net4"));
  CHECK(test::read_file(a.plan.file) ==
        R"({"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpa0","driver":"vhost","path":"/dev/vhost-vdpa-0","pci-address":"0000:65:00.2","pf-pci-address":"0000:65:00.0"}})");
  CHECK((*read_allocation(b.state(), "0000:65:00.2"))->mode == "vhost");
  REQUIRE(a.unwind(true));
  CHECK_FALSE(read_allocation(b.state(), "0000:65:00.2")->has_value());
  CHECK(b.pf.log.empty());
}

TEST_CASE("[kernel netdevs, fake vdpa] virtio_vdpa device: its virtio netdev moves into the pod like a VF and comes back") {
  Node node;
  Bench b(node);
  vdpa_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "net5", "pod1");
  auto r = a.add("vdpa", R"({"cniVersion":"1.1.0","name":"vdpa-net","type":"vdpa","deviceID":"0000:65:00.3","mtu":1400,"ipam":)" +
                             b.ipam("203.0.113.0/24") + "}");
  INFO((r ? std::string() : r.error().text()));
  REQUIRE(r);
  auto l = ip_link("pod1", "net5");
  REQUIRE(l);
  CHECK(l->mac == "02:cc:00:00:00:01");
  CHECK(l->mtu == 1400);
  CHECK(l->up);
  CHECK_FALSE(ip_link("", "vdnet1"));
  REQUIRE(a.unwind(true));
  auto back = ip_link("", "vdnet1");
  REQUIRE(back);
  CHECK(back->mtu == 1500);
  CHECK_FALSE(ip_link("pod1", "net5"));
}

TEST_CASE("[fake vdpa] a VF without a vDPA device, and an unbound vDPA device, are clear errors") {
  Node node;
  Bench b(node);
  vdpa_tree(b);
  node.add_netns("pod1");
  b.vdpa.devices = {{"vdpa1", "pci", "0000:65:00.3"}};
  Att a(b, "ctr1", "net4", "pod1");
  auto r = a.add("vdpa", vdpa_conf("0000:65:00.2", b.ipam("203.0.113.0/24")));
  REQUIRE_FALSE(r);
  CHECK(r.error().cni_code == cni_code::kNotFound);
  CHECK(r.error().msg.find("no vDPA device has PCI device 0000:65:00.2") != std::string::npos);
  std::filesystem::remove(b.sys.root() + "/bus/pci/devices/0000:65:00.3/vdpa1/driver");
  auto u = a.add("vdpa", vdpa_conf("0000:65:00.3", b.ipam("203.0.113.0/24")));
  REQUIRE_FALSE(u);
  CHECK(u.error().msg.find("bound to no driver") != std::string::npos);
}
