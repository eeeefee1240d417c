// cni-entry/source/source.cpp without a server: the ADD-time annotation lookup (the runtime's
// annotations need no request; the API's are UID-checked unless the pod is static).
#include "cni-entry/source/source.hpp"

#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>

using namespace plumb;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// A PodSource that counts pod() calls and returns a fixed PodInfo.
struct FakeSource final : source::PodSource {
  std::optional<source::PodInfo> info;
  int pod_calls = 0;
  Result<std::optional<source::PodInfo>> pod(const source::PodRef&) override {
    ++pod_calls;
    return info;
  }
  Result<std::optional<std::map<std::string, std::string>>> pod_annotations(const source::PodRef&) override {
    return fail(cni_code::kInternal, "not used");
  }
  Result<nad::NetworkAttachmentDefinition> network_attachment(const std::string&, const std::string&) override {
    return fail(cni_code::kInternal, "not used");
  }
  Status write_network_status(const source::PodRef&, const std::string&, const std::string&) override { return {}; }
  Status remove_network_status(const source::PodRef&, const std::string&) override { return {}; }
};

}  // namespace

TEST_CASE("annotations for ADD: the runtime's need no request; the API's are UID-checked unless static") {
  FakeSource src;
  src.info = source::PodInfo{{{"k8s.v1.cni.cncf.io/networks", "blue"}}, "uid-api", "7", false};
  source::PodRef ref{"default", "web", "uid-kubelet"};

  std::map<std::string, std::string> runtime = {{"k8s.v1.cni.cncf.io/networks", "green"}};
  auto a = source::annotations_for_add(src, ref, runtime);
  REQUIRE(a.has_value());
  CHECK((*a)->at("k8s.v1.cni.cncf.io/networks") == "green");
  CHECK(src.pod_calls == 0);

  auto mismatch = source::annotations_for_add(src, ref, std::nullopt);
  REQUIRE_FALSE(mismatch.has_value());
  CHECK(src.pod_calls == 1);
  CHECK(mismatch.error().cni_code == cni_code::kInvalidEnv);
  CHECK(contains(mismatch.error().msg, "expected pod UID \"uid-kubelet\""));
  CHECK(contains(mismatch.error().msg, "\"uid-api\""));

  src.info->is_static = true;
  auto mirror = source::annotations_for_add(src, ref, std::nullopt);
  REQUIRE(mirror.has_value());
  CHECK((*mirror)->at("k8s.v1.cni.cncf.io/networks") == "blue");

  src.info->is_static = false;
  ref.uid.clear();  // no K8S_POD_UID: nothing to compare
  CHECK(source::annotations_for_add(src, ref, std::nullopt).has_value());
  ref.name.clear();  // no pod name (podman): no lookup at all
  int before = src.pod_calls;
  auto none = source::annotations_for_add(src, ref, std::nullopt);
  REQUIRE(none.has_value());
  CHECK_FALSE(none->has_value());
  CHECK(src.pod_calls == before);
}
