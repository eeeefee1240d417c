// cni-entry/source/kubelet: device IDs from kubelet's pod-resources API v1, against a [fake
// kubelet] (tests/support/fake_kubelet.py: Debian's python3-grpcio serving the real v1 protocol
// on a unix socket): Get where kubelet offers it, List (filtered to the pod) after Unimplemented
// or Unknown, IDs sorted per resource across containers; the socket missing or stale, a slow
// kubelet (bounded by the timeout) as errors naming the socket and the config key; and the
// protobuf code (plumb-podresources.so, built into plumb) loaded only by a lookup, checked in a
// fresh process.
#include "cni-entry/source/kubelet.hpp"

#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "tests/support/fake_kubelet.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;
using plumb::test::FakeKubelet;
using plumb::test::Node;

namespace {

source::KubeletOptions at(const std::string& socket, int timeout_ms = 5000) {
  source::KubeletOptions o;
  o.socket = socket;
  o.timeout = std::chrono::milliseconds(timeout_ms);
  return o;
}

source::PodRef pod_a() { return source::PodRef{"default", "pod-a", ""}; }

/// Two pods; pod-a has two containers, one VF resource split across them (unsorted) and an RDMA one.
std::string two_pods(const std::string& get_mode) {
  return R"({"get":")" + get_mode + R"(","pods":[)" +
         FakeKubelet::pod("default", "pod-b", {{"intel.com/sriov", {"0000:03:00.7"}}}) + "," +
         R"({"namespace":"default","name":"pod-a","containers":[)"
         R"({"name":"c1","devices":[{"resourceName":"intel.com/sriov","deviceIds":["0000:03:00.5","0000:03:00.2"]}]},)"
         R"({"name":"c2","devices":[{"resourceName":"intel.com/sriov","deviceIds":["0000:03:00.3"]},)"
         R"({"resourceName":"mellanox.com/rdma","deviceIds":["0000:81:00.2"]}]}]}]})";
}

const source::PodDevices kPodA = {{"intel.com/sriov", {"0000:03:00.2", "0000:03:00.3", "0000:03:00.5"}},
                                  {"mellanox.com/rdma", {"0000:81:00.2"}}};

}  // namespace

TEST_CASE("[fake kubelet] Get answers for the pod: its devices by resource, every container together, sorted") {
  Node node;
  FakeKubelet k(node.dir() + "/kubelet", two_pods("serve"));
  auto d = source::pod_devices(at(k.socket()), pod_a());
  REQUIRE_MESSAGE(d.has_value(), (d ? "" : d.error().text()));
  CHECK(*d == kPodA);
  CHECK(k.calls() == std::vector<std::string>{"Get default/pod-a"});
}

TEST_CASE("[fake kubelet] a kubelet without Get (Unimplemented, or no Get method at all) or with its gate off (Unknown): "
          "List, filtered to the pod") {
  Node node;
  for (const char* mode : {"unimplemented", "disabled", "absent"}) {
    CAPTURE(mode);
    FakeKubelet k(node.dir() + "/kubelet-" + mode, two_pods(mode));
    auto d = source::pod_devices(at(k.socket()), pod_a());
    REQUIRE_MESSAGE(d.has_value(), (d ? "" : d.error().text()));
    CHECK(*d == kPodA);  // pod-b's VF is not among them
    const std::string get = std::string(mode) == "absent" ? "Get (absent)" : "Get default/pod-a";
    CHECK(k.calls() == std::vector<std::string>{get, "List"});
  }
}

TEST_CASE("[fake kubelet] a pod kubelet does not know has no devices (Get's error, then List without it)") {
  Node node;
  FakeKubelet k(node.dir() + "/kubelet", two_pods("serve"));
  auto d = source::pod_devices(at(k.socket()), source::PodRef{"other", "pod-a", ""});
  REQUIRE_MESSAGE(d.has_value(), (d ? "" : d.error().text()));
  CHECK(d->empty());
  CHECK(k.calls() == std::vector<std::string>{"Get other/pod-a", "List"});
}

TEST_CASE("[fake kubelet] socket missing, stale socket, slow kubelet: errors naming the socket and the config key") {
  Node node;
  SUBCASE("missing") {
    auto d = source::pod_devices(at(node.dir() + "/none.sock"), pod_a());
    REQUIRE_FALSE(d.has_value());
    CHECK(d.error().cni_code == cni_code::kTryAgainLater);
    CHECK(d.error().msg.find(node.dir() + "/none.sock") != std::string::npos);
    CHECK(d.error().msg.find("podResourcesSocket") != std::string::npos);
  }
  SUBCASE("stale: the file exists, nobody listens") {
    const std::string path = node.dir() + "/stale.sock";
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    const sockaddr_un sa = plumb::test::unix_address(path);
    REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) == 0);
    ::close(fd);
    auto d = source::pod_devices(at(path), pod_a());
    REQUIRE_FALSE(d.has_value());
    CHECK(d.error().cni_code == cni_code::kTryAgainLater);
    CHECK_MESSAGE(d.error().msg.find("socket " + path + ") cannot be reached") != std::string::npos, d.error().msg);
  }
  SUBCASE("slow: no answer within the timeout") {
    FakeKubelet k(node.dir() + "/kubelet", R"({"delaySeconds": 3, "pods": []})");
    auto d = source::pod_devices(at(k.socket(), 400), pod_a());
    REQUIRE_FALSE(d.has_value());
    CHECK(d.error().cni_code == cni_code::kTryAgainLater);
    CHECK_MESSAGE(d.error().msg.find("did not answer within 400 ms (plumb config podResourcesTimeoutSeconds)") !=
                      std::string::npos,
                  d.error().msg);
    // The fake logs a call when its gRPC thread picks it up, which under load can come after the
    // client's 400 ms: wait (bounded) for the Get, then long enough for a List plumb would have
    // sent before returning to be logged too.
    for (int i = 0; i < 100 && k.calls().empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto calls = k.calls();
    const std::string second = calls.size() > 1 ? calls[1] : std::string("(one call)");
    INFO(second);
    CHECK(calls == std::vector<std::string>{"Get default/pod-a"});  // no List after a timeout
  }
}

// The dynamic build (PLUMB_STATIC=OFF) loads the codec from memory (engine/base/embedded_lib.hpp);
// the static binary links it in.
#if !PLUMB_STATIC_BINARY
// Run only in the child process the next case starts (--no-skip): a fresh process.
TEST_CASE("kubelet child: the protobuf code is loaded by the first lookup, not before" * doctest::skip()) {
  const char* socket = std::getenv("PLUMB_KUBELET_SOCKET");
  REQUIRE(socket != nullptr);
  auto maps = [] { return test::read_file("/proc/self/maps"); };
  CHECK(maps().find("libprotobuf-lite") == std::string::npos);
  CHECK(maps().find("plumb-podresources") == std::string::npos);
  CHECK(maps().find("libcurl") == std::string::npos);
  auto d = source::pod_devices(at(socket), pod_a());
  REQUIRE_MESSAGE(d.has_value(), (d ? "" : d.error().text()));
  CHECK(*d == kPodA);
  CHECK(maps().find("libprotobuf-lite") != std::string::npos);
  CHECK(maps().find("plumb-podresources") != std::string::npos);
  CHECK(maps().find("libcurl") != std::string::npos);
}

TEST_CASE("[fake kubelet] libprotobuf-lite and plumb-podresources.so are loaded only by a lookup (fresh process)") {
  Node node;
  FakeKubelet k(node.dir() + "/kubelet", two_pods("serve"));
  auto p = plumb::test::run({"/proc/self/exe", "--test-case=kubelet child:*", "--no-skip=true", "--no-version=true"},
                            {{"PLUMB_KUBELET_SOCKET", k.socket()}});
  CHECK_MESSAGE(p.exit_code == 0, p.out << p.err);
  CHECK_MESSAGE(p.out.find("1 passed") != std::string::npos, p.out);
  CHECK(k.calls() == std::vector<std::string>{"Get default/pod-a"});
}
#endif
