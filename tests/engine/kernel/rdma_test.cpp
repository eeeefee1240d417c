// RDMA netlink (engine/kernel/rdma.hpp): golden bytes of RDMA_NLDEV_CMD_SET / SYS_SET / SYS_GET and
// the device dump against the uapi layouts (no privileges), [kernel] this machine's kernel, which
// has no RDMA netlink, giving clear errors (in a fresh private node namespace), and Debian's kernel
// with a soft-RoCE (rdma_rxe) device answering the same messages (full-kernel tier).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "engine/kernel/rdma.hpp"
#include "tests/support/full_kernel.hpp"
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

FULL_KERNEL_CASE("[rdma_rxe] the netns mode is read back, SYS_SET is answered, a soft-RoCE device is found in the dump and its move refused clearly") {
  Node node;
  rdma::NetlinkOps ops;
  auto mode = ops.netns_mode();
  INFO((mode ? std::string() : mode.error().text()));
  REQUIRE(mode);
  CHECK(*mode == rdma::NetnsMode::Shared);  // the kernel's default; plumb never switches it
  auto ex = rdma::ensure_exclusive(ops, "rdmaIsolation");
  REQUIRE_FALSE(ex);
  CHECK(ex.error().cni_code == cni_code::kKernelFeature);
  CHECK(ex.error().msg.find("rdma system set netns exclusive") != std::string::npos);

  // SYS_SET as `rdma system set netns ...` sends it: "shared" again is accepted (the kernel
  // validated the attribute), "exclusive" is refused with EBUSY while other namespaces exist
  // (this test's own): a malformed message would be EINVAL instead.
  auto nl = rdma::open_socket();
  REQUIRE(nl);
  netlink::Message shared = rdma::build_sys_set(rdma::NetnsMode::Shared);
  CHECK(nl->request(shared, "rdma system set netns shared"));
  netlink::Message exclusive = rdma::build_sys_set(rdma::NetnsMode::Exclusive);
  auto refused = nl->request(exclusive, "rdma system set netns exclusive");
  REQUIRE_FALSE(refused);
  CHECK(refused.error().sys_errno == EBUSY);
  CHECK(plumb::test::sh("rdma system show").out.find("netns shared") != std::string::npos);

  // A real RDMA device: soft-RoCE on a veth of this node.
  REQUIRE(plumb::test::sh("ip link add rxev0 type veth peer name rxev1 && ip link set rxev0 up && ip link set rxev1 up").exit_code == 0);
  plumb::test::Proc add = plumb::test::sh("rdma link add rxe0 type rxe netdev rxev0");
  INFO(add.err);
  REQUIRE(add.exit_code == 0);
  std::string pod = node.add_netns("rdma-pod");
  int here = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  int there = open(pod.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(here >= 0);
  REQUIRE(there >= 0);
  // The dump finds rxe0 (else kNotFound); the kernel refuses to move it (rxe cannot change
  // namespace, and the mode is shared): EOPNOTSUPP, reported with the device's name.
  auto mv = ops.move("rxe0", here, there);
  REQUIRE_FALSE(mv);
  CHECK(mv.error().cni_code != cni_code::kNotFound);
  CHECK(mv.error().sys_errno == EOPNOTSUPP);
  CHECK(mv.error().text().find("rxe0") != std::string::npos);
  auto missing = ops.move("nosuch0", here, there);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().cni_code == cni_code::kNotFound);
  CHECK(plumb::test::sh("rdma dev show rxe0").exit_code == 0);  // still here
  close(here);
  close(there);
  CHECK(plumb::test::sh("rdma link delete rxe0").exit_code == 0);
}
