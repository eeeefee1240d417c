// engine/base/grpc: the 5-byte message prefix (golden bytes) and unary calls over libcurl's HTTP/2
// on a unix socket against a [fake kubelet] (tests/support/fake_kubelet.py, Debian's
// python3-grpcio): a served call returns the message, an error answer its grpc-status and decoded
// grpc-message (as trailers-only headers), whatever the request. The request bytes below are
// protobuf's encoding of GetPodResourcesRequest{pod_name: "pod-a", pod_namespace: "default"}
// (field 1 and 2, wire type 2): fixtures, not a parser.
#include "engine/base/grpc.hpp"

#include <doctest/doctest.h>

#include "tests/support/fake_kubelet.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;
using plumb::test::FakeKubelet;
using plumb::test::Node;

namespace {

const std::string kGetPodA("\x0a\x05pod-a\x12\x07" "default", 16);

http::Client client_for(const std::string& socket) {
  http::Options o;
  o.timeout = std::chrono::milliseconds(5000);
  o.unix_socket = socket;
  o.http2_prior_knowledge = true;
  o.peer = "the fake kubelet";
  return http::Client(std::move(o));
}

}  // namespace

TEST_CASE("grpc: frame() puts the uncompressed flag and the big-endian length before the message") {
  CHECK(grpc::frame("").value() == std::string(5, '\0'));
  CHECK(grpc::frame(kGetPodA).value() == std::string("\x00\x00\x00\x00\x10", 5) + kGetPodA);
  CHECK(grpc::frame(std::string(300, 'x')).value().substr(0, 5) == std::string("\x00\x00\x00\x01\x2c", 5));
}

TEST_CASE("[fake kubelet] grpc: a unary call's message, and error statuses with their message") {
  Node node;
  FakeKubelet k(node.dir() + "/kubelet",
                R"({"pods":[)" + FakeKubelet::pod("default", "pod-a", {{"intel.com/sriov", {"0000:03:00.2"}}}) + "]}");
  auto c = client_for(k.socket());
  auto r = grpc::unary(c, "http://localhost", "/v1.PodResourcesLister/Get", kGetPodA);
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().text()));
  CHECK(r->status == grpc::code::kOk);
  CHECK(r->message.empty());
  REQUIRE(r->payload.size() > 2);
  CHECK(r->payload[0] == '\x0a');  // GetPodResourcesResponse field 1 (pod_resources), wire type 2
  CHECK(r->payload.find("0000:03:00.2") != std::string::npos);
  CHECK(k.calls() == std::vector<std::string>{"Get default/pod-a"});

  k.set_state(R"({"get":"disabled","pods":[]})");
  r = grpc::unary(c, "http://localhost", "/v1.PodResourcesLister/Get", kGetPodA);
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().text()));
  CHECK(r->status == grpc::code::kUnknown);
  CHECK(r->message == "PodResources API Get method disabled");
  CHECK(r->payload.empty());

  k.set_state(R"({"get":"unimplemented","pods":[]})");
  r = grpc::unary(c, "http://localhost", "/v1.PodResourcesLister/Get", kGetPodA);
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().text()));
  CHECK(r->status == grpc::code::kUnimplemented);
  // (A method the server does not have is answered by grpcio itself, sometimes with a stream
  // reset that libcurl 7.88 reports as a transport error: the kubelet client does not rely on
  // that answer, see tests/cni-entry/source/kubelet_test.cpp "absent".)
}
