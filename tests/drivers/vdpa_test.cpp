// The vdpa driver (drivers/vdpa.cpp). Host cases call it in-process, each in a fresh private node:
// the vDPA listing is a fake ([fake vdpa]) because this kernel has no vdpa family; a virtio_vdpa
// device's netdev is a real veth end in the node namespace ([kernel netdevs]); the sysfs tree is a
// fake one per case (tests/support/vf_harness.hpp). Full-kernel cases (Debian's 6.12 kernel) run
// the plumb binary on a real vdpa bus: a VDUSE virtio-net device served by tests/support/vduse_net.c,
// added with iproute2's `vdpa dev add ... mgmtdev vduse` and bound to virtio_vdpa or vhost_vdpa.
#include <doctest/doctest.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "tests/support/child_process.hpp"
#include "tests/support/full_kernel.hpp"
#include "tests/support/netns_view.hpp"
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

TEST_CASE(
    "[fake vdpa] vdpaDevice: a vhost_vdpa device named directly needs no VF; bad names and a deviceID beside it are "
    "refused") {
  Node node;
  Bench b(node);
  vdpa_tree(b);
  node.add_netns("pod1");
  Att a(b, "ctr1", "net4", "pod1");
  auto r = a.add("vdpa", R"({"cniVersion":"1.1.0","name":"vdpa-net","type":"vdpa","vdpaDevice":"vdpa0","ipam":)" +
                             b.ipam("203.0.113.0/24") + "}");
  INFO((r ? std::string() : r.error().text()));
  REQUIRE(r);
  CHECK(r->interfaces[0].pci_id.empty());
  CHECK((*read_allocation(b.state(), "vdpa:vdpa0"))->mode == "vhost");
  REQUIRE(a.unwind(true));
  CHECK_FALSE(read_allocation(b.state(), "vdpa:vdpa0")->has_value());

  for (const auto& [extra, needle] : std::vector<std::pair<std::string, std::string>>{
           {R"("vdpaDevice":"../vdpa0")", R"(net-net4.vdpaDevice "../vdpa0" is not a vDPA device name)"},
           {R"("vdpaDevice":"vdpa0","deviceID":"0000:65:00.2")", "set either vdpaDevice"},
           {R"("vdpaDevice":"vdpa0","runtimeConfig":{"deviceID":"0000:65:00.2"})", "set either vdpaDevice"}}) {
    Att bad(b, "ctr2", "net4", "pod1");
    auto e = bad.add("vdpa", R"({"cniVersion":"1.1.0","name":"vdpa-net","type":"vdpa",)" + extra + "}");
    REQUIRE_FALSE(e);
    CHECK(e.error().cni_code == cni_code::kInvalidConfig);
    CHECK(e.error().msg.find(needle) != std::string::npos);
  }
}

// --- full kernel: a VDUSE device on the real vdpa bus --------------------------------------------

namespace {

/// A shell command in the guest's initial network namespace (PID 1's): the vdpa generic netlink
/// family exists only there, and virtio_vdpa's netdevs are born there. Full-kernel cases only: the
/// guest's PID 1 is its own init (tests/full-kernel/init), never the host's.
Proc in_initial_netns(const std::string& cmd) { return sh("nsenter --net=/proc/1/ns/net " + cmd); }

std::string dump(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return sb.GetString();
}

/// Basename of /sys/bus/vdpa/devices/<name>/driver, "" when unbound.
std::string vdpa_driver(const std::string& name) {
  std::error_code ec;
  auto d = std::filesystem::read_symlink("/sys/bus/vdpa/devices/" + name + "/driver", ec);
  return ec ? std::string() : d.filename().string();
}

/// VDUSE virtio-net device `name` (MAC `mac`) served by vduse-net, on the vdpa bus under the same
/// name (VDUSE's management device adds the VDUSE device of that name) bound to `driver` (virtio_vdpa or vhost_vdpa). A
/// virtio_vdpa netdev is moved from the initial namespace into the node (the test process's namespace). Destruction
/// deletes the vdpa device while vduse-net still answers (its reset is a control message), then stops vduse-net, which
/// destroys the VDUSE device.
struct VduseDevice {
  std::string name;
  pid_t pid = -1;
  std::string netdev;  // virtio_vdpa: the netdev's name in the node

  VduseDevice(const Node& node, std::string n, const std::string& mac, const std::string& driver) : name(std::move(n)) {
    REQUIRE_MESSAGE(std::filesystem::exists("/dev/vduse/control"), "no VDUSE: the full-kernel guest loads vduse");
    const std::string log = node.dir() + "/vduse-" + name + ".log";
    pid = start_child({PLUMB_VDUSE_NET_BINARY, name, mac}, {}, log);
    REQUIRE(pid > 0);
    REQUIRE_MESSAGE(eventually([&] { return test::read_file(log).find("ready") != std::string::npos; }),
                    test::read_file(log));
    Proc add = in_initial_netns("vdpa dev add name " + name + " mgmtdev vduse");
    INFO("vdpa dev add: ", add.out, add.err, test::read_file(log));
    REQUIRE(add.exit_code == 0);
    const std::string now = vdpa_driver(name);
    if (now != driver) {
      if (!now.empty()) REQUIRE(sh("echo " + name + " > /sys/bus/vdpa/drivers/" + now + "/unbind").exit_code == 0);
      REQUIRE(sh("echo " + name + " > /sys/bus/vdpa/drivers/" + driver + "/bind").exit_code == 0);
    }
    REQUIRE(vdpa_driver(name) == driver);
    if (driver != "virtio_vdpa") return;
    Proc dev = in_initial_netns("ip -o link | awk -v m=" + mac + " '$0 ~ m {sub(\":\", \"\", $2); print $2}'");
    netdev = dev.out.substr(0, dev.out.find('\n'));
    REQUIRE_MESSAGE(!netdev.empty(), "no virtio netdev with MAC ", mac, " in the initial namespace");
    REQUIRE(in_initial_netns("ip link set " + netdev + " netns " + std::to_string(::getpid())).exit_code == 0);
  }
  ~VduseDevice() {
    in_initial_netns("vdpa dev del " + name);
    stop_child(pid, std::chrono::milliseconds(15000));
  }
  VduseDevice(const VduseDevice&) = delete;
  VduseDevice& operator=(const VduseDevice&) = delete;
};

std::string vdpa_nad(const std::string& device, const PodFixture& fx, const std::string& extra = "") {
  return R"({"cniVersion": "1.1.0", "type": "vdpa", "vdpaDevice": ")" + device + R"(", )" + extra + R"(
   "ipam": {"type": "host-local", "dataDir": ")" +
         fx.ipam_dir() + R"(",
            "ranges": [[{"subnet": "198.51.100.0/24", "rangeStart": "198.51.100.10", "rangeEnd": "198.51.100.99"}]]}})";
}

/// The pod's network-status entry of its vDPA attachment (the second: after the default network).
rapidjson::Document vdpa_status(const PodFixture& fx, const std::string& pod) {
  rapidjson::Document st;
  const std::string text = fx.status_of("default", pod);
  INFO("network-status: ", text);
  st.Parse(text.c_str());
  REQUIRE(st.IsArray());
  REQUIRE(st.Size() == 2);
  rapidjson::Document one;
  one.CopyFrom(st[1], one.GetAllocator());
  return one;
}

/// plumb's config with a private device-info directory (and `extra` members, e.g. prevResult).
std::string config_with_devinfo(const PodFixture& fx, const Node& node, const std::string& extra = "") {
  return fx.config(R"("deviceInfoDir": ")" + node.dir() + R"(/devinfo")" + (extra.empty() ? "" : ", " + extra));
}

}  // namespace

FULL_KERNEL_CASE(
    "vdpa on virtio_vdpa (VDUSE): vdpaDevice's virtio netdev moves into the pod renamed, CHECK passes, DEL returns "
    "it") {
  Node node;
  PodFixture fx(node);
  VduseDevice dev(node, "vdpavirtio0", "02:00:5e:10:00:01", "virtio_vdpa");
  const auto node_links = link_names("");
  REQUIRE(node_links.count(dev.netdev) == 1);
  fx.add_nad("default", "vd", vdpa_nad("vdpavirtio0", fx, R"("mtu": 1400,)"));
  fx.add_pod("default", "pod-v", R"([{"name": "vd", "interface": "vd0"}])");
  const std::string conf = config_with_devinfo(fx, node);
  Proc a = fx.run("ADD", "ctr-v", node.add_netns("pod-v"), "default", "pod-v", conf);
  INFO("ADD: ", a.out, a.err);
  REQUIRE(a.exit_code == 0);

  CHECK(link_names("").count(dev.netdev) == 0);
  auto l = link_detail("pod-v", "vd0");
  CHECK(std::string(l["address"].GetString()) == "02:00:5e:10:00:01");
  CHECK(l["mtu"].GetInt() == 1400);
  CHECK(std::string(l["parentbus"].GetString()) == "virtio");
  CHECK(global_addr("pod-v", "vd0").rfind("198.51.100.", 0) == 0);
  CHECK(sh("ip -n pod-v -j link show vd0 up").out.find("vd0") != std::string::npos);
  auto st = vdpa_status(fx, "pod-v");
  CHECK(std::string(st["interface"].GetString()) == "vd0");
  CHECK(dump(st["device-info"]) ==
        R"({"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpavirtio0","driver":"virtio"}})");

  Proc check = fx.run("CHECK", "ctr-v", "/run/netns/pod-v", "default", "pod-v",
                      config_with_devinfo(fx, node, R"("prevResult": )" + a.out));
  INFO("CHECK: ", check.out, check.err);
  CHECK(check.exit_code == 0);
  Proc del = fx.run("DEL", "ctr-v", "/run/netns/pod-v", "default", "pod-v", conf);
  INFO("DEL: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(link_names("pod-v") == std::set<std::string>{"lo"});
  CHECK(link_names("").count(dev.netdev) == 1);
  auto back = link_detail("", dev.netdev);
  CHECK(back["mtu"].GetInt() == 1500);
  CHECK(std::string(back["address"].GetString()) == "02:00:5e:10:00:01");
  CHECK(no_records(fx));
}

FULL_KERNEL_CASE(
    "vdpa on vhost_vdpa (VDUSE): nothing moves, /dev/vhost-vdpa-N in device-info, a second pod is refused, DEL "
    "releases it") {
  Node node;
  PodFixture fx(node);
  VduseDevice dev(node, "vdpavhost0", "02:00:5e:10:00:02", "vhost_vdpa");
  const auto node_links = link_names("");
  fx.add_nad("default", "vd", vdpa_nad("vdpavhost0", fx));
  fx.add_pod("default", "pod-h", R"([{"name": "vd", "interface": "vd0"}])");
  fx.add_pod("default", "pod-x", R"([{"name": "vd", "interface": "vd0"}])");
  const std::string conf = config_with_devinfo(fx, node);
  Proc a = fx.run("ADD", "ctr-h", node.add_netns("pod-h"), "default", "pod-h", conf);
  INFO("ADD: ", a.out, a.err);
  REQUIRE(a.exit_code == 0);

  CHECK(link_names("pod-h") == std::set<std::string>{"lo", "eth0"});  // eth0: the default network
  const auto after = link_names("");
  CHECK(std::includes(after.begin(), after.end(), node_links.begin(), node_links.end()));  // nothing left the node
  auto st = vdpa_status(fx, "pod-h");
  const std::string path = st["device-info"]["vdpa"]["path"].GetString();
  CHECK(path.rfind("/dev/vhost-vdpa-", 0) == 0);
  struct stat sb {};
  CHECK(::stat(path.c_str(), &sb) == 0);
  CHECK(S_ISCHR(sb.st_mode));
  CHECK(std::filesystem::exists("/sys/bus/vdpa/devices/vdpavhost0/" + path.substr(5)));
  CHECK(dump(st["device-info"]) ==
        R"({"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpavhost0","driver":"vhost","path":")" + path +
            R"("}})");

  Proc x = fx.run("ADD", "ctr-x", node.add_netns("pod-x"), "default", "pod-x", conf);
  INFO("second ADD: ", x.out, x.err);
  CHECK(x.exit_code != 0);
  CHECK(x.out.find("\"code\":105") != std::string::npos);
  CHECK(x.out.find("already allocated to container ctr-h") != std::string::npos);

  Proc check = fx.run("CHECK", "ctr-h", "/run/netns/pod-h", "default", "pod-h",
                      config_with_devinfo(fx, node, R"("prevResult": )" + a.out));
  INFO("CHECK: ", check.out, check.err);
  CHECK(check.exit_code == 0);
  Proc del = fx.run("DEL", "ctr-h", "/run/netns/pod-h", "default", "pod-h", conf);
  INFO("DEL: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(link_names("pod-h") == std::set<std::string>{"lo"});
  CHECK(vdpa_driver("vdpavhost0") == "vhost_vdpa");
  CHECK(no_records(fx));
  Proc again = fx.run("ADD", "ctr-x", "/run/netns/pod-x", "default", "pod-x", conf);
  INFO("ADD after DEL: ", again.out, again.err);
  CHECK(again.exit_code == 0);
}

FULL_KERNEL_CASE(
    "vdpa: an unknown vdpaDevice fails the ADD with a CNI error naming it, and the node is left as it was") {
  Node node;
  PodFixture fx(node);
  VduseDevice dev(node, "vdpavirtio1", "02:00:5e:10:00:03", "virtio_vdpa");
  const auto node_links = link_names("");
  fx.add_nad("default", "vd", vdpa_nad("nosuchvdpa0", fx));
  fx.add_pod("default", "pod-e", R"([{"name": "vd", "interface": "vd0"}])");
  Proc a = fx.run("ADD", "ctr-e", node.add_netns("pod-e"), "default", "pod-e", config_with_devinfo(fx, node));
  INFO("ADD: ", a.out, a.err);
  CHECK(a.exit_code != 0);
  CHECK(a.out.find("\"code\":102") != std::string::npos);
  CHECK(a.out.find(R"(vd.vdpaDevice \"nosuchvdpa0\": no such vDPA device on the vdpa bus)") != std::string::npos);
  CHECK(link_names("pod-e") == std::set<std::string>{"lo"});
  CHECK(link_names("") == node_links);
  CHECK(no_records(fx));
  CHECK(PodFixture::files_under(node.dir() + "/devinfo").empty());
}
