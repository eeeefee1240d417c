// The host-device driver end to end: node netdevs (veth stand-ins; the kernel here has no
// physical NICs to spare) moved into pods and back by the real plumb binary, selected by name,
// MAC, a fake sysfs tree (kernelpath, pciBusID, runtimeConfig.deviceID); kernel state read with
// `ip -j`.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tests/support/fake_kubelet.hpp"
#include "tests/support/pod_fixture.hpp"

using plumb::test::ip_json;
using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;
using plumb::test::sh;

namespace {

/// A veth pair in the node: `name` (the device to hand over: MTU 1400, fixed MAC, up) and its
/// peer `<name>p` with 192.0.2.1/24, the far end the pod can ping.
void add_device(const std::string& name, const std::string& mac) {
  REQUIRE(sh("ip link add " + name + " mtu 1400 address " + mac + " type veth peer name " + name + "p").exit_code == 0);
  REQUIRE(sh("ip link set " + name + " up && ip link set " + name + "p up && ip addr add 192.0.2.1/24 dev " + name + "p").exit_code == 0);
}

std::string hd_nad(const std::string& selector, const std::string& ipam_dir) {
  return R"({"cniVersion": "1.0.0", "type": "host-device", )" + selector + R"(,
   "ipam": {"type": "host-local", "dataDir": ")" + ipam_dir + R"(", "ranges": [[{"subnet": "192.0.2.0/24", "rangeStart": "192.0.2.10"}]]}})";
}

struct LinkState {
  bool exists = false;
  int ifindex = 0;
  int mtu = 0;
  std::string mac;
  bool up = false;
};

/// One link's state as iproute2 reports it ("" = the node namespace).
LinkState link_state(const std::string& ns, const std::string& dev) {
  LinkState s;
  if (link_names(ns).count(dev) == 0) return s;
  auto d = ip_json((ns.empty() ? std::string() : "-n " + ns + " ") + "link show dev " + dev);
  REQUIRE(d.Size() == 1);
  s.exists = true;
  s.ifindex = d[0]["ifindex"].GetInt();
  s.mtu = d[0]["mtu"].GetInt();
  s.mac = d[0]["address"].GetString();
  for (auto& f : d[0]["flags"].GetArray()) s.up |= std::string(f.GetString()) == "UP";
  return s;
}

std::string first_addr(const std::string& ns, const std::string& dev) {
  auto d = ip_json("-n " + ns + " addr show dev " + dev);
  for (auto& l : d.GetArray()) {
    for (auto& a : l["addr_info"].GetArray()) {
      if (std::string(a["family"].GetString()) == "inet") return a["local"].GetString();
    }
  }
  return "";
}

bool no_state(const PodFixture& fx) { return PodFixture::files_under(fx.state() + "/containers").empty(); }

/// A fake sysfs device directory whose net/ lists `ifname` (as /sys/devices/.../net/<ifname>).
void fake_sysfs_device(const std::string& device_dir, const std::string& ifname) {
  std::filesystem::create_directories(device_dir + "/net/" + ifname);
}

/// ADDs a pod using the NAD `nad` and checks that `dev` (MAC `mac`) became its net1, configured
/// and reachable; returns the pod's netns path.
std::string add_and_check(Node& node, PodFixture& fx, const std::string& cid, const std::string& nad, const std::string& dev,
                          const std::string& mac, const std::string& config) {
  std::string pod = node.add_netns("pod-" + cid);
  fx.add_pod("default", "pod-" + cid, nad);
  Proc a = fx.run("ADD", cid, pod, "default", "pod-" + cid, config);
  INFO(nad, ": ", a.out, a.err);
  REQUIRE(a.exit_code == 0);
  CHECK_FALSE(link_state("", dev).exists);
  auto in_pod = link_state("pod-" + cid, "net1");
  REQUIRE(in_pod.exists);
  CHECK(in_pod.mac == mac);
  CHECK(in_pod.mtu == 1400);
  CHECK(in_pod.up);
  CHECK(first_addr("pod-" + cid, "net1") == "192.0.2.10");
  return pod;
}

}  // namespace

TEST_CASE("host-device by name: moved into the pod and renamed, reachable, restored on DEL (name, MTU, MAC, down)") {
  Node node;
  PodFixture fx(node);
  add_device("hd0", "02:00:00:00:01:01");
  int ifindex = link_state("", "hd0").ifindex;
  fx.add_nad("default", "hd", hd_nad(R"("device": "hd0")", fx.ipam_dir()));
  std::string pod = add_and_check(node, fx, "a", "hd", "hd0", "02:00:00:00:01:01", fx.config());
  Proc ping = sh("ip netns exec pod-a ping -c 2 -W 2 192.0.2.1");
  INFO("ping: ", ping.out, ping.err);
  CHECK(ping.exit_code == 0);

  // The pod changed its device; DEL must hand it back as it was lent.
  REQUIRE(sh("ip -n pod-a link set net1 mtu 1300 address 02:00:00:00:01:ff").exit_code == 0);
  Proc del = fx.run("DEL", "a", pod, "default", "pod-a", fx.config());
  INFO("del: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(link_names("pod-a") == std::set<std::string>{"lo"});
  auto back = link_state("", "hd0");
  REQUIRE(back.exists);
  CHECK(back.ifindex == ifindex);
  CHECK(back.mtu == 1400);
  CHECK(back.mac == "02:00:00:00:01:01");
  CHECK_FALSE(back.up);
  CHECK(no_state(fx));
  // A second DEL changes nothing.
  REQUIRE(sh("ip link set hd0 up").exit_code == 0);
  Proc del2 = fx.run("DEL", "a", pod, "default", "pod-a", fx.config());
  CHECK(del2.exit_code == 0);
  CHECK(link_state("", "hd0").up);
}

TEST_CASE("host-device by hwaddr, kernelpath and pciBusID (fake sysfs), and runtimeConfig.deviceID") {
  Node node;
  PodFixture fx(node);
  std::string sysfs = node.dir() + "/fakesys";
  std::string config = fx.config(R"("sysfsRoot": ")" + sysfs + R"(")");
  add_device("hwa0", "02:00:00:00:02:01");
  add_device("kp0", "02:00:00:00:02:02");
  add_device("pci0", "02:00:00:00:02:03");
  add_device("dev0", "02:00:00:00:02:04");
  fake_sysfs_device(sysfs + "/devices/pci0000:00/0000:00:05.0", "kp0");
  fake_sysfs_device(sysfs + "/devices/pci0000:00/0000:00:06.0", "pci0");
  std::filesystem::create_directories(sysfs + "/bus/pci/devices");
  std::filesystem::create_directory_symlink("../../../devices/pci0000:00/0000:00:06.0", sysfs + "/bus/pci/devices/0000:00:06.0");
  fake_sysfs_device(sysfs + "/devices/pci0000:00/0000:00:07.0", "dev0");
  std::filesystem::create_directory_symlink("../../../devices/pci0000:00/0000:00:07.0", sysfs + "/bus/pci/devices/0000:00:07.0");

  fx.add_nad("default", "by-mac", hd_nad(R"("hwaddr": "02:00:00:00:02:01")", fx.ipam_dir() + "/a"));
  fx.add_nad("default", "by-path", hd_nad(R"("kernelpath": "/sys/devices/pci0000:00/0000:00:05.0")", fx.ipam_dir() + "/b"));
  fx.add_nad("default", "by-pci", hd_nad(R"("pciBusID": "0000:00:06.0")", fx.ipam_dir() + "/c"));
  // deviceID (from the runtime) overrides pciBusID, as in the reference plugin.
  fx.add_nad("default", "by-devid", hd_nad(R"("pciBusID": "0000:00:06.0", "capabilities": {"deviceID": true},
    "runtimeConfig": {"deviceID": "0000:00:07.0"})", fx.ipam_dir() + "/d"));

  struct Case {
    const char* cid;
    const char* nad;
    const char* dev;
    const char* mac;
  };
  for (auto c : {Case{"a", "by-mac", "hwa0", "02:00:00:00:02:01"}, Case{"b", "by-path", "kp0", "02:00:00:00:02:02"},
                 Case{"c", "by-pci", "pci0", "02:00:00:00:02:03"}, Case{"d", "by-devid", "dev0", "02:00:00:00:02:04"}}) {
    INFO("case ", c.nad);
    std::string pod = add_and_check(node, fx, c.cid, c.nad, c.dev, c.mac, config);
    if (std::string(c.nad) == "by-pci") {
      rapidjson::Document st;
      st.Parse(fx.status_of("default", std::string("pod-") + c.cid).c_str());
      REQUIRE(st.IsArray());
      REQUIRE(st.Size() == 2);
      CHECK(std::string(st[1]["interface"].GetString()) == "net1");
      CHECK(std::string(st[1]["mac"].GetString()) == c.mac);
    }
    Proc del = fx.run("DEL", c.cid, pod, "default", std::string("pod-") + c.cid, config);
    INFO("del: ", del.out, del.err);
    CHECK(del.exit_code == 0);
    auto back = link_state("", c.dev);
    CHECK(back.exists);
    CHECK(back.mac == c.mac);
    CHECK_FALSE(back.up);
  }
  CHECK(no_state(fx));
}

TEST_CASE("host-device: selection errors name the selector and change nothing") {
  Node node;
  PodFixture fx(node);
  std::string sysfs = node.dir() + "/fakesys";
  std::string config = fx.config(R"("sysfsRoot": ")" + sysfs + R"(")");
  add_device("hd0", "02:00:00:00:03:01");
  std::filesystem::create_directories(sysfs + "/bus/pci/devices/0000:00:09.0");  // a device without a netdev
  fx.add_nad("default", "two", hd_nad(R"("device": "hd0", "hwaddr": "02:00:00:00:03:01")", fx.ipam_dir()));
  fx.add_nad("default", "none", hd_nad(R"("mtu": 1400)", fx.ipam_dir()));
  fx.add_nad("default", "missing", hd_nad(R"("device": "nosuch0")", fx.ipam_dir()));
  fx.add_nad("default", "nomac", hd_nad(R"("hwaddr": "02:00:00:00:03:99")", fx.ipam_dir()));
  fx.add_nad("default", "nopci", hd_nad(R"("pciBusID": "0000:00:08.0")", fx.ipam_dir()));
  fx.add_nad("default", "nonet", hd_nad(R"("pciBusID": "0000:00:09.0")", fx.ipam_dir()));
  fx.add_nad("default", "escape", hd_nad(R"("kernelpath": "/sys/devices/../../etc")", fx.ipam_dir()));
  std::string pod = node.add_netns("pod-a");
  for (auto [nad, needle] : {std::pair{"two", "exactly one"}, std::pair{"none", "exactly one"}, std::pair{"missing", "nosuch0"},
                             std::pair{"nomac", "02:00:00:00:03:99"}, std::pair{"nopci", "0000:00:08.0"},
                             std::pair{"nonet", "no network interface"}, std::pair{"escape", "/sys/devices/../../etc"}}) {
    fx.add_pod("default", "pod-a", nad);
    Proc a = fx.run("ADD", "a", pod, "default", "pod-a", config);
    INFO(nad, ": ", a.out, a.err);
    CHECK(a.exit_code != 0);
    CHECK(a.out.find(needle) != std::string::npos);
    CHECK(link_names("pod-a") == std::set<std::string>{"lo"});
    CHECK(link_state("", "hd0").up);
    CHECK(no_state(fx));
  }
}

TEST_CASE("host-device: the pod namespace deleted before DEL, virtual stand-in destroyed with it: DEL succeeds") {
  // A veth dies with its namespace (a physical NIC would go back to the initial namespace:
  // simulated in the next case).
  Node node;
  PodFixture fx(node);
  add_device("hd0", "02:00:00:00:04:01");
  fx.add_nad("default", "hd", hd_nad(R"("device": "hd0")", fx.ipam_dir()));
  std::string pod = add_and_check(node, fx, "a", "hd", "hd0", "02:00:00:00:04:01", fx.config());
  node.del_netns("pod-a");
  // The namespace goes away asynchronously (cleanup_net): wait, bounded, for the veth to die.
  for (int i = 0; i < 50 && link_names("").count("hd0p") != 0; ++i) usleep(100 * 1000);
  REQUIRE(link_names("").count("hd0p") == 0);
  Proc del = fx.run("DEL", "a", pod, "default", "pod-a", fx.config());
  INFO("del: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(link_names("").count("hd0") == 0);
  CHECK(no_state(fx));
}

TEST_CASE("host-device: the pod namespace deleted before DEL, device returned to the node as the kernel does: restored") {
  // What the kernel does with a physical device when its namespace dies (default_device_exit):
  // it moves it to the initial namespace keeping its ifindex and its pod-side name. The test
  // performs that move itself, then deletes the namespace.
  Node node;
  PodFixture fx(node);
  add_device("hd0", "02:00:00:00:05:01");
  int ifindex = link_state("", "hd0").ifindex;
  fx.add_nad("default", "hd", hd_nad(R"("device": "hd0")", fx.ipam_dir()));
  std::string pod = add_and_check(node, fx, "a", "hd", "hd0", "02:00:00:00:05:01", fx.config());
  REQUIRE(sh("ip -n pod-a link set net1 mtu 1280 address 02:00:00:00:05:ff").exit_code == 0);
  REQUIRE(sh("ip -n pod-a link set net1 netns " + std::to_string(getpid())).exit_code == 0);
  node.del_netns("pod-a");
  REQUIRE(link_state("", "net1").exists);
  Proc del = fx.run("DEL", "a", pod, "default", "pod-a", fx.config());
  INFO("del: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK_FALSE(link_state("", "net1").exists);
  auto back = link_state("", "hd0");
  REQUIRE(back.exists);
  CHECK(back.ifindex == ifindex);
  CHECK(back.mtu == 1400);
  CHECK(back.mac == "02:00:00:00:05:01");
  CHECK_FALSE(back.up);
  CHECK(no_state(fx));
}

TEST_CASE("host-device: an ADD failing after the move (tuning sysctl outside net/) returns the device to the node") {
  Node node;
  PodFixture fx(node);
  add_device("hd0", "02:00:00:00:06:01");
  int ifindex = link_state("", "hd0").ifindex;
  fx.add_nad("default", "hd", R"({"cniVersion": "1.0.0", "name": "hd", "plugins": [
    {"type": "host-device", "device": "hd0", "ipam": {"type": "host-local", "dataDir": ")" + fx.ipam_dir() +
                                  R"(", "ranges": [[{"subnet": "192.0.2.0/24", "rangeStart": "192.0.2.10"}]]}},
    {"type": "tuning", "mtu": 1300, "sysctl": {"kernel/domainname": "x"}}]})");
  std::string pod = node.add_netns("pod-a");
  fx.add_pod("default", "pod-a", "hd");
  Proc a = fx.run("ADD", "a", pod, "default", "pod-a", fx.config());
  INFO(a.out, a.err);
  CHECK(a.exit_code != 0);
  CHECK(a.out.find("kernel/domainname") != std::string::npos);
  CHECK(link_names("pod-a") == std::set<std::string>{"lo"});
  auto back = link_state("", "hd0");
  REQUIRE(back.exists);
  CHECK(back.ifindex == ifindex);
  CHECK(back.mtu == 1400);
  CHECK(back.mac == "02:00:00:00:06:01");
  CHECK(no_state(fx));
}

TEST_CASE("host-device (fake sysfs, fake kubelet): a PCI device bound to vfio-pci, allocated by kubelet for the NAD's resourceName, is handed over in userspace (DPDK) mode") {
  Node node;
  PodFixture fx(node);
  const std::string sysfs = node.dir() + "/fakesys", devinfo = node.dir() + "/devinfo";
  const std::string dev = sysfs + "/bus/pci/devices/0000:03:00.1";
  std::filesystem::create_directories(dev);
  std::filesystem::create_directories(sysfs + "/bus/pci/drivers/vfio-pci");
  std::filesystem::create_directory_symlink("../../drivers/vfio-pci", dev + "/driver");
  fx.write_nad_file("default-dpdk", "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n"
                    "  name: dpdk\n  namespace: default\n  annotations:\n    k8s.v1.cni.cncf.io/resourceName: example.com/dpdk\n"
                    "spec:\n  config: '{\"cniVersion\": \"1.0.0\", \"type\": \"host-device\", "
                    "\"capabilities\": {\"deviceID\": true, \"CNIDeviceInfoFile\": true}, "
                    "\"ipam\": {\"type\": \"static\", \"addresses\": [{\"address\": \"192.0.2.44/24\"}]}}'\n");
  // kubelet's device manager allocated the device to the pod: it reaches host-device as
  // runtimeConfig.deviceID (the NAD names only the resource, as sriov-network-operator writes it).
  plumb::test::FakeKubelet kubelet(node.dir() + "/kubelet",
                                   R"({"pods":[)" + plumb::test::FakeKubelet::pod("default", "pod-a", {{"example.com/dpdk", {"0000:03:00.1"}}}) + "]}");
  std::string pod = node.add_netns("pod-a");
  fx.add_pod("default", "pod-a", "dpdk");
  const std::string config = fx.config(R"("sysfsRoot": ")" + sysfs + R"(", "deviceInfoDir": ")" + devinfo +
                                       R"(", "podResourcesSocket": ")" + kubelet.socket() + R"(")");
  Proc a = fx.run("ADD", "a", pod, "default", "pod-a", config);
  INFO("add: ", a.out, a.err);
  REQUIRE(a.exit_code == 0);
  // Nothing moved: the pod has its default network only.
  CHECK(link_names("pod-a") == std::set<std::string>{"lo", "eth0"});
  // The attachment's status: net1 with the IPAM address and no MAC, and the device-info.
  rapidjson::Document st;
  st.Parse(fx.status_of("default", "pod-a").c_str());
  REQUIRE(st.Size() == 2);
  CHECK(std::string(st[1]["interface"].GetString()) == "net1");
  CHECK_FALSE(st[1].HasMember("mac"));
  REQUIRE(st[1].HasMember("ips"));
  CHECK(std::string(st[1]["ips"][0].GetString()) == "192.0.2.44");
  REQUIRE(st[1].HasMember("device-info"));
  CHECK(std::string(st[1]["device-info"]["pci"]["pci-address"].GetString()) == "0000:03:00.1");
  Proc check = fx.run("CHECK", "a", pod, "default", "pod-a", fx.config(R"("sysfsRoot": ")" + sysfs + R"(", "prevResult": )" + a.out));
  INFO("check: ", check.out, check.err);
  CHECK(check.exit_code == 0);
  Proc del = fx.run("DEL", "a", pod, "default", "pod-a", config);
  INFO("del: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(PodFixture::files_under(devinfo).empty());
  CHECK(no_state(fx));
}

TEST_CASE("host-device (fake sysfs): runtimeConfig.deviceID names an auxiliary-bus device or a virtio PCI device") {
  Node node;
  PodFixture fx(node);
  const std::string sysfs = node.dir() + "/fakesys";
  const std::string config = fx.config(R"("sysfsRoot": ")" + sysfs + R"(")");
  add_device("sf0", "02:00:00:00:03:01");
  add_device("vio0", "02:00:00:00:03:02");
  fake_sysfs_device(sysfs + "/bus/auxiliary/devices/mlx5_core.sf.2", "sf0");
  fake_sysfs_device(sysfs + "/bus/pci/devices/0000:00:08.0/virtio3", "vio0");
  fx.add_nad("default", "aux", hd_nad(R"("capabilities": {"deviceID": true}, "runtimeConfig": {"deviceID": "mlx5_core.sf.2"})",
                                      fx.ipam_dir() + "/a"));
  fx.add_nad("default", "vio", hd_nad(R"("pciBusID": "0000:00:08.0")", fx.ipam_dir() + "/b"));
  fx.add_nad("default", "none", hd_nad(R"("capabilities": {"deviceID": true}, "runtimeConfig": {"deviceID": "nosuch.dev.0"})",
                                       fx.ipam_dir() + "/c"));
  for (auto [cid, nad, dev, mac] : {std::tuple{"a", "aux", "sf0", "02:00:00:00:03:01"}, std::tuple{"b", "vio", "vio0", "02:00:00:00:03:02"}}) {
    INFO("case ", nad);
    std::string pod = add_and_check(node, fx, cid, nad, dev, mac, config);
    Proc del = fx.run("DEL", cid, pod, "default", std::string("pod-") + cid, config);
    CHECK(del.exit_code == 0);
    CHECK(link_state("", dev).exists);
  }
  std::string pod = node.add_netns("pod-c");
  fx.add_pod("default", "pod-c", "none");
  Proc bad = fx.run("ADD", "c", pod, "default", "pod-c", config);
  CHECK(bad.exit_code != 0);
  CHECK(bad.out.find("nosuch.dev.0 not found or unsupported") != std::string::npos);
  CHECK(no_state(fx));
}
