// The full-kernel test tier (tests/full-kernel/README.md). A case that needs a kernel feature
// this machine's kernel lacks (ipvlan, 802.1q, vrf, dummy, bridge VLAN filtering, sch_fq, SCTP
// sockets, RDMA) is declared with FULL_KERNEL_CASE instead of TEST_CASE: the host's ctest entry
// of its file excludes it, and full-kernel/<file> runs it in a QEMU guest booting Debian's stock
// kernel, where it must find the feature (a missing feature fails the case; nothing is skipped).
#pragma once

#include <doctest/doctest.h>

/// A doctest case in the "full-kernel" suite (tests/CMakeLists.txt finds files using it).
#define FULL_KERNEL_CASE(name) TEST_CASE(name * doctest::test_suite("full-kernel"))

#include <string>

#include "tests/support/private_node.hpp"

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

}  // namespace plumb::test
