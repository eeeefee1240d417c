// SR-IOV, InfiniBand and vDPA attachments through the real plumb binary, run as a runtime runs it,
// each case in a fresh private node namespace with a fake sysfs tree (plumb config sysfsRoot) and
// veth ends standing in for VF netdevs ([kernel netdevs]). The binary uses the real backends, so
// on this kernel (no SR-IOV, RDMA or vdpa) these cases use configurations that need no PF-side
// message (the VF netdev, MTU, vfio-pci and IB-without-GUID paths) and show the clear CNI errors
// where the kernel lacks a feature; the PF-side sequences are covered in-process with a recording
// PfOps in tests/drivers/{sriov,ib_sriov,vdpa,vf_attach}_test.cpp. Kernel state is read back with `ip -j`.
#include <doctest/doctest.h>
#include <unistd.h>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <filesystem>

#include "tests/support/sriov_fakes.hpp"
#include "tests/support/pod_fixture.hpp"

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

/// A node with plumb configured for a fake sysfs tree and a private device-info directory.
struct SriovNode {
  Node& node;
  PodFixture fx;
  plumb::test::FakeSysfs sys;
  explicit SriovNode(Node& n) : node(n), fx(n), sys(n.dir() + "/sys") {
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
  std::string config() const {
    return fx.config(R"("sysfsRoot": ")" + sys.root() + R"(", "deviceInfoDir": ")" + devinfo() + R"(")");
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
        R"({"cniVersion":"1.0.0","type":"sriov","deviceID":"0000:03:00.2","mtu":1300,"capabilities":{"CNIDeviceInfoFile":true},"ipam":)" +
            ipam("198.51.100.0/24") + "}");
    nad("sriov-dpdk", "intel.com/sriov_dpdk",
        R"({"cniVersion":"1.0.0","type":"sriov","deviceID":"0000:03:00.3","ipam":)" + ipam("198.51.100.0/24") + "}");
    nad("ib-a", "mellanox.com/mlnx_ib",
        R"({"cniVersion":"1.0.0","type":"ib-sriov","deviceID":"0000:81:00.2","ipam":)" + ipam("192.0.2.0/24") + "}");
    nad("vdpa-a", "mellanox.com/vdpa", R"({"cniVersion":"1.0.0","type":"vdpa","deviceID":"0000:65:00.2"})");
  }
  std::vector<std::string> allocations() const {
    std::vector<std::string> out;
    for (auto& f : PodFixture::files_under(fx.state() + "/sriov")) {
      if (!f.ends_with(".lock")) out.push_back(std::filesystem::path(f).filename().string());
    }
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

TEST_CASE("[plumb binary] an SR-IOV network without a deviceID fails with an error naming the NAD") {
  Node node;
  SriovNode n(node);
  n.nad("sriov-nodev", "intel.com/sriov_netdevice",
        R"({"cniVersion":"1.0.0","type":"sriov","ipam":)" + n.ipam("198.51.100.0/24") + "}");
  std::string pod = node.add_netns("pod-n");
  n.fx.add_pod("default", "pod-n", R"([{"name":"sriov-nodev"}])");
  Proc add = n.fx.run("ADD", "ctr-n", pod, "default", "pod-n", n.config());
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code != 0);
  auto e = error_of(add);
  CHECK(e["code"].GetUint() == 7);
  std::string msg = e["msg"].GetString();
  CHECK(msg.find("default/sriov-nodev") != std::string::npos);
  CHECK(msg.find("deviceID") != std::string::npos);
  CHECK(ip_link("", "vfnd1"));
}
