// Golden bytes of an nfnetlink batch (engine/netlink/batch.hpp), written out by hand from the UAPI
// layouts (linux/netlink.h, linux/netfilter/nfnetlink.h, linux/netfilter/nf_tables.h):
//   nlmsghdr = u32 len | u16 type | u16 flags | u32 seq | u32 pid   (16 bytes, host order)
//   nfgenmsg = u8 family | u8 version | be16 res_id                  (4 bytes)
//   nlattr   = u16 len (unpadded) | u16 type; payload padded to 4 bytes
// BATCH_BEGIN = 0x10 and BATCH_END = 0x11 carry res_id NFNL_SUBSYS_NFTABLES (10); the messages
// between them get NLM_F_REQUEST|NLM_F_ACK and consecutive sequence numbers.
#include <doctest/doctest.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "engine/netlink/batch.hpp"

using namespace plumb;
using Bytes = std::vector<uint8_t>;

namespace {

static_assert(std::endian::native == std::endian::little, "golden arrays are written for little-endian hosts");

Bytes bytes_of(const netlink::Batch& b) {
  const auto* p = static_cast<const uint8_t*>(b.data());
  return {p, p + b.size()};
}

netlink::Message new_table(const std::string& name) {
  netlink::Message m(static_cast<uint16_t>((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWTABLE), NLM_F_CREATE);
  m.put_header<nfgenmsg>()->nfgen_family = NFPROTO_INET;
  m.put_str(NFTA_TABLE_NAME, name);
  return m;
}

}  // namespace

TEST_CASE("golden: a batch is BEGIN, the messages numbered from first_seq+1 with REQUEST|ACK, END") {
  netlink::Batch b(NFNL_SUBSYS_NFTABLES, 100);
  CHECK(b.add(new_table("t")) == 0);
  // A message written in place, as libnftnl's builders do.
  CHECK(b.add_raw([](char* buf, uint32_t seq) {
    nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_DELTABLE;
    nlh->nlmsg_seq = seq;
    static_cast<nfgenmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(nfgenmsg)))->nfgen_family = NFPROTO_INET;
    mnl_attr_put_strz(nlh, NFTA_TABLE_NAME, "u");
  }) == 1);
  REQUIRE(b.finish().has_value());
  CHECK(b.count() == 2);
  CHECK(b.first_seq() == 100);
  CHECK(b.seq_of(1) == 102);
  CHECK(b.end_seq() == 103);
  const Bytes want = {
      // BATCH_BEGIN: len 20, type 0x10, flags REQUEST, seq 100, pid 0 | nfgenmsg AF_UNSPEC, V0, res_id be16 10
      0x14, 0x00, 0x00, 0x00, 0x10, 0x00, 0x01, 0x00, 0x64, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x0a,
      // NFT_MSG_NEWTABLE (0x0a00): len 28, flags REQUEST|ACK|CREATE = 0x0405, seq 101 | nfgenmsg inet
      0x1c, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x05, 0x04, 0x65, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x01, 0x00, 0x00, 0x00,
      //   NFTA_TABLE_NAME (1) len 6 "t\0" + 2 pad
      0x06, 0x00, 0x01, 0x00, 't', 0x00, 0x00, 0x00,
      // NFT_MSG_DELTABLE (0x0a02): len 28, flags REQUEST|ACK = 0x0005, seq 102 | nfgenmsg inet
      0x1c, 0x00, 0x00, 0x00, 0x02, 0x0a, 0x05, 0x00, 0x66, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x01, 0x00, 0x00, 0x00,
      //   NFTA_TABLE_NAME "u"
      0x06, 0x00, 0x01, 0x00, 'u', 0x00, 0x00, 0x00,
      // BATCH_END: len 20, type 0x11, flags REQUEST, seq 103 | nfgenmsg AF_UNSPEC, V0, res_id 10
      0x14, 0x00, 0x00, 0x00, 0x11, 0x00, 0x01, 0x00, 0x67, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x0a,
  };
  CHECK(bytes_of(b) == want);
}

TEST_CASE("a batch over its size limit, or with an oversized message, fails to finish") {
  netlink::Batch small(NFNL_SUBSYS_NFTABLES, 1, 64);
  for (int i = 0; i < 3; ++i) small.add(new_table("t" + std::to_string(i)));
  auto st = small.finish();
  REQUIRE_FALSE(st.has_value());
  CHECK(st.error().cni_code == cni_code::kInternal);
  CHECK(st.error().msg.find("exceeds 64 bytes") != std::string::npos);

  netlink::Batch b(NFNL_SUBSYS_NFTABLES, 1, 128);
  b.add(new_table(std::string(200, 'x')));
  auto st2 = b.finish();
  REQUIRE_FALSE(st2.has_value());
  CHECK(st2.error().cni_code == cni_code::kInternal);
}

TEST_CASE("an outcome is ok only when every message was acked without error") {
  netlink::BatchOutcome out;
  out.acks = {{true, 0, ""}, {true, 0, ""}};
  CHECK(out.ok());
  out.acks[1] = {false, 0, ""};
  CHECK_FALSE(out.ok());
  out.acks[1] = {true, ENOENT, "No such file or directory"};
  CHECK_FALSE(out.ok());
  out.acks[1] = {true, 0, ""};
  out.batch_err = EOPNOTSUPP;
  CHECK_FALSE(out.ok());
}

TEST_CASE("write_over_zeroes: every byte a builder skips reads zero, in a message longer than the cleared 4 KiB too") {
  for (uint32_t len : {uint32_t{100}, uint32_t{6000}}) {
    CAPTURE(len);
    std::vector<char> buf(64 * 1024, static_cast<char>(0xAA));  // what an earlier use left there
    int runs = 0;
    netlink::write_over_zeroes(buf.data(), buf.size(), [&](char* b) {
      ++runs;
      auto* nlh = reinterpret_cast<nlmsghdr*>(b);  // the header only, as a builder that skips padding
      nlh->nlmsg_len = len;
      nlh->nlmsg_type = 1;
      nlh->nlmsg_flags = 0;
      nlh->nlmsg_seq = 0;
      nlh->nlmsg_pid = 0;
      for (uint32_t i = sizeof(nlmsghdr); i < len; i += 100) b[i] = 1;
    });
    CHECK(runs == (len > 4096 ? 2 : 1));
    size_t garbage = 0, ones = 0;
    for (uint32_t i = sizeof(nlmsghdr); i < len; ++i) {
      if (buf[i] == 1) ++ones;
      else if (buf[i] != 0) ++garbage;
    }
    CHECK(garbage == 0);
    CHECK(ones == (len - sizeof(nlmsghdr) + 99) / 100);
  }
}

TEST_CASE("Message::put clears an attribute's padding whatever its buffer held") {
  netlink::Message m(uint16_t{16}, 0);
  const size_t before = m.size();
  // raw() makes room without clearing it; fill that room as an earlier use of the memory would.
  auto* room = reinterpret_cast<uint8_t*>(m.raw(64)) + before;
  std::fill(room, room + 64, uint8_t{0xAA});
  m.put_str(3, "abcde");  // 6 payload bytes: 2 of padding
  const Bytes b = m.bytes();
  REQUIRE(b.size() == before + 12);
  CHECK(Bytes(b.begin() + static_cast<long>(before) + 4, b.end()) == Bytes{'a', 'b', 'c', 'd', 'e', 0, 0, 0});
}
