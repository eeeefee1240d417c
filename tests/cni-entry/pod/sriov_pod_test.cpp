// SR-IOV, InfiniBand and vDPA attachments through the real plumb binary, run as a runtime runs it,
// each case in a fresh private node namespace with a fake sysfs tree (plumb config sysfsRoot),
// veth ends standing in for VF netdevs ([kernel netdevs]) and, for NADs annotated with
// k8s.v1.cni.cncf.io/resourceName, a [fake kubelet] serving the pod-resources API v1 (gRPC on a
// unix socket, plumb config podResourcesSocket) that says which VFs the pod was allocated. The binary uses the real backends, so
// on this kernel (no SR-IOV, RDMA or vdpa) these cases use configurations that need no PF-side
// message (the VF netdev, MTU, vfio-pci and IB-without-GUID paths) and show the clear CNI errors
// where the kernel lacks a feature; the PF-side sequences are covered in-process with a recording
// PfOps in tests/drivers/{sriov,ib_sriov,vdpa,vf_attach}_test.cpp. Kernel state is read back with `ip -j`.
#include <doctest/doctest.h>
#include <unistd.h>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <filesystem>

#include "tests/support/fake_kubelet.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/sriov_fakes.hpp"

using plumb::test::FakeKubelet;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;

namespace {

struct IpLink {
  std::string mac;
  unsigned mtu = 0;
};
std::optional<IpLink> ip_link(const std::string& ns, const std::string& name) {
  auto p = plumb::test::sh("ip -j " + (ns.empty() ? std::string() : "-n " + ns + " ") + "link show dev " + name + " 2>/dev/null");
  if (p.exit_code != 0) return std::nullopt;
  rapidjson::Document d;
  d.Parse(p.out.c_str());
  if (d.HasParseError() || !d.IsArray() || d.Empty()) return std::nullopt;
  return IpLink{d[0]["address"].GetString(), d[0]["mtu"].GetUint()};
}

void veth(const std::string& name, const std::string& mac, unsigned mtu) {
  auto r = plumb::test::sh("ip link add " + name + " address " + mac + " mtu " + std::to_string(mtu) + " type veth peer name " + name + "p");
  REQUIRE(r.exit_code == 0);
}

std::string dump(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return sb.GetString();
}

/// A node with plumb configured for a fake sysfs tree, a private device-info directory and a fake
/// kubelet (its allocations set with allocate()).
struct SriovNode {
  Node& node;
  PodFixture fx;
  plumb::test::FakeSysfs sys;
  FakeKubelet kubelet;
  std::vector<std::string> pods;  // the fake kubelet's pod entries
  explicit SriovNode(Node& n) : node(n), fx(n), sys(n.dir() + "/sys"), kubelet(n.dir() + "/kubelet") {
    sys.add_pf("0000:03:00.0", "pf0", 4, "ice");
    sys.add_vf("0000:03:00.0", 1, "0000:03:00.2", "iavf", "vfnd1");
    sys.add_vf("0000:03:00.0", 2, "0000:03:00.3", "vfio-pci");
    sys.add_pf("0000:81:00.0", "ibp0", 2, "mlx5_core");
    sys.add_vf("0000:81:00.0", 0, "0000:81:00.2", "mlx5_core", "ibvf0", "mlx5_2");
    sys.add_pf("0000:65:00.0", "p0", 2, "mlx5_core");
    sys.add_vf("0000:65:00.0", 0, "0000:65:00.2", "mlx5_core");
    sys.add_vdpa("vdpa0", "0000:65:00.2", "vhost_vdpa", 0);
    veth("pf0", "02:ee:00:00:00:01", 1500);  // the PF "netdev": a veth, so PF-side messages fail
    veth("vfnd1", "02:aa:00:00:00:01", 1400);
    veth("ibvf0", "02:bb:00:00:00:01", 2044);
  }
  std::string devinfo() const { return node.dir() + "/devinfo"; }
  std::string config(const std::string& extra = "") const {
    return fx.config(R"("sysfsRoot": ")" + sys.root() + R"(", "deviceInfoDir": ")" + devinfo() +
                     R"(", "podResourcesSocket": ")" + kubelet.socket() + "\"" + (extra.empty() ? "" : ", " + extra));
  }
  /// Tells the fake kubelet that pod default/<pod> holds `devices` (resource, IDs).
  void allocate(const std::string& pod, const std::vector<std::pair<std::string, std::vector<std::string>>>& devices) {
    pods.push_back(FakeKubelet::pod("default", pod, devices));
    std::string list;
    for (auto& p : pods) list += (list.empty() ? "" : ",") + p;
    kubelet.set_state(R"({"pods":[)" + list + "]}");
  }
  std::string ipam(const std::string& subnet) const {
    return R"({"type":"host-local","dataDir":")" + fx.ipam_dir() + R"(","ranges":[[{"subnet":")" + subnet + R"("}]]})";
  }
  /// A NAD annotated with k8s.v1.cni.cncf.io/resourceName (none when resource is "").
  void nad(const std::string& name, const std::string& resource, const std::string& config) const {
    std::string yaml = "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: " + name +
                       "\n  namespace: default\n";
    if (!resource.empty()) yaml += "  annotations:\n    k8s.v1.cni.cncf.io/resourceName: " + resource + "\n";
    yaml += "spec:\n  config: '" + config + "'\n";
    fx.write_nad_file("default-" + name, yaml);
  }
  void standard_nads() const {
    nad("sriov-a", "intel.com/sriov_netdevice",
        R"({"cniVersion":"1.0.0","type":"sriov","mtu":1300,"capabilities":{"CNIDeviceInfoFile":true},"ipam":)" +
            ipam("198.51.100.0/24") + "}");
    nad("sriov-dpdk", "intel.com/sriov_dpdk",
        R"({"cniVersion":"1.0.0","type":"sriov","ipam":)" + ipam("198.51.100.0/24") + "}");
    nad("ib-a", "mellanox.com/mlnx_ib",
        R"({"cniVersion":"1.0.0","type":"ib-sriov","ipam":)" + ipam("192.0.2.0/24") + "}");
    nad("vdpa-a", "mellanox.com/vdpa", R"({"cniVersion":"1.0.0","type":"vdpa"})");
  }
  std::vector<std::string> allocations() const {
    std::vector<std::string> out;
    for (auto& f : PodFixture::files_under(fx.state() + "/sriov")) {
      if (!f.ends_with(".lock")) out.push_back(std::filesystem::path(f).filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

rapidjson::Document error_of(const Proc& p) {
  rapidjson::Document d;
  d.Parse(p.out.c_str());
  REQUIRE(d.IsObject());
  return d;
}

}  // namespace

TEST_CASE("[kernel netdevs, plumb binary] pod with default + SR-IOV (VF netdev, MTU) + SR-IOV (vfio-pci) + IB (no GUID): "
          "network-status holds exactly the spec's device-info for each; DEL restores name, MAC, MTU and namespace") {
  Node node;
  SriovNode n(node);
  n.standard_nads();
  // The device plugin wrote a file for the first VF (with vhost-net, which only it knows).
  plumb::test::write_file(n.devinfo() + "/dp/intel.com-sriov_netdevice-0000:03:00.2-device.json",
                          R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.2","vhost-net":"/dev/vhost-net"}})");
  std::string pod = node.add_netns("pod-s");
  n.allocate("pod-s", {{"intel.com/sriov_netdevice", {"0000:03:00.2"}},
                       {"intel.com/sriov_dpdk", {"0000:03:00.3"}},
                       {"mellanox.com/mlnx_ib", {"0000:81:00.2"}}});
  n.fx.add_pod("default", "pod-s", R"([{"name":"sriov-a"},{"name":"sriov-dpdk"},{"name":"ib-a","interface":"ib1"}])");

  Proc add = n.fx.run("ADD", "ctr-s", pod, "default", "pod-s", n.config());
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code == 0);

  // Kernel: the VF netdevs are in the pod under their new names; the SR-IOV one with its MTU.
  CHECK_FALSE(ip_link("", "vfnd1"));
  CHECK_FALSE(ip_link("", "ibvf0"));
  auto net1 = ip_link("pod-s", "net1");
  REQUIRE(net1);
  CHECK(net1->mtu == 1300);
  CHECK(net1->mac == "02:aa:00:00:00:01");
  CHECK(ip_link("pod-s", "ib1"));
  CHECK_FALSE(ip_link("pod-s", "net2"));  // the vfio-pci VF has no netdev

  rapidjson::Document st;
  std::string status = n.fx.status_of("default", "pod-s");
  INFO("status: ", status);
  st.Parse(status.c_str());
  REQUIRE(st.IsArray());
  REQUIRE(st.Size() == 4);
  CHECK_FALSE(st[0].HasMember("device-info"));
  CHECK(std::string(st[1]["name"].GetString()) == "default/sriov-a");
  CHECK(dump(st[1]["device-info"]) ==
        R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.2","vhost-net":"/dev/vhost-net","pf-pci-address":"0000:03:00.0"}})");
  CHECK(std::string(st[2]["name"].GetString()) == "default/sriov-dpdk");
  CHECK(dump(st[2]["device-info"]) == R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.3","pf-pci-address":"0000:03:00.0"}})");
  CHECK(std::string(st[3]["interface"].GetString()) == "ib1");
  CHECK(dump(st[3]["device-info"]) ==
        R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:81:00.2","rdma-device":"mlx5_2","pf-pci-address":"0000:81:00.0"}})");
  CHECK(PodFixture::files_under(n.devinfo() + "/cni").size() == 3);
  CHECK(n.allocations().size() == 3);

  Proc check = n.fx.run("CHECK", "ctr-s", pod, "default", "pod-s", n.config());
  INFO("check: ", check.out, check.err);
  CHECK(check.exit_code == 0);

  Proc del = n.fx.run("DEL", "ctr-s", pod, "default", "pod-s", n.config());
  INFO("del: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  auto vf = ip_link("", "vfnd1");
  REQUIRE(vf);
  CHECK(vf->mtu == 1400);
  CHECK(vf->mac == "02:aa:00:00:00:01");
  auto ib = ip_link("", "ibvf0");
  REQUIRE(ib);
  CHECK(ib->mtu == 2044);
  CHECK(plumb::test::ip_json("-n pod-s link show").Size() == 1);  // lo only
  CHECK(PodFixture::files_under(n.devinfo() + "/cni").empty());
  CHECK(n.allocations().empty());
  CHECK(PodFixture::files_under(n.fx.state() + "/containers").empty());
}

TEST_CASE("[kernel, plumb binary] a PF-side setting requested on a veth PF: a clear CNI error, and the ADD is rolled back") {
  Node node;
  SriovNode n(node);
  n.nad("sriov-vlan", "", R"({"cniVersion":"1.0.0","type":"sriov","deviceID":"0000:03:00.2","vlan":100,"ipam":)" +
                              n.ipam("198.51.100.0/24") + "}");
  std::string pod = node.add_netns("pod-v");
  n.fx.add_pod("default", "pod-v", R"([{"name":"sriov-vlan"}])");
  Proc add = n.fx.run("ADD", "ctr-v", pod, "default", "pod-v", n.config());
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code != 0);
  auto e = error_of(add);
  CHECK(e["code"].GetUint() == 104);  // the kernel lacks the feature
  std::string msg = e["msg"].GetString();
  CHECK(msg.find("default/sriov-vlan") != std::string::npos);
  CHECK(msg.find("PF pf0 reports no VFs") != std::string::npos);
  auto vf = ip_link("", "vfnd1");
  REQUIRE(vf);
  CHECK(vf->mtu == 1400);
  CHECK(plumb::test::ip_json("-n pod-v link show").Size() == 1);
  CHECK(n.allocations().empty());
}

TEST_CASE("[kernel netdevs, plumb binary] vDPA on a kernel without the vdpa family: a clear error, and the VF an earlier "
          "attachment of the same ADD had moved is rolled back to its name, MAC and MTU") {
  Node node;
  SriovNode n(node);
  n.standard_nads();
  std::string pod = node.add_netns("pod-d");
  n.allocate("pod-d", {{"intel.com/sriov_netdevice", {"0000:03:00.2"}}, {"mellanox.com/vdpa", {"0000:65:00.2"}}});
  n.fx.add_pod("default", "pod-d", R"([{"name":"sriov-a"},{"name":"vdpa-a"}])");
  Proc add = n.fx.run("ADD", "ctr-d", pod, "default", "pod-d", n.config());
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code != 0);
  auto e = error_of(add);
  CHECK(e["code"].GetUint() == 104);
  std::string msg = e["msg"].GetString();
  CHECK(msg.find("default/vdpa-a") != std::string::npos);
  CHECK(msg.find("no \"vdpa\" generic netlink family") != std::string::npos);
  auto vf = ip_link("", "vfnd1");
  REQUIRE(vf);
  CHECK(vf->mtu == 1400);
  CHECK(vf->mac == "02:aa:00:00:00:01");
  CHECK(plumb::test::ip_json("-n pod-d link show").Size() == 1);
  CHECK(n.allocations().empty());
  CHECK(PodFixture::files_under(n.devinfo() + "/cni").empty());
}

TEST_CASE("[kernel netdevs, plumb binary] two pods asking for one VF: the second fails, the first is untouched") {
  Node node;
  SriovNode n(node);
  n.standard_nads();
  std::string pod1 = node.add_netns("pod-1");
  std::string pod2 = node.add_netns("pod-2");
  // A kubelet would not give one VF to two pods; this one does, to show the VF claim refusing it.
  n.allocate("pod-1", {{"intel.com/sriov_netdevice", {"0000:03:00.2"}}});
  n.allocate("pod-2", {{"intel.com/sriov_netdevice", {"0000:03:00.2"}}});
  n.fx.add_pod("default", "pod-1", R"([{"name":"sriov-a"}])");
  n.fx.add_pod("default", "pod-2", R"([{"name":"sriov-a"}])");
  Proc a1 = n.fx.run("ADD", "ctr-1", pod1, "default", "pod-1", n.config());
  INFO("first: ", a1.out, a1.err);
  REQUIRE(a1.exit_code == 0);
  std::string status1 = n.fx.status_of("default", "pod-1");

  Proc a2 = n.fx.run("ADD", "ctr-2", pod2, "default", "pod-2", n.config());
  INFO("second: ", a2.out, a2.err);
  REQUIRE(a2.exit_code != 0);
  auto e = error_of(a2);
  CHECK(e["code"].GetUint() == 105);
  CHECK(std::string(e["msg"].GetString()).find("already allocated to container ctr-1") != std::string::npos);

  auto net1 = ip_link("pod-1", "net1");
  REQUIRE(net1);
  CHECK(net1->mtu == 1300);
  CHECK(n.fx.status_of("default", "pod-1") == status1);
  CHECK(n.allocations() == std::vector<std::string>{"0000:03:00.2"});
  CHECK(PodFixture::files_under(n.devinfo() + "/cni").size() == 1);  // the first pod's file only
  CHECK(plumb::test::ip_json("-n pod-2 link show").Size() == 1);

  CHECK(n.fx.run("DEL", "ctr-1", pod1, "default", "pod-1", n.config()).exit_code == 0);
  CHECK(ip_link("", "vfnd1"));
}

namespace {

/// SR-IOV NADs carrying only resourceName (as sriov-network-operator writes them): no deviceID.
void resource_only_nads(const SriovNode& n) {
  for (const char* name : {"sriov-def", "sriov-x", "sriov-y"}) {
    n.nad(name, "intel.com/sriov_netdevice",
          R"({"cniVersion":"1.0.0","type":"sriov","capabilities":{"deviceID":true,"CNIDeviceInfoFile":true},"ipam":)" +
              n.ipam("198.51.100.0/24") + "}");
  }
}

/// VFs 3 and 4 of pf0 (0000:03:00.4 netdev vfnd3, 0000:03:00.5 netdev vfnd4) besides VF1.
void more_vfs(SriovNode& n) {
  n.sys.add_vf("0000:03:00.0", 3, "0000:03:00.4", "iavf", "vfnd3");
  n.sys.add_vf("0000:03:00.0", 0, "0000:03:00.5", "iavf", "vfnd4");
  veth("vfnd3", "02:aa:00:00:00:03", 1500);
  veth("vfnd4", "02:aa:00:00:00:04", 1500);
}

std::string pci_of(const rapidjson::Value& entry) { return entry["device-info"]["pci"]["pci-address"].GetString(); }

}  // namespace

TEST_CASE("[fake kubelet, kernel netdevs, plumb binary] NADs with only resourceName: the pod gets exactly the VFs "
          "kubelet allocated, in attachment order (defaultNetworks first), with device-info in network-status") {
  Node node;
  SriovNode n(node);
  more_vfs(n);
  resource_only_nads(n);
  // kubelet's answer is unsorted; another pod holds a VF of the same resource.
  n.allocate("other", {{"intel.com/sriov_netdevice", {"0000:03:00.3"}}});
  n.allocate("pod-k", {{"intel.com/sriov_netdevice", {"0000:03:00.5", "0000:03:00.2", "0000:03:00.4"}}});
  plumb::test::write_file(n.devinfo() + "/dp/intel.com-sriov_netdevice-0000:03:00.5-device.json",
                          R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.5","vhost-net":"/dev/vhost-net"}})");
  std::string pod = node.add_netns("pod-k");
  n.fx.add_pod("default", "pod-k", R"([{"name":"sriov-x"},{"name":"sriov-y","interface":"vf2"}])");
  const std::string conf = n.config(R"("defaultNetworks": ["default/sriov-def"])");

  Proc add = n.fx.run("ADD", "ctr-k", pod, "default", "pod-k", conf);
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(n.kubelet.calls() == std::vector<std::string>{"Get default/pod-k"});  // one lookup for the whole pod

  // Kernel: sorted IDs handed out in attachment order: 03:00.2 (net1), 03:00.4 (net2), 03:00.5 (vf2).
  for (const char* vf : {"vfnd1", "vfnd3", "vfnd4"}) CHECK_FALSE(ip_link("", vf));
  REQUIRE(ip_link("pod-k", "net1"));
  CHECK(ip_link("pod-k", "net1")->mac == "02:aa:00:00:00:01");
  CHECK(ip_link("pod-k", "net2")->mac == "02:aa:00:00:00:03");
  CHECK(ip_link("pod-k", "vf2")->mac == "02:aa:00:00:00:04");
  CHECK(n.allocations() == std::vector<std::string>{"0000:03:00.2", "0000:03:00.4", "0000:03:00.5"});

  rapidjson::Document st;
  st.Parse(n.fx.status_of("default", "pod-k").c_str());
  REQUIRE(st.IsArray());
  REQUIRE(st.Size() == 4);
  CHECK(std::string(st[1]["name"].GetString()) == "default/sriov-def");
  CHECK(pci_of(st[1]) == "0000:03:00.2");
  CHECK(std::string(st[2]["name"].GetString()) == "default/sriov-x");
  CHECK(pci_of(st[2]) == "0000:03:00.4");
  CHECK(std::string(st[3]["interface"].GetString()) == "vf2");
  CHECK(dump(st[3]["device-info"]) ==
        R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.5","vhost-net":"/dev/vhost-net","pf-pci-address":"0000:03:00.0"}})");

  Proc check = n.fx.run("CHECK", "ctr-k", pod, "default", "pod-k", conf);
  INFO("check: ", check.out, check.err);
  CHECK(check.exit_code == 0);
  Proc del = n.fx.run("DEL", "ctr-k", pod, "default", "pod-k", conf);
  INFO("del: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(n.kubelet.calls().size() == 1);  // CHECK and DEL work from the records
  for (const char* vf : {"vfnd1", "vfnd3", "vfnd4"}) CHECK(ip_link("", vf));
  CHECK(n.allocations().empty());
  CHECK(PodFixture::files_under(n.devinfo() + "/cni").empty());
}

TEST_CASE("[fake kubelet, plumb binary] kubelet's devices cannot be had: socket missing, kubelet slow, fewer devices "
          "than networks, resource not allocated: a CNI error naming the resource and the pod, nothing attached") {
  Node node;
  SriovNode n(node);
  resource_only_nads(n);
  std::string pod = node.add_netns("pod-e");
  n.fx.add_pod("default", "pod-e", R"([{"name":"sriov-x"},{"name":"sriov-y"}])");
  std::string conf = n.config();
  unsigned code = 0;
  std::string want;
  SUBCASE("socket missing") {
    conf = n.fx.config(R"("sysfsRoot": ")" + n.sys.root() + R"(", "deviceInfoDir": ")" + n.devinfo() +
                       R"(", "podResourcesSocket": ")" + node.dir() + "/none.sock\"");
    code = 11;
    want = "socket " + node.dir() + "/none.sock cannot be used";
  }
  SUBCASE("kubelet slow") {
    n.kubelet.set_state(R"({"delaySeconds": 3, "pods": []})");
    conf = n.config(R"("podResourcesTimeoutSeconds": 0.5)");
    code = 11;
    want = "did not answer within 500 ms";
  }
  SUBCASE("fewer devices than networks") {
    n.allocate("pod-e", {{"intel.com/sriov_netdevice", {"0000:03:00.2"}}});
    code = 7;
    want = "pod default/pod-e has 1 device(s) of resource intel.com/sriov_netdevice (0000:03:00.2) but 2 networks";
  }
  SUBCASE("resource not allocated to the pod") {
    n.allocate("pod-e", {{"intel.com/other", {"0000:03:00.2"}}});
    code = 7;
    want = "kubelet allocated no device of resource intel.com/sriov_netdevice to pod default/pod-e";
  }
  Proc add = n.fx.run("ADD", "ctr-e", pod, "default", "pod-e", conf);
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code != 0);
  auto e = error_of(add);
  CHECK(e["code"].GetUint() == code);
  std::string msg = e["msg"].GetString();
  CHECK(msg.find(want) != std::string::npos);
  CHECK(msg.find("intel.com/sriov_netdevice") != std::string::npos);
  CHECK(msg.find("default/pod-e") != std::string::npos);
  // Planned before the first change: nothing moved, claimed, recorded or addressed.
  CHECK(ip_link("", "vfnd1"));
  CHECK(plumb::test::ip_json("-n pod-e link show").Size() == 1);
  CHECK(n.allocations().empty());
  CHECK(PodFixture::files_under(n.fx.state()).empty());
  CHECK(PodFixture::files_under(n.fx.ipam_dir()).empty());
}

TEST_CASE("[plumb binary] an SR-IOV network whose NAD has neither resourceName nor deviceID fails naming the NAD") {
  Node node;
  SriovNode n(node);
  n.nad("sriov-nodev", "", R"({"cniVersion":"1.0.0","type":"sriov","ipam":)" + n.ipam("198.51.100.0/24") + "}");
  std::string pod = node.add_netns("pod-n");
  n.fx.add_pod("default", "pod-n", R"([{"name":"sriov-nodev"}])");
  Proc add = n.fx.run("ADD", "ctr-n", pod, "default", "pod-n", n.config());
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code != 0);
  auto e = error_of(add);
  CHECK(e["code"].GetUint() == 7);
  std::string msg = e["msg"].GetString();
  CHECK(msg.find("default/sriov-nodev") != std::string::npos);
  CHECK(msg.find("k8s.v1.cni.cncf.io/resourceName") != std::string::npos);
  CHECK(n.kubelet.calls().empty());  // no resourceName: kubelet is not asked
  CHECK(ip_link("", "vfnd1"));
}
