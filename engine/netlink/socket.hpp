// plumb's one netlink transport: a socket of any netlink protocol (NETLINK_ROUTE, NETLINK_GENERIC,
// NETLINK_RDMA, NETLINK_NETFILTER) bound to the network namespace it was opened in.
//   request     a change: NLM_F_ACK added, the kernel's ACK awaited, errors with extended-ack text
//   query       a GET: every reply message handed to a callback (a dump goes through dump())
//   dump        NLM_F_DUMP: the whole dump received, restarted when the kernel marks it
//               interrupted (NLM_F_DUMP_INTR), delivered only from a complete, consistent attempt
//   send_batch  an nfnetlink batch (batch.hpp) in one sendmsg(), the ack of every message collected
// Every request carries a fresh sequence number; every reply is checked for sequence number and
// port id (stale replies of an earlier request are skipped); receive buffers are sized to each
// pending datagram (MSG_PEEK|MSG_TRUNC), so no reply is ever truncated.
// One socket per namespace per process: callers keep theirs (link/addr/route/tc take a Socket&),
// and code without one uses shared().
#pragma once

#include <linux/netlink.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/base/result.hpp"
#include "engine/netlink/batch.hpp"
#include "engine/netlink/message.hpp"

namespace plumb::netlink {

/// Receives one reply message (a data message: type >= NLMSG_MIN_TYPE). An error stops delivery
/// and is returned by the call that delivered it.
using OnMessage = std::function<Status(const nlmsghdr*)>;

/// A netlink socket. Not copyable; movable. Opened in the calling thread's current netns and
/// stays bound to it for its lifetime. Not thread-safe: one exchange at a time.
class Socket {
 public:
  /// Attempts of one dump() before an interrupted dump (NLM_F_DUMP_INTR) is reported as EINTR.
  static constexpr int kDumpAttempts = 5;

  /// Opens a socket of `protocol` (NETLINK_ROUTE by default) with SOCK_CLOEXEC, binds it,
  /// enables NETLINK_EXT_ACK and NETLINK_CAP_ACK. Errors: errno from socket/bind (EPROTONOSUPPORT
  /// when the kernel lacks the protocol).
  [[nodiscard]] static Result<Socket> open(int protocol = NETLINK_ROUTE);
  /// Opens a socket inside the namespace open at `netns_fd` (enters it with a netns::Guard for
  /// the socket() call only; the socket stays bound to that namespace).
  [[nodiscard]] static Result<Socket> open_in(int netns_fd, int protocol = NETLINK_ROUTE);

  Socket(Socket&&) noexcept;
  Socket& operator=(Socket&&) noexcept;
  ~Socket();

  /// Sends a change request (NLM_F_ACK is added) and waits for the kernel's ACK.
  /// `what` describes the operation for the error message. Errors: the kernel's errno with
  /// its extended-ack text in Error::details; EMSGSIZE for an overflowed message; transport errnos.
  [[nodiscard]] Status request(Message& msg, const std::string& what);

  /// Sends a request expecting reply messages (NLM_F_ACK is added) and calls on_msg for each data
  /// message as it arrives, until the ACK or error. A request flagged NLM_F_DUMP is a dump() (the
  /// NLM_F_DUMP bits collide with NLM_F_REPLACE|NLM_F_EXCL: do not query() such a change).
  /// A callback error stops delivery and is returned (the rest of the reply is drained).
  /// Errors: as request(), or the first callback error.
  [[nodiscard]] Status query(Message& msg, const std::string& what, const OnMessage& on_msg);

  /// Sends a change request with NLM_F_ECHO (and NLM_F_ACK) and waits for the ACK, calling
  /// on_echo for each message the kernel echoes back before it: the object as the change left it,
  /// where the kernel honours NLM_F_ECHO for that request (RTM_NEWLINK: Linux 6.1 and later);
  /// none from older kernels. Errors: as request(), or the first callback error.
  [[nodiscard]] Status request_echo(Message& msg, const std::string& what, const OnMessage& on_echo);

  /// Dumps (NLM_F_DUMP and NLM_F_ACK are added): receives the whole reply up to NLMSG_DONE; when
  /// the kernel marks it interrupted by a concurrent change (NLM_F_DUMP_INTR) the whole dump is
  /// requested again, up to kDumpAttempts times. Only the messages of the complete attempt are
  /// then handed to on_msg, in order (held in memory until then: about the dump's size in bytes).
  /// Errors: EINTR after kDumpAttempts interrupted attempts; the kernel's errno (e.g. ENOENT) with
  /// its extended-ack text; the first callback error (delivery stops there).
  [[nodiscard]] Status dump(Message& msg, const std::string& what, const OnMessage& on_msg);

  /// Sends a finished nfnetlink batch in one sendmsg() and collects the ack of every message
  /// (replies outside the batch's sequence range are stale and skipped; another port id is an
  /// error) or the batch-level error. Kernel refusals are in the outcome, not errors.
  /// Errors (transport only): send/receive errno, ETIMEDOUT when acks are still missing after
  /// 5 s, ESRCH for a reply carrying another port id; kInternal for a batch not finish()ed.
  [[nodiscard]] Result<BatchOutcome> send_batch(const Batch& b, const std::string& what);

  /// Reserves `count` consecutive sequence numbers (for a Batch) and returns the first; requests
  /// sent afterwards get numbers after them. Never returns 0 and never wraps inside a range.
  [[nodiscard]] uint32_t reserve_seq(uint32_t count);

  /// How many times dump() restarted an interrupted dump on this socket (diagnostics, tests).
  uint64_t dump_restarts() const { return restarts_; }
  /// False once an exchange failed midway (receive or protocol error): replies may be left
  /// unread, so shared() replaces such a socket.
  bool healthy() const { return healthy_; }
  int protocol() const { return protocol_; }
  uint32_t port_id() const;
  int fd() const;

 private:
  struct Reply;
  Socket(mnl_socket* nl, int protocol);
  Result<uint32_t> send_request(Message& msg, const std::string& what);
  Result<Reply> exchange(Message& msg, const std::string& what, const std::function<void(const nlmsghdr*)>& sink);
  Status exchange_messages(Message& msg, const std::string& what, const OnMessage& on_msg);
  Status await_reply(uint32_t seq, const std::string& what, const std::function<void(const nlmsghdr*)>& sink,
                     Reply& reply);
  Status receive_acks(const Batch& b, const std::string& what, BatchOutcome& out);
  Result<size_t> receive(const std::string& what);
  Status walk(size_t len, const std::string& what, const std::function<void(const nlmsghdr*)>& visit);

  mnl_socket* nl_ = nullptr;
  int protocol_ = 0;
  uint32_t seq_ = 0;
  uint64_t restarts_ = 0;
  bool healthy_ = true;
  ByteBuffer<uint8_t> rxbuf_;
};

/// The calling thread's socket of `protocol` in its current network namespace, for code that
/// has none of its own (nftables, conntrack, the RDMA mode, vDPA): opened on first use, kept, and
/// handed out again while the thread stays in that namespace (checked by the namespace's inode on
/// each call) in the same process (a forked child opens its own). One namespace is remembered per
/// protocol; a socket that is no longer healthy() is replaced. The caller may hold the pointer
/// as long as it likes. Errors: as Socket::open.
[[nodiscard]] Result<std::shared_ptr<Socket>> shared(int protocol);

/// Drops the calling thread's shared() sockets of every namespace but its current one (a pod's
/// namespace stays alive while a socket in it is open): what a process that serves one CNI
/// invocation after another (a `plumb daemon` worker) does between them. Callers still holding
/// a pointer keep that socket until they let it go.
void release_shared_elsewhere();

/// The outcome of a request that creates a kernel object (link, address, route), with the CNI
/// code its errno means: EEXIST → kConflict (the object is already there), EOPNOTSUPP →
/// kKernelFeature (this kernel lacks the kind); other errors unchanged.
[[nodiscard]] Status classify_create(Status st);

}  // namespace plumb::netlink
