// Upgrade safety: state records written by plumb before record formats were numbered (format 1,
// main@43d2038, kept in tests/fixtures/state-v1/) are still torn down by this plumb.
//
// How: the pod of the fixtures (a bridge default network with tuning, portmap and bandwidth;
// macvlan, host-device, two SR-IOV VFs and an InfiniBand VF with fake sysfs and veth stand-ins) is
// set up for real by this plumb, so the kernel, nftables, BPF maps, host-local files and VF
// allocations exist; then its records are replaced by the format-1 records of the same pod. Only
// values that were random when the fixture was written (veth names, ifindexes, the bandwidth owner
// tag, paths under the test's node directory) are taken from the fresh records; the records'
// structure, keys and operations are the fixtures' (their deletion of the macvlan's temporary
// name included: plumb now creates it under its final name). DEL with this plumb must then leave
// nothing.
#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <set>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "tests/support/fake_kubelet.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/sriov_fakes.hpp"

using plumb::test::address_files;
using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;
using plumb::test::read_file;
using plumb::test::sh;
using plumb::test::write_file;
namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string& rel) { return std::string(plumb::test::fixtures_dir()) + "/state-v1/" + rel; }

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
  return s;
}

std::string dump(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return sb.GetString();
}

rapidjson::Document parse(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str());
  REQUIRE_FALSE(d.HasParseError());
  return d;
}

/// Copies into `old_op` the fields of `fresh_op` that held random values when the fixture was
/// written. Both must be the same operation.
void take_random_values(rapidjson::Value& old_op, const rapidjson::Value& fresh_op, rapidjson::Document::AllocatorType& a) {
  const std::string op = old_op["op"].GetString();
  REQUIRE(op == fresh_op["op"].GetString());
  auto copy = [&](const char* key) {
    REQUIRE(fresh_op.HasMember(key));
    old_op[key].CopyFrom(fresh_op[key], a);
  };
  if (op == "link_del") copy("name");  // random veth host end
  if (op == "bandwidth.remove") {
    copy("host");
    copy("ifindex");
    copy("owner");
  }
  if (op == "host-device.restore") copy("index");
}

/// A fixture's deletion of a pod link under a temporary name ("mvl" + 8 hex digits): the plumb of
/// the fixtures created the macvlan under it and renamed it; plumb now creates it under its final
/// name, so the fresh record has no counterpart (and the DEL finds no such link).
bool temporary_link_del(const rapidjson::Value& op) {
  if (std::string(op["op"].GetString()) != "link_del" || std::string(op["where"].GetString()) != "pod") return false;
  const std::string name = op["name"].GetString();
  return name.size() == 11 && name.starts_with("mvl");
}

/// Replaces every fresh record of the pod by the fixture record of the same file name, in the
/// layout plumb wrote then: one directory per container ID (containers/ctr-v1/), where this
/// plumb writes one per (container ID, CNI_IFNAME) (containers/ctr-v1:eth0/).
void install_v1_records(const PodFixture& fx, const Node& node, const std::string& set) {
  const std::string dir = fx.state() + "/containers/ctr-v1:eth0";
  const std::string legacy = fx.state() + "/containers/ctr-v1";
  std::set<std::string> fresh_names, old_names;
  for (auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(".spare")) continue;  // the journal's spare of a record an ADD left incomplete
    fresh_names.insert(name);
  }
  for (auto& e : fs::directory_iterator(fixture(set + "/containers/ctr-v1"))) old_names.insert(e.path().filename().string());
  REQUIRE(fresh_names == old_names);
  for (const auto& name : old_names) {
    auto old_rec = parse(replace_all(read_file(fixture(set + "/containers/ctr-v1/" + name)), "@NODE@", node.dir()));
    auto fresh = parse(read_file(dir + "/" + name));
    REQUIRE_FALSE(old_rec.HasMember("format"));  // a format-1 record
    CHECK(fresh["format"].GetInt() == 3);
    auto& old_undo = old_rec["undo"];
    const auto& fresh_undo = fresh["undo"];
    INFO("record ", name, "\nv1: ", dump(old_undo), "\nnow: ", dump(fresh_undo));
    // The fresh operation matching old_undo[i]: the next unused one of the same kind (and place).
    // The order may differ: plumb now announces the IPAM's release with the link it precedes.
    std::vector<bool> used(fresh_undo.Size(), false);
    auto same_kind = [](const rapidjson::Value& a, const rapidjson::Value& b) {
      if (std::string(a["op"].GetString()) != b["op"].GetString()) return false;
      return !a.HasMember("where") || (b.HasMember("where") && std::string(a["where"].GetString()) == b["where"].GetString());
    };
    for (rapidjson::SizeType i = 0; i < old_undo.Size(); ++i) {
      if (temporary_link_del(old_undo[i])) continue;  // its link never exists now: the operation finds nothing
      rapidjson::SizeType j = 0;
      while (j < fresh_undo.Size() && (used[j] || !same_kind(old_undo[i], fresh_undo[j]))) ++j;
      REQUIRE(j < fresh_undo.Size());
      used[j] = true;
      take_random_values(old_undo[i], fresh_undo[j], old_rec.GetAllocator());
    }
    // A killed fresh ADD may have announced one intent more than the fixture's (it has one
    // operation fewer before it): killed right after persisting it, before the change it announces.
    // And this plumb records the rollback of shared changes the fixture's plumb left unrecorded
    // (the bridge's gateway address, portmap's route_localnet).
    const std::set<std::string> unknown_then = {"ipam_release", "addr_del", "addr_restore", "sysctl_restore"};
    for (rapidjson::SizeType j = 0; j < fresh_undo.Size(); ++j) {
      if (!used[j]) CHECK(unknown_then.count(fresh_undo[j]["op"].GetString()) == 1);
    }
    write_file(legacy + "/" + name, dump(old_rec));
    fs::remove(dir + "/" + name);
  }
  fs::remove_all(dir);
  if (fs::exists(fixture(set + "/sriov"))) {
    for (auto& e : fs::directory_iterator(fixture(set + "/sriov"))) {
      write_file(fx.state() + "/sriov/" + e.path().filename().string(), replace_all(read_file(e.path()), "@NODE@", node.dir()));
    }
  }
}

/// The node and pod of the fixtures' capture (tests/fixtures/state-v1/README.txt).
struct V1Pod {
  Node& node;
  PodFixture fx;
  plumb::test::FakeSysfs sys;
  plumb::test::PrivateBpffs bpf;
  plumb::test::FakeKubelet kubelet;  // allocated the VFs the NADs name (resourceName)
  std::string pod;

  explicit V1Pod(Node& n)
      : node(n), fx(n), sys(n.dir() + "/sys"), bpf(n),
        kubelet(n.dir() + "/kubelet",
                R"({"pods":[)" +
                    plumb::test::FakeKubelet::pod("default", "pod-v1",
                                                  {{"intel.com/sriov_netdevice", {"0000:03:00.2"}},
                                                   {"intel.com/sriov_dpdk", {"0000:03:00.3"}},
                                                   {"mellanox.com/mlnx_ib", {"0000:81:00.2"}}}) +
                    "]}") {
    sys.add_pf("0000:03:00.0", "pf0", 4, "ice");
    sys.add_vf("0000:03:00.0", 1, "0000:03:00.2", "iavf", "vfnd1");
    sys.add_vf("0000:03:00.0", 2, "0000:03:00.3", "vfio-pci");
    sys.add_pf("0000:81:00.0", "ibp0", 2, "mlx5_core");
    sys.add_vf("0000:81:00.0", 0, "0000:81:00.2", "mlx5_core", "ibvf0", "mlx5_2");
    for (auto [name, mac, mtu] : {std::tuple{"pf0", "02:ee:00:00:00:01", 1500}, {"vfnd1", "02:aa:00:00:00:01", 1400},
                                  {"ibvf0", "02:bb:00:00:00:01", 2044}, {"mst0", "02:cc:00:00:00:01", 1500},
                                  {"hd0", "02:dd:00:00:00:01", 1500}}) {
      REQUIRE(sh(std::string("ip link add ") + name + " address " + mac + " mtu " + std::to_string(mtu) + " type veth peer name " +
                 name + "p")
                  .exit_code == 0);
    }
    write_file(fx.default_conflist(), R"({"cniVersion": "1.0.0", "name": "default-net", "plugins": [
      {"type": "bridge", "bridge": "plumb0", "isGateway": true, "isDefaultGateway": true, "ipMasq": true, "hairpinMode": true,
       "capabilities": {"ips": true, "mac": true}, "ipam": )" + ipam("203.0.113.0/24") + R"(},
      {"type": "tuning", "sysctl": {"net.ipv4.conf.IFNAME.arp_filter": "1"}, "mtu": 1400, "promisc": true},
      {"type": "portmap", "capabilities": {"portMappings": true}},
      {"type": "bandwidth", "capabilities": {"bandwidth": true}}]})");
    nad("mv", "", R"({"cniVersion":"0.4.0","type":"macvlan","master":"mst0","mode":"bridge","ipam":)" + ipam("198.51.100.0/25") + "}");
    nad("hd", "", R"({"cniVersion":"1.0.0","type":"host-device","device":"hd0","ipam":)" + ipam("198.51.100.128/25") + "}");
    nad("sriov-a", "intel.com/sriov_netdevice",
        R"({"cniVersion":"1.0.0","type":"sriov","deviceID":"0000:03:00.2","mtu":1300,"capabilities":{"CNIDeviceInfoFile":true},"ipam":)" +
            ipam("192.0.2.0/26") + "}");
    nad("sriov-dpdk", "intel.com/sriov_dpdk",
        R"({"cniVersion":"1.0.0","type":"sriov","deviceID":"0000:03:00.3","ipam":)" + ipam("192.0.2.64/26") + "}");
    nad("ib-a", "mellanox.com/mlnx_ib",
        R"({"cniVersion":"1.0.0","type":"ib-sriov","deviceID":"0000:81:00.2","ipam":)" + ipam("192.0.2.128/26") + "}");
    pod = node.add_netns("pod-v1");
    fx.add_pod("default", "pod-v1",
               R"([{"name":"mv"},{"name":"hd"},{"name":"sriov-a"},{"name":"sriov-dpdk"},{"name":"ib-a","interface":"ib1"}])");
  }
  std::string ipam(const std::string& subnet) const {
    return R"({"type":"host-local","dataDir":")" + fx.ipam_dir() + R"(","ranges":[[{"subnet":")" + subnet + R"("}]]})";
  }
  void nad(const std::string& name, const std::string& resource, const std::string& config) const {
    std::string yaml = "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: " + name +
                       "\n  namespace: default\n";
    if (!resource.empty()) yaml += "  annotations:\n    k8s.v1.cni.cncf.io/resourceName: " + resource + "\n";
    yaml += "spec:\n  config: '" + config + "'\n";
    fx.write_nad_file("default-" + name, yaml);
  }
  std::string config() const {
    return fx.config(R"("sysfsRoot": ")" + sys.root() + R"(", "deviceInfoDir": ")" + node.dir() + R"(/devinfo", "podResourcesSocket": ")" +
                     kubelet.socket() + R"(", "bpffsDir": ")" +
                     bpf.dir() + R"(/plumb", "runtimeConfig": {"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}],
                     "bandwidth": {"ingressRate": 8000000, "ingressBurst": 80000, "egressRate": 8000000, "egressBurst": 80000}})");
  }

  /// Nothing of the pod is left: only the node's own links (and the shared bridge), the pod
  /// namespace holds lo, no address files, records, VF allocations, device-info files, nftables
  /// elements or BPF map entries.
  void check_clean() const {
    auto now = link_names("");
    now.erase("plumb0");  // shared bridges stay after a completed ADD, as with the reference plugin
    CHECK(now == std::set<std::string>{"lo", "pf0", "pf0p", "vfnd1", "vfnd1p", "ibvf0", "ibvf0p", "mst0", "mst0p", "hd0", "hd0p"});
    CHECK(link_names("pod-v1") == std::set<std::string>{"lo"});
    CHECK(address_files(fx.ipam_dir()).empty());
    CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
    std::vector<std::string> allocations;
    for (auto& f : PodFixture::files_under(fx.state() + "/sriov")) {
      if (!f.ends_with(".lock")) allocations.push_back(f);
    }
    CHECK(allocations.empty());
    CHECK(PodFixture::files_under(node.dir() + "/devinfo/cni").empty());
    Proc nft = sh("nft -j list table inet plumb");
    CHECK(nft.out.find("203.0.113.2") == std::string::npos);  // no masquerade or port-map element for the pod
    Proc st = sh("bpftool -j map dump pinned " + bpf.dir() + "/plumb/bandwidth_v2/state");
    CHECK(st.out.find("\"key\"") == std::string::npos);
    CHECK(read_file(fs::path(fx.store()) / "status/default/pod-v1.json").empty());
  }
};

}  // namespace

TEST_CASE("[v1 records, fake sysfs, kernel netdevs] DEL of a complete pod from format-1 records removes everything") {
  Node node;
  V1Pod v(node);
  Proc add = v.fx.run("ADD", "ctr-v1", v.pod, "default", "pod-v1", v.config());
  INFO(add.out, add.err);
  REQUIRE(add.exit_code == 0);
  install_v1_records(v.fx, node, "complete");

  Proc del = v.fx.run("DEL", "ctr-v1", v.pod, "default", "pod-v1", v.config());
  INFO(del.out, del.err);
  CHECK(del.exit_code == 0);
  v.check_clean();
  // The VF netdevs are back under their names, MTUs and MACs.
  auto vf = plumb::test::ip_json("link show dev vfnd1");
  CHECK(vf[0]["mtu"].GetInt() == 1400);
  CHECK(std::string(vf[0]["address"].GetString()) == "02:aa:00:00:00:01");
}

TEST_CASE("[v1 records, fake sysfs, kernel netdevs] DEL after a SIGKILLed ADD from format-1 records removes everything") {
  // The fresh ADD is killed where it has made what the fixture's had at its step: it announces
  // the IPAM's release with the link (one step where the fixture's plumb took two) and records
  // the gateway address (one more) before the masquerade, so the default network's fourth step
  // is its fourth; with portmap's route_localnet on the bridge and the veth (two more), the
  // macvlan's first intent is its tenth.
  for (auto [set, step] : {std::pair{"killed-at-4", "4"}, std::pair{"killed-at-9", "10"}}) {
    CAPTURE(set);
    Node node;
    V1Pod v(node);
    Proc add = v.fx.run_with(plumb::test::plumb_faulty_binary(), {{"PLUMB_FAULT_AFTER_STEP", step}}, "ADD", "ctr-v1", v.pod,
                             "default", "pod-v1", v.config());
    REQUIRE(add.exit_code == 128 + SIGKILL);
    install_v1_records(v.fx, node, set);
    Proc del = v.fx.run("DEL", "ctr-v1", v.pod, "default", "pod-v1", v.config());
    INFO(del.out, del.err);
    CHECK(del.exit_code == 0);
    v.check_clean();
    // A killed ADD created the shared bridge: its rollback-only removal ran.
    CHECK(link_names("").count("plumb0") == 0);
  }
}
