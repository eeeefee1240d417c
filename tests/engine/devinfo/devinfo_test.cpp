// Device information (engine/devinfo/devinfo.hpp; NPWG standard 5.3.8, device-info spec 1.1.0): the
// pci and vdpa documents, file names, validation, write-once files with mode 0444, completion,
// removal, and planning which plugin gets CNIDeviceInfoFile. Files live in a scratch directory;
// nothing here needs privileges or touches a network namespace.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "engine/base/json.hpp"
#include "engine/devinfo/devinfo.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/temp_dir.hpp"

using namespace plumb;

TEST_CASE("device-info: pci and vdpa documents have the spec's keys, in order, empty ones omitted") {
  devinfo::PciInfo p;
  p.pci_address = "0000:03:00.2";
  p.pf_pci_address = "0000:03:00.0";
  p.rdma_device = "mlx5_2";
  CHECK(json::dump(devinfo::make_pci(p)) ==
        R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.2","rdma-device":"mlx5_2","pf-pci-address":"0000:03:00.0"}})");
  devinfo::VdpaInfo v;
  v.parent_device = "vdpa0";
  v.driver = "vhost";
  v.path = "/dev/vhost-vdpa-0";
  v.pci_address = "0000:65:00.2";
  v.pf_pci_address = "0000:65:00.0";
  CHECK(json::dump(devinfo::make_vdpa(v)) ==
        R"({"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpa0","driver":"vhost","path":"/dev/vhost-vdpa-0","pci-address":"0000:65:00.2","pf-pci-address":"0000:65:00.0"}})");
}

TEST_CASE("device-info: file names as the spec gives them (resource name '/' becomes '-')") {
  CHECK(devinfo::dp_file("/var/run/k8s.cni.cncf.io/devinfo", "intel.com/sriov_net", "0000:03:00.2") ==
        "/var/run/k8s.cni.cncf.io/devinfo/dp/intel.com-sriov_net-0000:03:00.2-device.json");
  CHECK(devinfo::cni_file("/b", "ctr1", "net1") == "/b/cni/ctr1-net1-device.json");
}

TEST_CASE("device-info: validation names the problem") {
  for (const char* bad : {R"([])", R"({"version":"1.1.0","pci":{}})", R"({"type":"usb","version":"1.1.0"})",
                          R"({"type":"pci","version":"1.1.0"})", R"({"type":"pci","version":"1.1.0","pci":{"vhost-net":"/dev/vhost-net"}})"}) {
    auto d = json::parse(bad, "t");
    REQUIRE(d);
    INFO(bad);
    CHECK_FALSE(devinfo::validate(*d, "x"));
  }
}

TEST_CASE("device-info: the file is written once with mode 0444; completion adds only missing keys; removal is idempotent") {
  test::TempDir t;
  std::string f = t.path + "/cni/c-net1-device.json";
  devinfo::PciInfo dp;
  dp.pci_address = "0000:03:00.2";
  dp.vhost_net = "/dev/vhost-net";
  REQUIRE(devinfo::write_once(f, devinfo::make_pci(dp)));
  struct stat st {};
  REQUIRE(::stat(f.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0444);
  auto again = devinfo::write_once(f, devinfo::make_pci(dp));
  REQUIRE_FALSE(again);
  CHECK(again.error().cni_code == cni_code::kConflict);

  devinfo::PciInfo found;
  found.pci_address = "0000:99:99.9";  // the device plugin's value stands
  found.pf_pci_address = "0000:03:00.0";
  found.rdma_device = "mlx5_2";
  REQUIRE(devinfo::complete(f, devinfo::make_pci(found)));
  CHECK(test::read_file(f) ==
        R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.2","vhost-net":"/dev/vhost-net","rdma-device":"mlx5_2","pf-pci-address":"0000:03:00.0"}})");
  REQUIRE(::stat(f.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0444);

  std::string g = t.path + "/cni/c-net2-device.json";  // no device plugin file: the driver's findings
  REQUIRE(devinfo::complete(g, devinfo::make_pci(found)));
  CHECK(test::read_file(g) == json::dump(devinfo::make_pci(found)));

  REQUIRE(devinfo::remove(f));
  CHECK_FALSE(std::filesystem::exists(f));
  CHECK(devinfo::remove(f));
  auto undo = devinfo::undo_remove(g);
  CHECK(devinfo::run_undo_remove(undo));
  CHECK_FALSE(std::filesystem::exists(g));
}

TEST_CASE("device-info: planning needs resourceName and a deviceID, and hands the path to plugins declaring CNIDeviceInfoFile") {
  auto plugins = json::parse(R"([{"type":"sriov","deviceID":"0000:03:00.2","capabilities":{"CNIDeviceInfoFile":true}},
                                 {"type":"tuning"}])",
                             "t");
  REQUIRE(plugins);
  devinfo::Plan none;
  REQUIRE(devinfo::plan(*plugins, none, "/b", "ctr", "net1"));
  CHECK(none.file.empty());  // no resourceName
  devinfo::Plan p;
  p.resource_name = "intel.com/sriov";
  REQUIRE(devinfo::plan(*plugins, p, "/b", "ctr", "net1"));
  CHECK(p.device_id == "0000:03:00.2");
  CHECK(p.file == "/b/cni/ctr-net1-device.json");
  CHECK(std::string((*plugins)[0]["runtimeConfig"]["CNIDeviceInfoFile"].GetString()) == p.file);
  CHECK_FALSE((*plugins)[1].HasMember("runtimeConfig"));
  // runtimeConfig.deviceID (the runtime's) wins over the config's deviceID.
  auto rc = json::parse(R"([{"type":"sriov","deviceID":"0000:03:00.2","runtimeConfig":{"deviceID":"0000:03:00.3"}}])", "t");
  CHECK(devinfo::chain_device_id(*rc) == "0000:03:00.3");
  auto noid = json::parse(R"([{"type":"sriov"}])", "t");
  devinfo::Plan q;
  q.resource_name = "intel.com/sriov";
  REQUIRE(devinfo::plan(*noid, q, "/b", "ctr", "net1"));
  CHECK(q.file.empty());
}

TEST_CASE(
    "device-info: a chain naming its vDPA device (vdpaDevice) gets a file without resourceName; no device plugin file "
    "is read") {
  auto plugins =
      json::parse(R"([{"type":"vdpa","vdpaDevice":"vduse0","capabilities":{"CNIDeviceInfoFile":true}}])", "t");
  REQUIRE(plugins);
  devinfo::Plan p;
  REQUIRE(devinfo::plan(*plugins, p, "/b", "ctr", "net1"));
  CHECK(p.device_id.empty());
  CHECK(p.file == "/b/cni/ctr-net1-device.json");
  CHECK(std::string((*plugins)[0]["runtimeConfig"]["CNIDeviceInfoFile"].GetString()) == p.file);
  auto empty = json::parse(R"([{"type":"vdpa","vdpaDevice":""}])", "t");
  devinfo::Plan q;
  REQUIRE(devinfo::plan(*empty, q, "/b", "ctr", "net1"));
  CHECK(q.file.empty());
}

TEST_CASE("device-info: a link planted at the attachment's file or at cni/ is refused by path, its target untouched") {
  test::TempDir t;
  const std::string victim = t.path + "/victim";
  test::write_file(victim, "precious");
  std::filesystem::create_directories(t.path + "/cni");
  const std::string f = t.path + "/cni/c-net1-device.json";
  std::filesystem::create_symlink(victim, f);
  devinfo::PciInfo dp;
  dp.pci_address = "0000:03:00.2";
  auto once = devinfo::write_once(f, devinfo::make_pci(dp));
  REQUIRE_FALSE(once);
  CHECK(once.error().msg.find(f) != std::string::npos);
  auto completed = devinfo::complete(f, devinfo::make_pci(dp));
  REQUIRE_FALSE(completed);
  CHECK(completed.error().msg.find(f) != std::string::npos);
  CHECK(test::read_file(victim) == "precious");

  std::filesystem::create_directories(t.path + "/elsewhere");
  std::filesystem::create_symlink(t.path + "/elsewhere", t.path + "/cni2");
  auto in_linked_dir = devinfo::write_once(t.path + "/cni2/c-net1-device.json", devinfo::make_pci(dp));
  REQUIRE_FALSE(in_linked_dir);
  CHECK(in_linked_dir.error().msg.find(t.path + "/cni2") != std::string::npos);
  CHECK(std::filesystem::is_empty(t.path + "/elsewhere"));
}
