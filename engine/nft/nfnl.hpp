// nftables transactions over plumb's netlink transport (engine/netlink): a Batch of NFT_MSG_*
// messages built by libnftnl, framed as one nfnetlink batch (netlink/batch.hpp has the layout)
// and applied by the kernel atomically: all messages or none. Session::send() collects every
// ack of the batch (sequence range and port id checked) with the extended-ack text of each error.
// Internal to engine/nft.
#pragma once

#include <libmnl/libmnl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/base/result.hpp"
#include "engine/netlink/socket.hpp"
#include "engine/nft/objects.hpp"

namespace plumb::nft::nfnl {

/// The kernel's answer to one message, and to a whole batch (netlink/batch.hpp).
using Ack = netlink::Ack;
using Outcome = netlink::BatchOutcome;

/// One nftables batch under construction. Messages are numbered 0..count()-1 in the order added.
class Batch {
 public:
  /// first_seq: sequence number of BATCH_BEGIN; messages get first_seq+1, +2, ...
  /// limit: maximum batch size in bytes (every single message is far smaller).
  /// family: the nfgenmsg family of every message (NFPROTO_INET: plumb's table `inet plumb`;
  /// NFPROTO_BRIDGE: `bridge plumb`).
  explicit Batch(uint32_t first_seq, size_t limit = netlink::Batch::kDefaultLimit, uint16_t family = obj::kFamily);

  /// Each add_* appends one NFT_MSG_* message `type` (e.g. NFT_MSG_NEWTABLE) of the batch's family with
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
  uint32_t first_seq() const { return messages_.first_seq(); }
  /// Sequence number of message i.
  uint32_t seq_of(size_t i) const { return messages_.seq_of(i); }
  uint32_t end_seq() const { return messages_.end_seq(); }
  const std::string& what(size_t i) const { return what_[i]; }
  const std::string& feature(size_t i) const { return feature_[i]; }
  const void* data() const { return messages_.data(); }
  size_t size() const { return messages_.size(); }
  /// The framed batch, as Socket::send_batch takes it.
  const netlink::Batch& messages() const { return messages_; }

 private:
  size_t add(uint16_t type, uint16_t flags, std::string what, std::string feature,
             const std::function<void(nlmsghdr*)>& payload);

  netlink::Batch messages_;
  uint16_t family_;
  std::vector<std::string> what_;
  std::vector<std::string> feature_;
};

/// Converts a failed outcome into plumb's Error: the first failed message names the operation;
/// ENOENT on a message with a feature, or EOPNOTSUPP for the whole batch (no nf_tables
/// subsystem), give cni_code::kKernelFeature. Precondition: !out.ok().
[[nodiscard]] Error to_error(const Batch& b, const Outcome& out);

/// One set element as the kernel holds it.
struct Element {
  std::vector<uint8_t> data;  ///< map data ("" for a plain set)
  std::string comment;        ///< the element's comment user data ("" if none)
};

/// True when the batch itself was accepted and every message that failed failed with `err`.
[[nodiscard]] bool only_errno(const Outcome& out, int err);

/// A single (not batched) NFT_MSG_* request of family `family` built by libnftnl: `payload`
/// writes the attributes after the header (libnftnl writes unchecked: 64 KiB are reserved).
[[nodiscard]] netlink::Message request(uint16_t type, uint16_t family, uint16_t flags,
                                      const std::function<void(nlmsghdr*)>& payload);

/// nftables access in the calling thread's current network namespace, over the thread's shared
/// NETLINK_NETFILTER socket of that namespace (netlink::shared). Cheap to open and copy.
class Session {
 public:
  /// Errors: kKernelFeature when the kernel has no nfnetlink; errno otherwise.
  [[nodiscard]] static Result<Session> open();

  /// A new empty batch of `family` numbered after everything sent so far on the socket.
  [[nodiscard]] std::unique_ptr<Batch> batch(uint16_t family = obj::kFamily);
  /// Sends a finished batch in one sendmsg() and collects the ack of every message (or the
  /// batch-level error). Errors (transport only): as netlink::Socket::send_batch. Kernel refusals
  /// are in the Outcome.
  [[nodiscard]] Result<Outcome> send(const Batch& b);

  /// Reads the rules of chain `chain` of table inet `table` with a plain NFT_MSG_GETRULE dump (no
  /// transaction, so no commit cost) and returns the first rule's comment: nullopt when the chain
  /// (or table) does not exist, "" when it has no rules or the first has no comment.
  /// Errors: transport errno, or a kernel error other than ENOENT.
  [[nodiscard]] Result<std::optional<std::string>> first_rule_comment(const std::string& table, const std::string& chain);

  /// Whether chain `chain` of table `table` (nfgenmsg family `family`) exists: one NFT_MSG_GETCHAIN,
  /// no transaction. The "ensure" transactions create a marker object with NLM_F_EXCL that exists
  /// only once all of their objects do; asking for it first spares them the abort (and the RCU
  /// grace period, ~13 ms here, an aborted or committing transaction costs) on every pod.
  /// Errors: transport errno, kernel errors other than ENOENT.
  [[nodiscard]] Result<bool> has_chain(uint16_t family, const std::string& table, const std::string& chain);
  /// The same for set (or map) `set` (NFT_MSG_GETSET).
  [[nodiscard]] Result<bool> has_set(uint16_t family, const std::string& table, const std::string& set);

  /// The element of set `set` of table inet `table` with `key` (one NFT_MSG_GETSETELEM, no
  /// transaction): nullopt when absent, or when the set or table does not exist.
  /// Errors: transport errno, EBADMSG for an unreadable reply, kernel errors other than ENOENT.
  [[nodiscard]] Result<std::optional<Element>> get_element(const std::string& table, const std::string& set,
                                                           const std::vector<uint8_t>& key);

  /// The socket, for GET requests and dumps of other nfnetlink subsystems (conntrack).
  netlink::Socket& socket() { return *socket_; }

 private:
  explicit Session(std::shared_ptr<netlink::Socket> s) : socket_(std::move(s)) {}
  std::shared_ptr<netlink::Socket> socket_;
};

}  // namespace plumb::nft::nfnl
