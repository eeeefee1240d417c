// nfnetlink batches: NFNL_MSG_BATCH_BEGIN, the messages, NFNL_MSG_BATCH_END in one buffer, sent
// with one sendmsg() (Socket::send_batch) and applied by the subsystem named in BEGIN's res_id
// atomically (nf_tables: all messages or none). Every message carries NLM_F_ACK and its own
// sequence number, so the kernel answers each one.
//
//   one sendmsg() buffer:
//   +----------------------+---------------------+-----+---------------------+----------------------+
//   | nlmsghdr BATCH_BEGIN | nlmsghdr            |     | nlmsghdr            | nlmsghdr BATCH_END   |
//   | (0x10) seq S         | seq S+1, REQ|ACK|.. | ... | seq S+n             | (0x11) seq S+n+1     |
//   | nfgenmsg {AF_UNSPEC, | nfgenmsg + attrs    |     |                     | nfgenmsg {AF_UNSPEC, |
//   |  V0, res_id (be16)}  |                     |     |                     |  V0, res_id (be16)}  |
//   +----------------------+---------------------+-----+---------------------+----------------------+
//   replies: one NLMSG_ERROR per message S+1..S+n (error 0 = accepted); a refusal of the whole
//   transaction (unknown subsystem, commit failure) is an NLMSG_ERROR for seq S.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/base/result.hpp"
#include "engine/netlink/message.hpp"

namespace plumb::netlink {

/// One nfnetlink batch under construction. Messages are numbered 0..count()-1 in the order added.
class Batch {
 public:
  /// Default size limit of a batch in bytes.
  static constexpr size_t kDefaultLimit = 64 * 1024;

  /// res_id: the nfnetlink subsystem that applies the batch (NFNL_SUBSYS_NFTABLES).
  /// first_seq: sequence number of BATCH_BEGIN; messages get first_seq+1, +2, ...; END follows.
  ///            Take it from Socket::reserve_seq(max_messages(limit) + 2) of the sending socket.
  /// limit: maximum size of the whole batch in bytes (finish() fails beyond it).
  Batch(uint16_t res_id, uint32_t first_seq, size_t limit = kDefaultLimit);

  /// The most messages a batch of `limit` bytes can hold (every message has a 16-byte header).
  static constexpr uint32_t max_messages(size_t limit) { return static_cast<uint32_t>(limit / 16); }

  /// Messages are added before finish().
  /// Appends a copy of `m` with sequence number seq_of(count()) and NLM_F_ACK added; returns its
  /// index.
  size_t add(const Message& m);
  /// Appends a message written in place by `write(buf, seq)`, for builders that write into a raw
  /// buffer without bounds checks (libnftnl): `buf` has room for limit() bytes, and `write` must
  /// leave one complete message there (nlmsg_len set) numbered `seq`. NLM_F_REQUEST|NLM_F_ACK are
  /// added. Returns its index.
  size_t add_raw(const std::function<void(char* buf, uint32_t seq)>& write);
  /// Closes the batch (BATCH_END). Errors: kInternal when the batch exceeds limit() bytes.
  [[nodiscard]] Status finish();

  /// True once finish() closed the batch.
  bool finished() const { return finished_; }
  size_t count() const { return count_; }
  size_t limit() const { return limit_; }
  uint32_t first_seq() const { return first_seq_; }
  /// Sequence number of message i.
  uint32_t seq_of(size_t i) const { return first_seq_ + 1 + static_cast<uint32_t>(i); }
  /// Sequence number of BATCH_END.
  uint32_t end_seq() const { return seq_of(count_); }
  /// The bytes to send (complete once finish() succeeded).
  const void* data() const { return buf_.data(); }
  size_t size() const { return used_; }

 private:
  void put_control(uint16_t type, uint32_t seq);
  char* slot(size_t room);
  size_t commit();

  uint16_t res_id_;
  uint32_t first_seq_;
  size_t limit_;
  ByteBuffer<char> buf_;
  size_t used_ = 0;
  size_t count_ = 0;
  bool finished_ = false;
  bool malformed_ = false;
};

/// The kernel's answer to one message of a batch.
struct Ack {
  bool seen = false;  ///< an answer arrived (missing after a batch-level error)
  int err = 0;        ///< positive errno, 0 = accepted
  std::string ext;    ///< extended-ack text (NLMSGERR_ATTR_MSG, bad attribute offset), may be empty
};

/// The kernel's answers to a batch.
struct BatchOutcome {
  std::vector<Ack> acks;  ///< one per message, in batch order
  int batch_err = 0;      ///< error reported for BATCH_BEGIN (whole transaction refused)
  std::string batch_ext;  ///< its extended-ack text
  /// True when the transaction was committed (every message acked without error).
  [[nodiscard]] bool ok() const;
};

}  // namespace plumb::netlink
