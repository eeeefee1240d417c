// The full-kernel test tier (tests/full-kernel/README.md). A case that needs a kernel feature
// this machine's kernel lacks (ipvlan, 802.1q, vrf, dummy, bridge VLAN filtering, sch_fq, SCTP
// sockets, RDMA) is declared with FULL_KERNEL_CASE instead of TEST_CASE: the host's ctest entry
// of its file excludes it, and full-kernel/<file> runs it in a QEMU guest booting Debian's stock
// kernel, where it must find the feature (a missing feature fails the case; nothing is skipped).
#pragma once

#include <doctest/doctest.h>

/// A doctest case in the "full-kernel" suite (tests/CMakeLists.txt finds files using it).
#define FULL_KERNEL_CASE(name) TEST_CASE(name * doctest::test_suite("full-kernel"))

#include <set>
#include <string>

#include "tests/support/netns_view.hpp"
#include "tests/support/pod_fixture.hpp"

namespace plumb::test {

/// True when this kernel creates the link `ip link add prb0 <args>` (in the caller's node
/// namespace; a veth "prbm0" exists as a possible master meanwhile; both are deleted again).
/// Host cases that expect a missing feature's error use it to assert the working path instead
/// on a kernel that has the feature: either way the case asserts what the kernel really does.
inline bool kernel_can_create(const std::string& args) {
  sh("ip link add prbm0 type veth peer name prbm1");
  const bool ok = sh("ip link add prb0 " + args).exit_code == 0;
  sh("ip link del prb0; ip link del prbm0");
  return ok;
}

/// The host case of a feature this machine's kernel may lack: `add` is the ADD of pod `pod` whose
/// attachment `ifname` needs it. On a kernel that creates `ip link add prb0 <probe_args>` the ADD
/// must have worked (the interface is there); otherwise it must have failed with code 104 naming
/// `feature` and left nothing behind (only lo in the pod, no attachment record).
inline void check_feature_or_error(const Proc& add, const std::string& probe_args, const std::string& feature,
                                   const std::string& pod, const std::string& ifname, const PodFixture& fx) {
  INFO(add.out, add.err);
  if (kernel_can_create(probe_args)) {
    MESSAGE("this kernel has ", probe_args, ": the case checks the working ADD instead of the missing-feature error");
    REQUIRE(add.exit_code == 0);
    CHECK(link_names(pod).count(ifname) == 1);
    return;
  }
  CHECK(add.exit_code != 0);
  CHECK(add.out.find("\"code\":104") != std::string::npos);
  CHECK(add.out.find(feature) != std::string::npos);
  CHECK(link_names(pod) == std::set<std::string>{"lo"});
  CHECK(no_records(fx));
}

}  // namespace plumb::test
