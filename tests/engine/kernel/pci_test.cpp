// PCI devices in sysfs (engine/kernel/pci.hpp): the VF lookup in a fake sysfs tree ([fake sysfs]:
// tests/support/sriov_fakes.hpp, under a scratch directory) and PCI address validation. Nothing
// here needs privileges or touches a network namespace.
#include <doctest/doctest.h>

#include "engine/kernel/pci.hpp"
#include "tests/support/sriov_fakes.hpp"
#include "tests/support/temp_dir.hpp"

using namespace plumb;
using namespace plumb::pci;

TEST_CASE("[fake sysfs] sysfs: VF index, PF, driver, netdev and RDMA device from a fake tree; clear errors otherwise") {
  test::TempDir t;
  test::FakeSysfs fs(t.path + "/sys");
  fs.add_pf("0000:03:00.0", "pf0", 4);
  fs.add_vf("0000:03:00.0", 0, "0000:03:00.2", "iavf", "vf0");
  fs.add_vf("0000:03:00.0", 3, "0000:03:00.5", "mlx5_core", "ib3", "mlx5_5");
  fs.add_vf("0000:03:00.0", 1, "0000:03:00.3", "vfio-pci");
  auto v = lookup_device(fs.root(), "0000:03:00.5", true, "net.deviceID");
  REQUIRE(v);
  CHECK(v->vf_index == 3);
  CHECK(v->pf_pci == "0000:03:00.0");
  CHECK(v->pf_netdev == "pf0");
  CHECK(v->driver == "mlx5_core");
  CHECK(v->netdev == "ib3");
  CHECK(v->rdma_device == "mlx5_5");
  CHECK_FALSE(v->userspace());
  auto u = lookup_device(fs.root(), "0000:03:00.3", true, "net.deviceID");
  REQUIRE(u);
  CHECK(u->userspace());
  CHECK(u->netdev.empty());

  auto missing = lookup_device(fs.root(), "0000:03:00.7", true, "net.deviceID");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().cni_code == cni_code::kNotFound);
  auto pf = lookup_device(fs.root(), "0000:03:00.0", true, "net.deviceID");
  REQUIRE_FALSE(pf);
  CHECK(pf.error().msg.find("not an SR-IOV VF") != std::string::npos);
  auto bad = lookup_device(fs.root(), "03:00.2", true, "net.deviceID");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().msg.find("\"03:00.2\" is not a PCI address") != std::string::npos);

  // A VF index beyond sriov_numvfs is refused.
  fs.add_vf("0000:03:00.0", 5, "0000:03:00.7", "iavf", "vf5");
  auto beyond = lookup_device(fs.root(), "0000:03:00.7", true, "net.deviceID");
  REQUIRE_FALSE(beyond);
  CHECK(beyond.error().msg.find("sriov_numvfs") != std::string::npos);
}

TEST_CASE("PCI addresses: domain:bus:device.function") {
  CHECK(valid_pci_address("0000:03:00.2"));
  CHECK(valid_pci_address("0000:af:1f.7"));
  CHECK_FALSE(valid_pci_address("0000:03:20.0"));
  CHECK_FALSE(valid_pci_address("0000:03:00.8"));
  CHECK_FALSE(valid_pci_address("0000:03:00"));
  CHECK_FALSE(valid_pci_address("../../etc/x"));
}
