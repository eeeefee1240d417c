// cni-entry/pod/devices: kubelet's devices handed to the attachments as Multus hands them (in
// attachment order, one device each, per resource), the errors naming the resource, the pod and
// the networks, and the injection into the plugin configs (deviceID and pciBusID in every plugin,
// runtimeConfig.deviceID only where the "deviceID" capability is declared). Pure functions: no
// kubelet here (the lookup is tests/cni-entry/source/kubelet_test.cpp, the whole ADD
// tests/cni-entry/pod/sriov_pod_test.cpp).
#include "cni-entry/pod/devices.hpp"

#include <doctest/doctest.h>

using namespace plumb;
using plumb::pod::Attachment;

namespace {

Attachment att(const std::string& selection, const std::string& ifname, const std::string& resource) {
  Attachment a;
  a.selection = selection;
  a.ifname = ifname;
  a.net.resource_name = resource;
  return a;
}

const source::PodRef kPod{"default", "pod-a", ""};

}  // namespace

TEST_CASE("devices: each network of a resource gets the next of its sorted devices, in attachment order") {
  std::vector<Attachment> atts;
  atts.push_back(att("kube-system/default", "eth0", ""));
  atts.push_back(att("default/sriov-a", "net1", "intel.com/sriov"));
  atts.push_back(att("default/rdma", "net2", "mellanox.com/rdma"));
  atts.push_back(att("default/sriov-b", "net3", "intel.com/sriov"));
  source::PodDevices d = {{"intel.com/sriov", {"0000:03:00.2", "0000:03:00.3", "0000:03:00.4"}},
                          {"mellanox.com/rdma", {"0000:81:00.2"}}};
  REQUIRE(pod::hand_out_devices(atts, d, kPod));
  CHECK(atts[0].device_id.empty());
  CHECK(atts[1].device_id == "0000:03:00.2");
  CHECK(atts[2].device_id == "0000:81:00.2");
  CHECK(atts[3].device_id == "0000:03:00.3");
}

TEST_CASE("devices: a resource not allocated to the pod, or fewer devices than networks: errors naming all") {
  std::vector<Attachment> atts;
  atts.push_back(att("default/sriov-a", "net1", "intel.com/sriov"));
  atts.push_back(att("default/sriov-b", "net2", "intel.com/sriov"));
  SUBCASE("not allocated") {
    auto st = pod::hand_out_devices(atts, {{"other.com/x", {"0000:01:00.1"}}}, kPod);
    REQUIRE_FALSE(st);
    CHECK(st.error().cni_code == cni_code::kInvalidConfig);
    CHECK(st.error().msg ==
          "kubelet allocated no device of resource intel.com/sriov to pod default/pod-a, which network default/sriov-a "
          "(net1), network default/sriov-b (net2) needs (does a container of the pod request intel.com/sriov in "
          "resources.limits?)");
  }
  SUBCASE("fewer") {
    auto st = pod::hand_out_devices(atts, {{"intel.com/sriov", {"0000:03:00.2"}}}, kPod);
    REQUIRE_FALSE(st);
    CHECK(st.error().cni_code == cni_code::kInvalidConfig);
    CHECK(st.error().msg ==
          "pod default/pod-a has 1 device(s) of resource intel.com/sriov (0000:03:00.2) but 2 networks need one each: "
          "network default/sriov-a (net1), network default/sriov-b (net2)");
  }
  CHECK(atts[0].device_id.empty());  // nothing assigned on error
}

TEST_CASE("devices: no network with a resource asks nothing (no kubelet, no socket needed)") {
  std::vector<Attachment> atts;
  atts.push_back(att("kube-system/default", "eth0", ""));
  pod::PlumbConfig conf;
  conf.pod_resources_socket = "/nonexistent/kubelet.sock";
  CHECK(pod::assign_device_ids(atts, conf, kPod));
}

TEST_CASE("devices: a network with a resource but no pod name: an error naming the resource") {
  std::vector<Attachment> atts;
  atts.push_back(att("default/sriov-a", "net1", "intel.com/sriov"));
  pod::PlumbConfig conf;
  auto st = pod::assign_device_ids(atts, conf, source::PodRef{"default", "", ""});
  REQUIRE_FALSE(st);
  CHECK(st.error().cni_code == cni_code::kInvalidEnv);
  CHECK(st.error().msg.find("resource intel.com/sriov") != std::string::npos);
  CHECK(st.error().msg.find("K8S_POD_NAME") != std::string::npos);
}

TEST_CASE("devices: the ID goes into every plugin as deviceID and pciBusID, and into runtimeConfig where declared") {
  Attachment a = att("default/sriov-a", "net1", "intel.com/sriov");
  a.device_id = "0000:03:00.2";
  auto doc = json::parse(R"([{"type":"sriov","deviceID":"0000:09:00.1","capabilities":{"deviceID":true},
                             "runtimeConfig":{"mac":"02:00:00:00:00:01"}},
                            {"type":"tuning"},
                            {"type":"rdma","capabilities":{"deviceID":false}}])",
                         "test");
  REQUIRE(doc);
  a.plugins.CopyFrom(*doc, a.plugins.GetAllocator());
  pod::inject_device_id(a);
  CHECK(json::dump(a.plugins) ==
        R"([{"type":"sriov","deviceID":"0000:03:00.2","capabilities":{"deviceID":true},"runtimeConfig":{"mac":"02:00:00:00:00:01","deviceID":"0000:03:00.2"},"pciBusID":"0000:03:00.2"},)"
        R"({"type":"tuning","deviceID":"0000:03:00.2","pciBusID":"0000:03:00.2"},)"
        R"({"type":"rdma","capabilities":{"deviceID":false},"deviceID":"0000:03:00.2","pciBusID":"0000:03:00.2"}])");
}
