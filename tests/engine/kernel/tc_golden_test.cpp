// Golden bytes of the tc messages the bandwidth driver sends (engine/kernel/tc.hpp), and the bucket
// parameters of ebpf/loader.hpp. No privileges: nothing is sent.
//
// The expected arrays are written out by hand from the UAPI layouts (linux/rtnetlink.h,
// linux/pkt_sched.h, linux/pkt_cls.h) and match what iproute2 sends for the same operation
// (checked with strace on `tc qdisc add dev X clsact` and `tc filter del dev X egress prio 2830
// handle 1 protocol all bpf`: same tcmsg, same TCA_KIND; iproute2 adds NLM_F_ACK, which plumb's
// socket adds at send time).
//   nlmsghdr = u32 len | u16 type | u16 flags | u32 seq | u32 pid   (seq/pid 0 until sent)
//   tcmsg    = u8 family | 3 pad | s32 ifindex | u32 handle | u32 parent | u32 info  (20 bytes)
//   nlattr   = u16 len | u16 type, payload padded to 4; nests carry NLA_F_NESTED (0x8000)
#include <doctest/doctest.h>
#include <linux/pkt_cls.h>
#include <linux/rtnetlink.h>

#include <bit>
#include <cstdint>
#include <vector>

#include "ebpf/loader.hpp"
#include "engine/kernel/tc.hpp"
#include "tests/support/golden.hpp"

using plumb::test::Bytes;
using plumb::test::check_bytes;
using plumb::ebpf::Hook;

TEST_CASE("tc golden: add clsact on ifindex 3") {
  Bytes want = {
      48, 0, 0, 0, RTM_NEWQDISC, 0, 0x01, 0x06, 0, 0, 0, 0, 0, 0, 0, 0,  // REQUEST|EXCL|CREATE
      0, 0, 0, 0, 3, 0, 0, 0,                                               // AF_UNSPEC, ifindex 3
      0x00, 0x00, 0xff, 0xff,                                               // handle ffff:0000
      0xf1, 0xff, 0xff, 0xff,                                               // parent TC_H_CLSACT
      0, 0, 0, 0,                                                           // info
      11, 0, TCA_KIND, 0, 'c', 'l', 's', 'a', 'c', 't', 0, 0,              // "clsact" + pad
  };
  check_bytes(plumb::tc::build_add_clsact(3).bytes(), want);
}

TEST_CASE("tc golden: attach a direct-action bpf filter at host egress") {
  Bytes want = {
      76, 0, 0, 0, RTM_NEWTFILTER, 0, 0x01, 0x04, 0, 0, 0, 0, 0, 0, 0, 0,  // REQUEST|CREATE (replace ours)
      0, 0, 0, 0, 7, 0, 0, 0,                                               // ifindex 7
      1, 0, 0, 0,                                                           // handle 1
      0xf3, 0xff, 0xff, 0xff,                                               // parent ffff:fff3 (egress)
      0x00, 0x03, 0x0e, 0x0b,                                               // prio 0xb0e, htons(ETH_P_ALL)
      8, 0, TCA_KIND, 0, 'b', 'p', 'f', 0,                                  // "bpf"
      32, 0, TCA_OPTIONS, 0x80,                                             // nested options
      8, 0, TCA_BPF_FD, 0, 5, 0, 0, 0,                                      // fd 5
      11, 0, TCA_BPF_NAME, 0, 'p', 'r', 'o', 'g', '_', 'x', 0, 0,           // "prog_x" + pad
      8, 0, TCA_BPF_FLAGS, 0, 1, 0, 0, 0,                                   // TCA_BPF_FLAG_ACT_DIRECT
  };
  check_bytes(plumb::tc::build_attach(7, plumb::tc::Hook::Egress, 5, "prog_x").bytes(), want);
}

TEST_CASE("tc golden: detach plumb's filter at host ingress (and only it: prio, protocol, handle, kind)") {
  Bytes want = {
      44, 0, 0, 0, RTM_DELTFILTER, 0, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0,  // REQUEST
      0, 0, 0, 0, 9, 0, 0, 0,                                               // ifindex 9
      1, 0, 0, 0,                                                           // handle 1
      0xf2, 0xff, 0xff, 0xff,                                               // parent ffff:fff2 (ingress)
      0x00, 0x03, 0x0e, 0x0b,                                               // prio 0xb0e, htons(ETH_P_ALL)
      8, 0, TCA_KIND, 0, 'b', 'p', 'f', 0,
  };
  check_bytes(plumb::tc::build_detach(9, plumb::tc::Hook::Ingress).bytes(), want);
}

TEST_CASE("bucket parameters: burst, ECN mark and horizon in ns at the rate") {
  auto p = plumb::ebpf::bucket_params({50'000'000, 1'000'000});
  REQUIRE(p);
  CHECK(p->burst_ns == 20'000'000);   // 1 Mbit at 50 Mbit/s
  CHECK(p->mark_ns == 10'485'760);    // one 64 KiB GSO skb at 50 Mbit/s (> 5 ms)
  CHECK(p->horizon_ns == 200'000'000);
  auto fast = plumb::ebpf::bucket_params({10'000'000'000, 80'000'000});
  REQUIRE(fast);
  CHECK(fast->burst_ns == 8'000'000);
  CHECK(fast->mark_ns == plumb::ebpf::kMarkDelayNs);
  CHECK(fast->horizon_ns == plumb::ebpf::kHorizonNs);
  auto slow = plumb::ebpf::bucket_params({8'000, 8'000});  // 1 kB/s: a 64 KiB skb takes 65.5 s
  REQUIRE(slow);
  CHECK(slow->burst_ns == 1'000'000'000);
  CHECK(slow->horizon_ns == plumb::ebpf::kMaxHorizonNs);
  CHECK(slow->mark_ns < slow->horizon_ns);
  // A burst too large for the ns range is capped, never wrapped.
  auto huge = plumb::ebpf::bucket_params({1, 34'359'738'352});
  REQUIRE(huge);
  CHECK(huge->burst_ns == (uint64_t{1} << 62));
  auto zero_rate = plumb::ebpf::bucket_params({0, 1});
  REQUIRE_FALSE(zero_rate);
  CHECK(zero_rate.error().cni_code == plumb::cni_code::kInvalidConfig);
  CHECK_FALSE(plumb::ebpf::bucket_params({1, 0}));
}
