// nftables transactions over nfnetlink: one Batch (NFNL_MSG_BATCH_BEGIN, the messages,
// NFNL_MSG_BATCH_END) is sent with one sendmsg() and applied by the kernel atomically: all
// messages or none. Every message carries NLM_F_ACK and its own sequence number, so the kernel
// answers each one; Session::send() collects every ack of the batch (checking port id and
// sequence range) and keeps the extended-ack text (NETLINK_EXT_ACK) of each error.
// Internal to engine/nft.
//
//   sendmsg buffer (mnl_nlmsg_batch):
//   +--------------------+-----------------+-----+-----------------+------------------+
//   | nlmsghdr BEGIN     | nlmsghdr        |     | nlmsghdr        | nlmsghdr END     |
//   | seq S, nfgenmsg    | seq S+1 NEW*/   | ... | seq S+n         | seq S+n+1        |
//   | res_id=NFTABLES    | DEL* + attrs    |     |                 |                  |
//   +--------------------+-----------------+-----+-----------------+------------------+
//   replies: one NLMSG_ERROR per message S+1..S+n (error 0 = ok); a failure of the whole
//   transaction (no nf_tables, commit error) is an NLMSG_ERROR for seq S.
#pragma once

#include <libmnl/libmnl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/base/result.hpp"
#include "engine/nft/objects.hpp"

namespace plumb::nft::nfnl {

/// One batch under construction. Messages are numbered 0..count()-1 in the order added.
class Batch {
 public:
  /// first_seq: sequence number of BATCH_BEGIN; messages get first_seq+1, +2, ...
  /// limit: maximum batch size in bytes (every single message is far smaller).
  explicit Batch(uint32_t first_seq, size_t limit = 64 * 1024);
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  /// Each add_* appends one NFT_MSG_* message `type` (e.g. NFT_MSG_NEWTABLE) with
  /// NLM_F_REQUEST|NLM_F_ACK|flags and returns its index.
  ///   what     names the operation in errors ("create chain inet plumb postrouting").
  ///   feature  when non-empty, ENOENT for this message means the kernel lacks this feature
  ///            (reported as cni_code::kKernelFeature); only for messages whose other
  ///            dependencies are created earlier in the same batch.
  size_t add_table(uint16_t type, uint16_t flags, const nftnl_table* t, std::string what, std::string feature = {});
  size_t add_chain(uint16_t type, uint16_t flags, const nftnl_chain* c, std::string what, std::string feature = {});
  size_t add_rule(uint16_t type, uint16_t flags, nftnl_rule* r, std::string what, std::string feature = {});
  size_t add_set(uint16_t type, uint16_t flags, nftnl_set* s, std::string what, std::string feature = {});
  /// NFT_MSG_NEWSETELEM / NFT_MSG_DELSETELEM for the elements held by `s`.
  size_t add_elems(uint16_t type, uint16_t flags, nftnl_set* s, std::string what, std::string feature = {});

  /// Closes the batch (BATCH_END). Errors: kInternal when the messages exceeded the limit.
  [[nodiscard]] Status finish();

  size_t count() const { return what_.size(); }
  uint32_t first_seq() const { return first_seq_; }
  /// Sequence number of message i.
  uint32_t seq_of(size_t i) const { return first_seq_ + 1 + static_cast<uint32_t>(i); }
  uint32_t end_seq() const { return first_seq_ + 1 + static_cast<uint32_t>(count()); }
  const std::string& what(size_t i) const { return what_[i]; }
  const std::string& feature(size_t i) const { return feature_[i]; }
  const void* data() const;
  size_t size() const;

 private:
  nlmsghdr* begin_message(uint16_t type, uint16_t flags, std::string what, std::string feature);
  void end_message();

  uint32_t first_seq_;
  std::vector<char> buf_;
  mnl_nlmsg_batch* batch_ = nullptr;
  bool overflow_ = false;
  bool finished_ = false;
  std::vector<std::string> what_;
  std::vector<std::string> feature_;
};

/// The kernel's answer to one message.
struct Ack {
  bool seen = false;
  int err = 0;        ///< positive errno, 0 = accepted
  std::string ext;    ///< extended-ack text (NLMSGERR_ATTR_MSG), may be empty
};

/// The kernel's answers to a batch.
struct Outcome {
  std::vector<Ack> acks;  ///< one per message, in batch order
  int batch_err = 0;      ///< error reported for BATCH_BEGIN (whole transaction refused)
  std::string batch_ext;
  /// True when the transaction was committed (no error anywhere).
  [[nodiscard]] bool ok() const;
};

/// Converts a failed outcome into plumb's Error: the first failed message names the operation;
/// ENOENT on a message with a feature, or EOPNOTSUPP for the whole batch (no nf_tables
/// subsystem), give cni_code::kKernelFeature. Precondition: !out.ok().
[[nodiscard]] Error to_error(const Batch& b, const Outcome& out);

/// A NETLINK_NETFILTER socket bound in the calling thread's current network namespace.
class Session {
 public:
  /// Opens and binds the socket (SOCK_CLOEXEC) with NETLINK_EXT_ACK and NETLINK_CAP_ACK.
  /// Errors: kKernelFeature when the kernel has no nfnetlink; errno otherwise.
  [[nodiscard]] static Result<Session> open();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  /// A new empty batch numbered after the previous one.
  [[nodiscard]] std::unique_ptr<Batch> batch();
  /// Sends a finished batch in one sendmsg() and collects the ack of every message (or the
  /// batch-level error). Errors (transport only): send/recv errno, ETIMEDOUT when acks are
  /// missing after 5 s, EPROTO for a reply from another port id. Kernel refusals are in Outcome.
  [[nodiscard]] Result<Outcome> send(const Batch& b);

  /// Reads the rules of chain `chain` of table inet `table` with a plain NFT_MSG_GETRULE dump (no
  /// transaction, so no commit cost) and returns the first rule's comment: nullopt when the chain
  /// (or table) does not exist, "" when it has no rules or the first has no comment.
  /// Errors: transport errno, or a kernel error other than ENOENT.
  [[nodiscard]] Result<std::optional<std::string>> first_rule_comment(const std::string& table, const std::string& chain);

 private:
  explicit Session(mnl_socket* nl);
  mnl_socket* nl_ = nullptr;
  uint32_t seq_ = 0;
};

}  // namespace plumb::nft::nfnl
