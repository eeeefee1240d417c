// RDMA netlink (engine/kernel/rdma.hpp): golden bytes of RDMA_NLDEV_CMD_SET / SYS_SET / SYS_GET and
// the device dump against the uapi layouts (no privileges), and [kernel] this machine's kernel,
// which has no RDMA netlink, giving clear errors (in a fresh private node namespace).
#include <doctest/doctest.h>

#include <vector>

#include "engine/kernel/rdma.hpp"
#include "tests/support/golden.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;
using plumb::test::Bytes;
using plumb::test::check_bytes;
using plumb::test::Node;

TEST_CASE("golden: RDMA_NLDEV_CMD_SET moving device 2 into the netns open at fd 7 (rdma dev set <dev> netns <ns>)") {
  const Bytes want = {
      // nlmsghdr: len 32, type RDMA_NL_GET_TYPE(RDMA_NL_NLDEV=5, SET=2) = 0x1402, REQUEST, seq 0, pid 0
      0x20, 0x00, 0x00, 0x00, 0x02, 0x14, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0,
      // RDMA_NLDEV_ATTR_DEV_INDEX (1) u32 2
      0x08, 0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00,
      // RDMA_NLDEV_NET_NS_FD (68) u32 7
      0x08, 0x00, 0x44, 0x00, 0x07, 0x00, 0x00, 0x00};
  check_bytes(rdma::build_set_netns(2, 7).bytes(), want);
}

TEST_CASE("golden: RDMA_NLDEV_CMD_SYS_SET netns mode exclusive / shared, SYS_GET and the device dump") {
  const Bytes excl = {
      // nlmsghdr: len 24, type 0x1407 (SYS_SET = 7), REQUEST
      0x18, 0x00, 0x00, 0x00, 0x07, 0x14, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0,
      // RDMA_NLDEV_SYS_ATTR_NETNS_MODE (66) u8 0 (exclusive), padded to 4
      0x05, 0x00, 0x42, 0x00, 0x00, 0x00, 0x00, 0x00};
  check_bytes(rdma::build_sys_set(rdma::NetnsMode::Exclusive).bytes(), excl);
  Bytes shared = excl;
  shared[20] = 0x01;
  check_bytes(rdma::build_sys_set(rdma::NetnsMode::Shared).bytes(), shared);
  check_bytes(rdma::build_sys_get().bytes(), Bytes{0x10, 0, 0, 0, 0x06, 0x14, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0});
  // CMD_GET (1) with REQUEST|DUMP (0x0301)
  check_bytes(rdma::build_dev_dump().bytes(), Bytes{0x10, 0, 0, 0, 0x01, 0x14, 0x01, 0x03, 0, 0, 0, 0, 0, 0, 0, 0});
}

TEST_CASE("[kernel] this kernel has no RDMA netlink: socket(NETLINK_RDMA) gives EPROTONOSUPPORT, reported clearly") {
  Node node;
  auto s = rdma::open_socket();
  REQUIRE_FALSE(s);
  CHECK(s.error().cni_code == cni_code::kKernelFeature);
  CHECK(s.error().msg.find("no RDMA netlink") != std::string::npos);
  CHECK(s.error().details.find("Protocol not supported") != std::string::npos);
  rdma::NetlinkOps ops;
  auto st = rdma::ensure_exclusive(ops, "rdmaIsolation");
  REQUIRE_FALSE(st);
  CHECK(st.error().cni_code == cni_code::kKernelFeature);
  CHECK(st.error().msg.find("rdmaIsolation") != std::string::npos);
  auto mv = ops.move("mlx5_0", -1, -1);
  REQUIRE_FALSE(mv);
  CHECK(mv.error().cni_code == cni_code::kKernelFeature);
}
