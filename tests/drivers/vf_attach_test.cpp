// The shared VF steps (drivers/vf_attach.cpp). First as the three VF drivers use them together: one
// pod with a kernel VF, a vfio-pci VF, an IB VF and a vhost-vdpa device, each claimed under one
// state directory with its device-info, and a DEL that puts every VF back; in-process in a fresh
// private node: VF netdevs are real veth ends ([kernel netdevs]), the PF side is a recording PfOps
// ([recorded PF]), the vDPA listing a fake ([fake vdpa]), the sysfs tree a fake one
// (tests/support/vf_harness.hpp). Then single steps: allocation records in a scratch state
// directory ([temp state dir]) and the shared parse steps (no kernel, no files). Last, the VF
// steps (drivers/steps.hpp): their inverses (golden JSON, no kernel), the sriov and ib-sriov ADDs
// run with a RecordingExecutor, and the sysfs root a VF operation carries to DEL; the format-1
// records of in-process VFs (tests/fixtures/state-v1/in-process-vf) torn down under a fake /sys.
#include <doctest/doctest.h>
#include <sys/mount.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "cni-entry/npwg/nad.hpp"
#include "drivers/steps.hpp"
#include "engine/base/file.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/vf_harness.hpp"

using namespace plumb;
using namespace plumb::test;
using namespace plumb::vf;
using plumb::drivers::vf_attach::read_allocation;

namespace {

/// One attachment of the four-VF pod: its interface, driver, device plugin resource, device and config.
struct Spec {
  std::string ifname, type, resource, id, conf;
};

std::vector<Spec> four_vf_specs(Bench& b) {
  return {
      {"net1", "sriov", "intel.com/sriov_netdevice", "0000:03:00.2",
       sriov_conf(R"("deviceID":"0000:03:00.2","vlan":100,"mac":"02:11:22:33:44:55","trust":"on")",
                  b.ipam("198.51.100.0/24"))},
      {"net2", "sriov", "intel.com/sriov_dpdk", "0000:03:00.3",
       sriov_conf(R"("deviceID":"0000:03:00.3","vlan":200,"spoofchk":"off")", b.ipam("198.51.100.0/24"))},
      {"ib1", "ib-sriov", "mellanox.com/mlnx_ib", "0000:81:00.2",
       ib_conf(R"("runtimeConfig":{"infinibandGUID":"02:00:00:00:00:00:00:aa"})", b.ipam("192.0.2.0/24"))},
      {"net4", "vdpa", "mellanox.com/vdpa", "0000:65:00.2", vdpa_conf("0000:65:00.2", b.ipam("203.0.113.0/24"))},
  };
}

/// network-status as the orchestrator builds it (status_from_result + each device-info file),
/// checked and encoded.
json::Document four_vf_status(const cni::CniResult& def_r, const std::vector<std::unique_ptr<Att>>& atts,
                              const std::vector<cni::CniResult>& results, const std::vector<Spec>& specs) {
  std::vector<nad::StatusEntry> status;
  status.push_back(nad::status_from_result("default-net", def_r, "eth0", true));
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
  return std::move(*doc);
}

/// After the DEL: every VF's PF settings, netdev name, MAC and MTU as before, the pod empty, no
/// allocation and no device-info left.
void check_four_vf_gone(Bench& b, const VfState& ib_initial, const std::vector<Spec>& specs) {
  CHECK(test::same_state(b.pf.vfs[{"pf0", 1}], initial_state(1)));
  CHECK(test::same_state(b.pf.vfs[{"pf0", 2}], initial_state(2)));
  CHECK(test::same_state(b.pf.vfs[{"ibp0", 0}], ib_initial));
  for (auto [name, mac, mtu] :
       std::vector<std::tuple<std::string, std::string, unsigned>>{{"vfnd1", "02:aa:00:00:00:01", 1400},
                                                                   {"ibvf0", "02:bb:00:00:00:01", 2044},
                                                                   {"vdnet1", "02:cc:00:00:00:01", 1500}}) {
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

}  // namespace

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
  const std::vector<Spec> specs = four_vf_specs(b);
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

  const json::Document doc = four_vf_status(*def_r, atts, results, specs);
  REQUIRE(doc.Size() == 5);
  CHECK_FALSE(doc[0].HasMember("device-info"));
  const char* want[] = {
      R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.2","vhost-net":"/dev/vhost-net","pf-pci-address":"0000:03:00.0"}})",
      R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.3","pf-pci-address":"0000:03:00.0"}})",
      R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:81:00.2","rdma-device":"mlx5_2","pf-pci-address":"0000:81:00.0"}})",
      R"({"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpa0","driver":"vhost","path":"/dev/vhost-vdpa-0","pci-address":"0000:65:00.2","pf-pci-address":"0000:65:00.0"}})",
  };
  for (size_t i = 0; i < 4; ++i) {
    INFO(specs[i].ifname);
    CHECK(json::dump(doc[static_cast<rapidjson::SizeType>(i + 1)]["device-info"]) == want[i]);
  }
  CHECK(std::string(doc[1]["mac"].GetString()) == "02:11:22:33:44:55");

  // DEL, newest attachment first.
  for (size_t i = atts.size(); i-- > 0;) REQUIRE(atts[i]->unwind(true));
  REQUIRE(def.unwind(true));
  check_four_vf_gone(b, ib_initial, specs);
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

// ---------------------------------------------------------------------------------------------
// The VF steps (drivers/steps.hpp) the shared code makes: their inverses, and the drivers' steps

namespace {

/// The inverse of `step` as the journal would record it ("" when none).
std::string recorded(const drivers::steps::Step& step) {
  drivers::Context ctx;
  auto inv = drivers::steps::inverse_of(ctx, step);
  REQUIRE(inv);
  if (!*inv) return "";
  CHECK_FALSE((*inv)->rollback_only);
  return json::dump(drivers::undo::encode((*inv)->op));
}

/// The steps `rec` made, with their inverses ("" when none), oldest first.
std::vector<std::pair<std::string, std::string>> made(const drivers::steps::RecordingExecutor& rec) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& m : rec.made()) {
    out.emplace_back(m.step, m.inverse ? json::dump(drivers::undo::encode(m.inverse->op)) : "");
  }
  return out;
}

}  // namespace

TEST_CASE("the VF steps' inverses: the operations the VF drivers recorded, the sysfs root only when it is not /sys") {
  using namespace drivers::steps;
  const drivers::undo::VfOwner owner{"ib-sriov", "0000:81:00.2", "ctr1", "ib1"};
  drivers::vf_attach::Allocation alloc;
  alloc.pci = "0000:03:00.2";
  alloc.type = "sriov";
  alloc.container_id = "ctr1";
  alloc.ifname = "net1";
  CHECK(recorded(ClaimVf{alloc}) ==
        R"({"op":"sriov.release","pci":"0000:03:00.2","container_id":"ctr1","ifname":"net1"})");
  CHECK(recorded(ReclaimVf{nullptr, alloc}).empty());

  VfSetting guid;
  guid.kind = VfSetting::Kind::NodeGuid;
  guid.guid = 0x101;
  SetVfSettings set{nullptr, owner, "ibp0", {}, {guid}, "mlx5_core", true, "/tmp/fake/sys"};
  CHECK(recorded(set) ==
        R"({"op":"ib-sriov.restore_vf","pci":"0000:81:00.2","container_id":"ctr1","ifname":"ib1","pf":"ibp0",)"
        R"("settings":[{"kind":"node_guid","vf":0,"guid":"00:00:00:00:00:00:01:01"}],"rebind_driver":"mlx5_core",)"
        R"("sysfs_root":"/tmp/fake/sys"})");
  set.sysfs_root = "/sys";
  CHECK(recorded(set) ==
        R"({"op":"ib-sriov.restore_vf","pci":"0000:81:00.2","container_id":"ctr1","ifname":"ib1","pf":"ibp0",)"
        R"("settings":[{"kind":"node_guid","vf":0,"guid":"00:00:00:00:00:00:01:01"}],"rebind_driver":"mlx5_core"})");
  set.rebind_driver = "";
  set.sysfs_root = "/tmp/fake/sys";
  CHECK(recorded(set) ==
        R"({"op":"ib-sriov.restore_vf","pci":"0000:81:00.2","container_id":"ctr1","ifname":"ib1","pf":"ibp0",)"
        R"("settings":[{"kind":"node_guid","vf":0,"guid":"00:00:00:00:00:00:01:01"}]})");
  CHECK(
      recorded(ReloadVfDriver{{"sriov", "0000:03:00.2", "ctr1", "net1"}, "pf0", "igbvf", "/sys"}) ==
      R"({"op":"sriov.restore_vf","pci":"0000:03:00.2","container_id":"ctr1","ifname":"net1","pf":"pf0","settings":[],)"
      R"("rebind_driver":"igbvf"})");

  drivers::vf_attach::NetdevOrig orig{7, "vfnd1", {0x02, 0xaa, 0, 0, 0, 1}, 1400};
  CHECK(recorded(TakeVfNetdev{{"sriov", "0000:03:00.2", "ctr1", "net1"}, orig, true, false, "/sys"}) ==
        R"({"op":"sriov.return_netdev","pci":"0000:03:00.2","container_id":"ctr1","ifname":"net1","name":"vfnd1",)"
        R"("hwaddr":"02:aa:00:00:00:01","mtu":1400,"mac_changed":true,"mtu_changed":false})");
  CHECK(
      recorded(TakeVfNetdev{{"sriov", "0000:03:00.2", "ctr1", "net1"}, orig, false, true, "/tmp/fake/sys"}) ==
      R"({"op":"sriov.return_netdev","pci":"0000:03:00.2","container_id":"ctr1","ifname":"net1","name":"vfnd1",)"
      R"("hwaddr":"02:aa:00:00:00:01","mtu":1400,"mac_changed":false,"mtu_changed":true,"sysfs_root":"/tmp/fake/sys"})");
  CHECK(recorded(ChangeVfNetdev{7, {}}).empty());
  CHECK(recorded(MoveVfNetdev{7, "vfnd1", std::nullopt, 1500u}).empty());
  CHECK(recorded(MoveRdmaIntoPod{nullptr, {"rdma", "0000:81:00.2", "ctr1", "ib1"}, "mlx5_2"}) ==
        R"({"op":"rdma.rdma_return","pci":"0000:81:00.2","container_id":"ctr1","ifname":"ib1","device":"mlx5_2"})");
}

TEST_CASE(
    "[kernel netdevs, recorded PF] an sriov ADD with a RecordingExecutor that applies: claim, netdev, PF settings "
    "and move as steps, in the order of the record, each with its inverse") {
  Node node;
  Bench b(node);
  sriov_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "net1", "pod1");
  drivers::steps::RecordingExecutor rec(/*apply=*/true);
  a.ctx.executor = &rec;
  auto r = a.add("sriov", sriov_conf(R"("deviceID":"0000:03:00.2","vlan":100,"mtu":1300)", b.ipam("198.51.100.0/24")));
  INFO((r ? std::string() : r.error().text()));
  REQUIRE(r);
  const std::string owner = R"("pci":"0000:03:00.2","container_id":"ctr1","ifname":"net1")";
  auto steps = made(rec);
  REQUIRE(steps.size() >= 5);
  CHECK(steps[0] == std::pair<std::string, std::string>{"claim_vf", R"({"op":"sriov.release",)" + owner + "}"});
  CHECK(steps[1] ==
        std::pair<std::string, std::string>{
            "take_vf_netdev", R"({"op":"sriov.return_netdev",)" + owner +
                                  R"(,"name":"vfnd1","hwaddr":"02:aa:00:00:00:01","mtu":1400,"mac_changed":false,)"
                                  R"("mtu_changed":true,"sysfs_root":")" +
                                  b.sys.root() + R"("})"});
  CHECK(steps[2] == std::pair<std::string, std::string>{
                        "set_vf_settings",
                        R"({"op":"sriov.restore_vf",)" + owner +
                            R"(,"pf":"pf0","settings":[{"kind":"vlan","vf":1,"vlan":0,"qos":0,"proto":33024}]})"});
  CHECK(steps[3] == std::pair<std::string, std::string>{"move_vf_netdev", ""});
  // The IPAM's allocation is a call of the same executor, its release the inverse.
  CHECK(steps[4].first == "allocate_addresses");
  CHECK(steps[4].second.starts_with(R"({"op":"ipam_release","ipam":{"type":"host-local")"));
  CHECK(steps[4].second.ends_with(R"("network":"net-net1","ifname":"net1"})"));
  const std::vector<std::string> rest{"add_own_link_address", "set_up_pod_link", "write_pod_sysctl",
                                      "write_pod_sysctl"};
  std::vector<std::string> names;
  for (size_t i = 5; i < steps.size(); ++i) names.push_back(steps[i].first);
  CHECK(names == rest);
  // Applied: the VF is in the pod with its MTU; nothing went to the journal (every step, the
  // IPAM's allocation included, went through the recording executor).
  auto l = ip_link("pod1", "net1");
  REQUIRE(l);
  CHECK(l->mtu == 1300);
  CHECK(a.undo_ops().empty());
}

TEST_CASE(
    "[kernel netdevs, recorded PF, fake RDMA] an ib-sriov ADD with a RecordingExecutor that applies: the GUIDs set "
    "and the VF rebound in one step, the RDMA device moved before the netdev") {
  Node node;
  Bench b(node);
  ib_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "ib1", "pod1");
  drivers::steps::RecordingExecutor rec(/*apply=*/true);
  a.ctx.executor = &rec;
  auto r =
      a.add("ib-sriov", ib_conf(R"("rdmaIsolation":true,"runtimeConfig":{"infinibandGUID":"02:00:00:00:00:00:00:aa"})",
                                b.ipam("192.0.2.0/24")));
  INFO((r ? std::string() : r.error().text()));
  REQUIRE(r);
  std::vector<std::string> names;
  for (const auto& [step, inverse] : made(rec)) names.push_back(step);
  REQUIRE(names.size() >= 5);
  CHECK(std::vector<std::string>(names.begin(), names.begin() + 5) ==
        std::vector<std::string>{"claim_vf", "set_vf_settings", "move_rdma_into_pod", "take_vf_netdev",
                                 "move_vf_netdev"});
  CHECK(made(rec)[1].second.find(R"("rebind_driver":"mlx5_core","sysfs_root":")" + b.sys.root() + "\"") !=
        std::string::npos);
  CHECK(b.sys.driver_file("mlx5_core", "bind") == "0000:81:00.2");
  REQUIRE(b.rdma.moves.size() == 1);
  CHECK(b.rdma.moves[0].dev == "mlx5_2");
  CHECK(ip_link("pod1", "ib1"));
}

TEST_CASE(
    "[kernel netdevs, recorded PF, fake RDMA] DEL rebinds the VF under the sysfs root its record carries, whatever "
    "the DEL's context says") {
  Node node;
  Bench b(node);
  ib_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "ib1", "pod1");
  REQUIRE(a.add("ib-sriov",
                ib_conf(R"("runtimeConfig":{"infinibandGUID":"02:00:00:00:00:00:00:aa"})", b.ipam("192.0.2.0/24"))));
  std::ofstream(b.sys.root() + "/bus/pci/drivers/mlx5_core/bind", std::ios::trunc).close();
  std::ofstream(b.sys.root() + "/bus/pci/drivers/mlx5_core/unbind", std::ios::trunc).close();
  a.open();
  a.ctx.sysfs_root = node.dir() + "/no-such-sys";
  REQUIRE(drivers::undo::unwind(a.ctx, a.rec.undo, true, "test record"));
  CHECK(b.sys.driver_file("mlx5_core", "unbind") == "0000:81:00.2");
  CHECK(b.sys.driver_file("mlx5_core", "bind") == "0000:81:00.2");
  CHECK(ip_link("", "ibvf0"));
}

TEST_CASE(
    "a VF operation recorded without a sysfs root (plumb before it was recorded) reads back as such and is "
    "written back unchanged") {
  const std::string old_op =
      R"({"op":"ib-sriov.restore_vf","pci":"0000:81:00.2","container_id":"ctr-v1","ifname":"ib1","pf":"ibp0",)"
      R"("settings":[{"kind":"node_guid","vf":0,"guid":"00:00:00:00:00:00:01:01"}],"rebind_driver":"mlx5_core"})";
  auto doc = json::parse(old_op, "op");
  REQUIRE(doc);
  auto op = drivers::undo::decode(*doc, "rec.json");
  REQUIRE(op);
  const auto* restore = std::get_if<drivers::undo::VfRestore>(&*op);
  REQUIRE(restore);
  CHECK_FALSE(restore->sysfs_root.has_value());
  CHECK(json::dump(drivers::undo::encode(*op)) == old_op);
}

namespace {

/// The fake sysfs tree mounted over /sys in this test process's private mount namespace
/// (test_main), for a record that rebinds under /sys; unmounted when it goes.
struct FakeSysMount {
  explicit FakeSysMount(const std::string& root) {
    REQUIRE(::mount(root.c_str(), "/sys", nullptr, MS_BIND, nullptr) == 0);
    // What follows writes under /sys: it must be the fake tree, never the machine's.
    if (!std::filesystem::equivalent("/sys", root)) {
      ::umount2("/sys", MNT_DETACH);
      FAIL("/sys is not the fake tree after the bind mount");
    }
  }
  ~FakeSysMount() { ::umount2("/sys", MNT_DETACH); }
  FakeSysMount(const FakeSysMount&) = delete;
  FakeSysMount& operator=(const FakeSysMount&) = delete;
};

/// The undo list of a record of tests/fixtures/state-v1/in-process-vf (@NODE@: `node_dir`).
json::Document v1_undo(const std::string& record, const std::string& node_dir) {
  std::string text =
      test::read_file(std::string(fixtures_dir()) + "/state-v1/in-process-vf/containers/ctr-v1/" + record);
  for (size_t at = 0; (at = text.find("@NODE@", at)) != std::string::npos; at += node_dir.size())
    text.replace(at, 6, node_dir);
  auto doc = json::parse(text, record);
  REQUIRE(doc);
  REQUIRE_FALSE(doc->HasMember("format"));  // a format-1 record
  json::Document undo;
  undo.CopyFrom((*doc)["undo"], undo.GetAllocator());
  return undo;
}

}  // namespace

TEST_CASE(
    "[kernel netdevs, recorded PF, fake RDMA, fake /sys] DEL from the format-1 records of in-process VFs "
    "(state-v1/in-process-vf) puts back exactly what they recorded") {
  Node node;
  Bench b(node);
  sriov_tree(b);
  ib_tree(b);
  const VfState ib_initial = b.pf.vfs[{"ibp0", 0}];
  node.add_netns("pod1");
  // The pod as the fixtures' ADDs left it, made by this plumb with the same settings.
  Att s(b, "ctr-v1", "net1", "pod1"), ib(b, "ctr-v1", "ib1", "pod1");
  auto rs = s.add("sriov", sriov_conf(R"("deviceID":"0000:03:00.2","vlan":100,"vlanQoS":3,"mac":"02:11:22:33:44:55",)"
                                      R"("spoofchk":"off","trust":"on","link_state":"enable","min_tx_rate":10,)"
                                      R"("max_tx_rate":100,"mtu":1300)",
                                      b.ipam("198.51.100.0/24")));
  REQUIRE_MESSAGE(rs, (rs ? "" : rs.error().text()));
  auto ri = ib.add("ib-sriov", ib_conf(R"("rdmaIsolation":true,"link_state":"enable",)"
                                       R"("runtimeConfig":{"infinibandGUID":"02:00:00:00:00:00:00:aa"})",
                                       b.ipam("198.51.100.0/24")));
  REQUIRE_MESSAGE(ri, (ri ? "" : ri.error().text()));
  REQUIRE(b.rdma.moves.size() == 1);
  // The fixtures' VF allocation records in place of this plumb's.
  for (const char* pci : {"0000:03:00.2", "0000:81:00.2"}) {
    REQUIRE(read_allocation(b.state(), pci)->has_value());
    write_file(b.state() + "/sriov/" + pci,
               test::read_file(std::string(fixtures_dir()) + "/state-v1/in-process-vf/sriov/" + pci));
  }
  REQUIRE(address_files(node.dir() + "/ipam").size() == 2);
  std::ofstream(b.sys.root() + "/bus/pci/drivers/mlx5_core/bind", std::ios::trunc).close();
  std::ofstream(b.sys.root() + "/bus/pci/drivers/mlx5_core/unbind", std::ios::trunc).close();

  // DEL of each record, as the orchestrator unwinds it; its rebind has no sysfs root: /sys.
  {
    FakeSysMount sys(b.sys.root());
    for (auto [att, record] : {std::pair{&ib, "2-ib1.json"}, std::pair{&s, "1-net1.json"}}) {
      CAPTURE(record);
      json::Document undo = v1_undo(record, node.dir());
      att->open();
      att->ctx.sysfs_root = node.dir() + "/no-such-sys";  // the record's root, not the DEL's, counts
      auto del = drivers::undo::unwind(att->ctx, undo, true, record);
      REQUIRE_MESSAGE(del, (del ? "" : del.error().text()));
    }
  }
  // net1: the PF-side VLAN, spoof check, MAC, rates and link state back; trust, which format 1
  // did not record, stays on. The netdev back under its name with its MAC and MTU.
  VfState vf1 = initial_state(1);
  vf1.trust = true;
  CHECK(test::same_state(b.pf.vfs[{"pf0", 1}], vf1));
  // ib1: its GUIDs and link state back, the VF rebound under /sys (the fake tree), its RDMA
  // device returned to the node.
  CHECK(test::same_state(b.pf.vfs[{"ibp0", 0}], ib_initial));
  CHECK(b.sys.driver_file("mlx5_core", "unbind") == "0000:81:00.2");
  CHECK(b.sys.driver_file("mlx5_core", "bind") == "0000:81:00.2");
  REQUIRE(b.rdma.moves.size() == 2);
  CHECK(b.rdma.moves[1].dev == "mlx5_2");
  CHECK(b.rdma.moves[1].from_ino == b.rdma.moves[0].to_ino);
  CHECK(b.rdma.moves[1].to_ino == b.rdma.moves[0].from_ino);
  for (auto [name, mac, mtu] : std::vector<std::tuple<std::string, std::string, unsigned>>{
           {"vfnd1", "02:aa:00:00:00:01", 1400}, {"ibvf0", "02:bb:00:00:00:01", 2044}}) {
    auto l = ip_link("", name);
    INFO(name);
    REQUIRE(l);
    CHECK(l->mac == mac);
    CHECK(l->mtu == mtu);
  }
  CHECK(test::ip_json("-n pod1 link show").Size() == 1);  // lo only
  // Both allocations and both addresses released.
  for (const char* pci : {"0000:03:00.2", "0000:81:00.2"}) CHECK_FALSE(read_allocation(b.state(), pci)->has_value());
  CHECK(address_files(node.dir() + "/ipam").empty());
}
