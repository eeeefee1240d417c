// The shared VF steps (drivers/vf_attach.cpp). First as the three VF drivers use them together: one
// pod with a kernel VF, a vfio-pci VF, an IB VF and a vhost-vdpa device, each claimed under one
// state directory with its device-info, and a DEL that puts every VF back; in-process in a fresh
// private node: VF netdevs are real veth ends ([kernel netdevs]), the PF side is a recording PfOps
// ([recorded PF]), the vDPA listing a fake ([fake vdpa]), the sysfs tree a fake one
// (tests/support/vf_harness.hpp). Then single steps: allocation records in a scratch state
// directory ([temp state dir]) and the shared parse steps (no kernel, no files).
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cni-entry/npwg/nad.hpp"
#include "engine/base/file.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/vf_harness.hpp"

using namespace plumb;
using namespace plumb::test;
using namespace plumb::vf;
using plumb::drivers::vf_attach::read_allocation;

TEST_CASE("[kernel netdevs, recorded PF, fake vdpa] pod with default + SR-IOV (kernel VF) + SR-IOV (vfio) + IB (GUID) + vDPA "
          "(vhost): network-status holds exactly the spec's device-info for each; DEL restores every VF setting, name, MAC, "
          "MTU and namespace") {
  Node node;
  Bench b(node);
  sriov_tree(b);
  ib_tree(b);
  vdpa_tree(b);
  node.add_netns("pod1");
  const VfState ib_initial = b.pf.vfs[{"ibp0", 0}];

  // The default network: a bridge attachment, as the orchestrator runs it.
  Att def(b, "ctr1", "eth0", "pod1");
  auto def_conf = json::parse(R"({"cniVersion":"1.1.0","name":"default-net","type":"bridge","bridge":"plumb0","ipam":)" +
                                  b.ipam("2001:db8:5::/64") + "}",
                              "default");
  REQUIRE(def_conf);
  auto def_r = test::add_plugin(def.ctx, *def_conf, nullptr);
  REQUIRE(def_r);

  std::vector<std::unique_ptr<Att>> atts;
  std::vector<cni::CniResult> results;
  struct Spec {
    std::string ifname, type, resource, id, conf;
  };
  std::vector<Spec> specs = {
      {"net1", "sriov", "intel.com/sriov_netdevice", "0000:03:00.2",
       sriov_conf(R"("deviceID":"0000:03:00.2","vlan":100,"mac":"02:11:22:33:44:55","trust":"on")", b.ipam("198.51.100.0/24"))},
      {"net2", "sriov", "intel.com/sriov_dpdk", "0000:03:00.3",
       sriov_conf(R"("deviceID":"0000:03:00.3","vlan":200,"spoofchk":"off")", b.ipam("198.51.100.0/24"))},
      {"ib1", "ib-sriov", "mellanox.com/mlnx_ib", "0000:81:00.2",
       ib_conf(R"("runtimeConfig":{"infinibandGUID":"02:00:00:00:00:00:00:aa"})", b.ipam("192.0.2.0/24"))},
      {"net4", "vdpa", "mellanox.com/vdpa", "0000:65:00.2", vdpa_conf("0000:65:00.2", b.ipam("203.0.113.0/24"))},
  };
  // One device plugin file exists (vhost-net only a device plugin knows); the others are written by plumb.
  test::write_file(devinfo::dp_file(b.devinfo_base(), "intel.com/sriov_netdevice", "0000:03:00.2"),
                   R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.2","vhost-net":"/dev/vhost-net"}})");
  for (auto& s : specs) {
    atts.push_back(std::make_unique<Att>(b, "ctr1", s.ifname, "pod1"));
    atts.back()->with_device_info(s.resource, s.id);
    auto r = atts.back()->add(s.type, s.conf);
    INFO(s.ifname, ": ", (r ? std::string() : r.error().text()));
    REQUIRE(r);
    results.push_back(*r);
  }

  // network-status as the orchestrator builds it: status_from_result + the device-info file.
  std::vector<nad::StatusEntry> status;
  status.push_back(nad::status_from_result("default-net", *def_r, "eth0", true));
  for (size_t i = 0; i < atts.size(); ++i) {
    auto e = nad::status_from_result("default/" + specs[i].ifname, results[i], specs[i].ifname, false);
    auto di = devinfo::read(atts[i]->plan.file);
    REQUIRE(di);
    REQUIRE(di->has_value());
    e.device_info = std::move(**di);
    status.push_back(std::move(e));
  }
  REQUIRE(nad::check_network_status(status));
  auto doc = json::parse(nad::encode_network_status(status), "status");
  REQUIRE(doc);
  REQUIRE(doc->Size() == 5);
  CHECK_FALSE((*doc)[0].HasMember("device-info"));
  const char* want[] = {
      R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.2","vhost-net":"/dev/vhost-net","pf-pci-address":"0000:03:00.0"}})",
      R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.3","pf-pci-address":"0000:03:00.0"}})",
      R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:81:00.2","rdma-device":"mlx5_2","pf-pci-address":"0000:81:00.0"}})",
      R"({"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpa0","driver":"vhost","path":"/dev/vhost-vdpa-0","pci-address":"0000:65:00.2","pf-pci-address":"0000:65:00.0"}})",
  };
  for (size_t i = 0; i < 4; ++i) {
    INFO(specs[i].ifname);
    CHECK(json::dump((*doc)[static_cast<rapidjson::SizeType>(i + 1)]["device-info"]) == want[i]);
  }
  CHECK(std::string((*doc)[1]["mac"].GetString()) == "02:11:22:33:44:55");

  // DEL, newest attachment first.
  for (size_t i = atts.size(); i-- > 0;) REQUIRE(atts[i]->unwind(true));
  REQUIRE(def.unwind(true));
  CHECK(test::same_state(b.pf.vfs[{"pf0", 1}], initial_state(1)));
  CHECK(test::same_state(b.pf.vfs[{"pf0", 2}], initial_state(2)));
  CHECK(test::same_state(b.pf.vfs[{"ibp0", 0}], ib_initial));
  for (auto [name, mac, mtu] : std::vector<std::tuple<std::string, std::string, unsigned>>{
           {"vfnd1", "02:aa:00:00:00:01", 1400}, {"ibvf0", "02:bb:00:00:00:01", 2044}, {"vdnet1", "02:cc:00:00:00:01", 1500}}) {
    auto l = ip_link("", name);
    INFO(name);
    REQUIRE(l);
    CHECK(l->mac == mac);
    CHECK(l->mtu == mtu);
  }
  auto pod_links = test::ip_json("-n pod1 link show");
  CHECK(pod_links.Size() == 1);  // lo only
  for (auto& s : specs) CHECK_FALSE(read_allocation(b.state(), s.id)->has_value());
  CHECK(test::PodFixture::files_under(b.devinfo_base() + "/cni").empty());
}

// ---------------------------------------------------------------------------------------------
// Single shared steps

TEST_CASE("[temp state dir] allocation records: written atomically and read back with their restore list; none is nullopt; a "
          "malformed one is a clear error") {
  test::TempDir t;
  const std::string state = t.path;
  REQUIRE(mkdir_p(state + "/sriov"));
  auto none = read_allocation(state, "0000:03:00.2");
  REQUIRE(none);
  CHECK_FALSE(none->has_value());

  drivers::vf_attach::Allocation a;
  a.pci = "0000:03:00.2";
  a.type = "sriov";
  a.container_id = "ctr1";
  a.ifname = "net1";
  a.netns = "/run/netns/pod1";
  a.mode = "netdev";
  a.pf = "pf0";
  VfSetting vlan;
  vlan.kind = VfSetting::Kind::Vlan;
  vlan.vf = 1;
  VfSetting trust;
  trust.kind = VfSetting::Kind::Trust;
  trust.vf = 1;
  a.restore = {vlan, trust};
  REQUIRE(drivers::vf_attach::write_allocation(state, a));
  auto back = read_allocation(state, "0000:03:00.2");
  REQUIRE(back);
  REQUIRE(back->has_value());
  CHECK((*back)->type == "sriov");
  CHECK((*back)->container_id == "ctr1");
  CHECK((*back)->ifname == "net1");
  CHECK((*back)->netns == "/run/netns/pod1");
  CHECK((*back)->mode == "netdev");
  CHECK((*back)->pf == "pf0");
  CHECK((*back)->restore == a.restore);

  test::write_file(state + "/sriov/0000:03:00.3", R"({"type":"sriov","restore":[{"kind":"warp","vf":0}]})");
  auto bad = read_allocation(state, "0000:03:00.3");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().cni_code == cni_code::kDecode);
}

TEST_CASE("parse steps: runtimeConfig.deviceID wins over deviceID, only PCI addresses pass; link_state words") {
  auto id_of = [](const char* conf_json) {
    auto conf = json::parse(conf_json, "t");
    REQUIRE(conf);
    return drivers::vf_attach::device_id(*conf, drivers::ParseInput{"net", "net1", {}}, "sriov");
  };
  CHECK(*id_of(R"({"deviceID":"0000:03:00.2","runtimeConfig":{"deviceID":"0000:03:00.3"}})") == "0000:03:00.3");
  CHECK(*id_of(R"({"deviceID":"0000:03:00.2","runtimeConfig":{}})") == "0000:03:00.2");
  auto path = id_of(R"({"runtimeConfig":{"deviceID":"../../etc"}})");
  REQUIRE_FALSE(path);
  CHECK(path.error().msg.find("net.runtimeConfig.deviceID \"../../etc\" is not a PCI address") != std::string::npos);

  auto state_of = [](const char* conf_json) {
    auto conf = json::parse(conf_json, "t");
    REQUIRE(conf);
    return drivers::vf_attach::parse_link_state(*conf, "net");
  };
  CHECK(*state_of(R"({})") == std::nullopt);
  CHECK(*state_of(R"({"link_state":"auto"})") == LinkState::Auto);
  CHECK(*state_of(R"({"link_state":"enable"})") == LinkState::Enable);
  CHECK(*state_of(R"({"link_state":"disable"})") == LinkState::Disable);
  auto up = state_of(R"({"link_state":"up"})");
  REQUIRE_FALSE(up);
  CHECK(up.error().msg.find("net.link_state \"up\"") != std::string::npos);
}
