#include "engine/netlink/socket.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "engine/base/netns.hpp"

namespace plumb::netlink {
namespace {

constexpr size_t kInitialReceiveBytes = size_t{32} * 1024;
/// The kernel answers a batch inside sendmsg(): this only guards against one that never does.
constexpr int kAckTimeoutMs = 5000;

using Sink = std::function<void(const nlmsghdr*)>;

/// Appends one message to `out`, padded to NLMSG_ALIGNTO so the next one starts aligned.
void append_message(std::vector<uint8_t>& out, const nlmsghdr* nlh) {
  const auto* p = reinterpret_cast<const uint8_t*>(nlh);
  out.insert(out.end(), p, p + nlh->nlmsg_len);
  out.resize(out.size() + (MNL_ALIGN(nlh->nlmsg_len) - nlh->nlmsg_len), 0);
}

/// Hands every message held in `msgs` (whole, aligned messages) to on_msg; stops at an error.
Status deliver(const std::vector<uint8_t>& msgs, const OnMessage& on_msg) {
  int left = static_cast<int>(msgs.size());
  for (const auto* nlh = reinterpret_cast<const nlmsghdr*>(msgs.data()); mnl_nlmsg_ok(nlh, left);
       nlh = mnl_nlmsg_next(nlh, &left)) {
    PLUMB_TRY(on_msg(nlh));
  }
  return {};
}

}  // namespace

/// What the reply stream of one request ended with.
struct Socket::Reply {
  KernelAnswer answer;       // NLMSG_ERROR / NLMSG_DONE verdict
  bool interrupted = false;  // a message carried NLM_F_DUMP_INTR
};

Socket::Socket(mnl_socket* nl, int protocol)
    : nl_(nl), protocol_(protocol), seq_(static_cast<uint32_t>(time(nullptr))), rxbuf_(kInitialReceiveBytes) {}

Socket::Socket(Socket&& o) noexcept
    : nl_(std::exchange(o.nl_, nullptr)),
      protocol_(o.protocol_),
      seq_(o.seq_),
      restarts_(o.restarts_),
      healthy_(o.healthy_),
      rxbuf_(std::move(o.rxbuf_)) {}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    if (nl_ != nullptr) mnl_socket_close(nl_);
    nl_ = std::exchange(o.nl_, nullptr);
    protocol_ = o.protocol_;
    seq_ = o.seq_;
    restarts_ = o.restarts_;
    healthy_ = o.healthy_;
    rxbuf_ = std::move(o.rxbuf_);
  }
  return *this;
}

Socket::~Socket() {
  if (nl_ != nullptr) mnl_socket_close(nl_);
}

Result<Socket> Socket::open(int protocol) {
  std::string what = "netlink socket (protocol " + std::to_string(protocol) + ")";
  mnl_socket* nl = mnl_socket_open2(protocol, SOCK_CLOEXEC);
  if (nl == nullptr) return fail_errno(errno, "open " + what);
  Socket s(nl, protocol);
  if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) return fail_errno(errno, "bind " + what);
  int one = 1;
  // Both options exist since Linux 4.12; an older kernel only loses the extended-ack text.
  if (mnl_socket_setsockopt(nl, NETLINK_EXT_ACK, &one, sizeof one) < 0 && errno != ENOPROTOOPT) {
    return fail_errno(errno, "enable NETLINK_EXT_ACK on " + what);
  }
  if (mnl_socket_setsockopt(nl, NETLINK_CAP_ACK, &one, sizeof one) < 0 && errno != ENOPROTOOPT) {
    return fail_errno(errno, "enable NETLINK_CAP_ACK on " + what);
  }
  // rtnetlink's strict checking (Linux 4.20, as iproute2 enables it): dumps honour the filters in
  // their header (an address dump asked for one ifindex walks only that device, not every
  // address of the node). An older kernel dumps everything and the readers filter as before.
  if (protocol == NETLINK_ROUTE && mnl_socket_setsockopt(nl, NETLINK_GET_STRICT_CHK, &one, sizeof one) < 0 &&
      errno != ENOPROTOOPT) {
    return fail_errno(errno, "enable NETLINK_GET_STRICT_CHK on " + what);
  }
  return s;
}

Result<Socket> Socket::open_in(int netns_fd, int protocol) {
  auto ns = netns::Netns::from_fd(netns_fd);
  if (!ns) return std::unexpected(ns.error().within("open netlink socket in network namespace"));
  auto guard = netns::Guard::enter(*ns);
  if (!guard) return std::unexpected(guard.error().within("open netlink socket"));
  return open(protocol);  // the guard returns this thread to its namespace on scope exit
}

uint32_t Socket::port_id() const { return mnl_socket_get_portid(nl_); }

int Socket::fd() const { return mnl_socket_get_fd(nl_); }

uint32_t Socket::reserve_seq(uint32_t count) {
  if (count == 0) count = 1;
  if (seq_ > std::numeric_limits<uint32_t>::max() - count) seq_ = 0;  // wrap before, never inside
  const uint32_t first = seq_ + 1;
  seq_ += count;
  return first;
}

// ---------------------------------------------------------------------------------------------
// Receiving

Result<size_t> Socket::receive(const std::string& what) {
  for (;;) {
    // Size the buffer to the pending datagram first so large dump parts are never truncated.
    ssize_t pending = recv(fd(), nullptr, 0, MSG_PEEK | MSG_TRUNC);
    if (pending < 0) {
      if (errno == EINTR) continue;
      healthy_ = false;
      return fail_errno(errno, what + ": receive netlink reply");
    }
    if (static_cast<size_t>(pending) > rxbuf_.size()) {
      rxbuf_.resize((static_cast<size_t>(pending) + 4095) & ~static_cast<size_t>(4095));
    }
    sockaddr_nl from{};
    iovec iov{rxbuf_.data(), rxbuf_.size()};
    msghdr mh{};
    mh.msg_name = &from;
    mh.msg_namelen = sizeof from;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    ssize_t n = recvmsg(fd(), &mh, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      healthy_ = false;
      return fail_errno(errno, what + ": receive netlink reply");
    }
    if (from.nl_pid != 0) continue;  // sent by a process, not the kernel: never a reply
    if (mh.msg_flags & MSG_TRUNC) {
      healthy_ = false;
      return fail_errno(EMSGSIZE, what + ": netlink reply truncated");
    }
    return static_cast<size_t>(n);
  }
}

/// Hands every message of the datagram in rxbuf_[0, len) to `visit`, after checking that it is
/// addressed to this socket's port id. Errors: ESRCH for another port id, EBADMSG for bytes that
/// do not form a message.
Status Socket::walk(size_t len, const std::string& what, const Sink& visit) {
  int left = static_cast<int>(len);
  const auto* nlh = reinterpret_cast<const nlmsghdr*>(rxbuf_.data());
  for (; mnl_nlmsg_ok(nlh, left); nlh = mnl_nlmsg_next(nlh, &left)) {
    if (nlh->nlmsg_pid != port_id()) {
      healthy_ = false;
      return fail_errno(ESRCH, what + ": netlink reply for port id " + std::to_string(nlh->nlmsg_pid) +
                                   ", ours is " + std::to_string(port_id()));
    }
    visit(nlh);
  }
  if (left > 0) {
    healthy_ = false;
    return fail_errno(EBADMSG, what + ": malformed netlink reply (" + std::to_string(left) +
                                   " trailing bytes do not form a message)");
  }
  return {};
}

Result<uint32_t> Socket::send_request(Message& msg, const std::string& what) {
  if (msg.overflowed()) return fail_errno(EMSGSIZE, what + ": netlink attribute larger than 64 KiB");
  nlmsghdr* nlh = msg.header();
  nlh->nlmsg_seq = reserve_seq(1);
  nlh->nlmsg_pid = port_id();
  ssize_t sent = mnl_socket_sendto(nl_, msg.data(), msg.size());
  if (sent < 0) return fail_errno(errno, what + ": send netlink request");
  if (static_cast<size_t>(sent) != msg.size()) return fail_errno(EMSGSIZE, what + ": short netlink send");
  return nlh->nlmsg_seq;
}

/// Reads the reply to request `seq` up to its end (NLMSG_ERROR, i.e. the ACK or an error, or a
/// dump's NLMSG_DONE). Data messages go to `sink` unless the reply was marked interrupted.
Status Socket::await_reply(uint32_t seq, const std::string& what, const Sink& sink, Reply& reply) {
  bool done = false;
  while (!done) {
    size_t n = PLUMB_TRY(receive(what));
    PLUMB_TRY(walk(n, what, [&](const nlmsghdr* nlh) {
      if (done || nlh->nlmsg_seq != seq) return;  // the tail of an earlier request: not ours
      if (nlh->nlmsg_flags & NLM_F_DUMP_INTR) reply.interrupted = true;
      switch (nlh->nlmsg_type) {
        case NLMSG_NOOP: return;
        case NLMSG_ERROR:
          reply.answer = read_error(nlh);
          done = true;
          return;
        case NLMSG_DONE:
          reply.answer = read_done(nlh);
          done = true;
          return;
        case NLMSG_OVERRUN:
          reply.answer = {EOVERFLOW, "NLMSG_OVERRUN"};
          done = true;
          return;
        default:
          if (!reply.interrupted) sink(nlh);
      }
    }));
  }
  return {};
}

Result<Socket::Reply> Socket::exchange(Message& msg, const std::string& what, const Sink& sink) {
  msg.header()->nlmsg_flags |= NLM_F_ACK;
  const uint32_t seq = PLUMB_TRY(send_request(msg, what));
  Reply reply;
  PLUMB_TRY(await_reply(seq, what, sink, reply));
  return reply;
}

// ---------------------------------------------------------------------------------------------
// request / query / dump

Status Socket::request(Message& msg, const std::string& what) {
  Reply r = PLUMB_TRY(exchange(msg, what, [](const nlmsghdr*) {}));
  if (r.answer.err != 0) return fail_errno(r.answer.err, what, r.answer.ext);
  return {};
}

Status Socket::query(Message& msg, const std::string& what, const OnMessage& on_msg) {
  if ((msg.header()->nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP) return dump(msg, what, on_msg);
  return exchange_messages(msg, what, on_msg);
}

Status Socket::request_echo(Message& msg, const std::string& what, const OnMessage& on_echo) {
  msg.header()->nlmsg_flags |= NLM_F_ECHO;
  return exchange_messages(msg, what, on_echo);
}

/// One request, its data messages handed to on_msg until the ACK (query() and request_echo()).
Status Socket::exchange_messages(Message& msg, const std::string& what, const OnMessage& on_msg) {
  std::optional<Error> cb_error;
  Reply r = PLUMB_TRY(exchange(msg, what, [&](const nlmsghdr* nlh) {
    if (cb_error) return;  // stop handing messages to the caller; the rest is drained
    if (auto st = on_msg(nlh); !st) cb_error = st.error();
  }));
  if (r.answer.err != 0) return fail_errno(r.answer.err, what, r.answer.ext);
  if (cb_error) return std::unexpected(*cb_error);
  return {};
}

Status Socket::dump(Message& msg, const std::string& what, const OnMessage& on_msg) {
  msg.header()->nlmsg_flags |= NLM_F_DUMP;
  std::vector<uint8_t> msgs;
  for (int attempt = 1;; ++attempt) {
    msgs.clear();
    Reply r = PLUMB_TRY(exchange(msg, what, [&](const nlmsghdr* nlh) { append_message(msgs, nlh); }));
    if (r.interrupted) {
      ++restarts_;
      if (attempt < kDumpAttempts) continue;
      return fail_errno(EINTR, what + ": dump interrupted by concurrent changes " + std::to_string(attempt) +
                                   " times in a row");
    }
    if (r.answer.err != 0) return fail_errno(r.answer.err, what, r.answer.ext);
    return deliver(msgs, on_msg);
  }
}

// ---------------------------------------------------------------------------------------------
// Batches

Result<BatchOutcome> Socket::send_batch(const Batch& b, const std::string& what) {
  if (!b.finished()) return fail(cni_code::kInternal, what + ": batch sent before finish()");
  ssize_t n = mnl_socket_sendto(nl_, b.data(), b.size());
  if (n < 0) return fail_errno(errno, what + ": send batch");
  if (static_cast<size_t>(n) != b.size()) return fail_errno(EMSGSIZE, what + ": short send of batch");
  BatchOutcome out;
  out.acks.resize(b.count());
  PLUMB_TRY(receive_acks(b, what, out));
  return out;
}

/// Collects the acks of batch `b` into `out`. The kernel handles the batch inside sendmsg(), so
/// every reply is queued by now; the poll timeout only guards against a kernel that never answers.
/// After a batch-level error the remaining acks may or may not follow: take what is queued, then
/// stop.
Status Socket::receive_acks(const Batch& b, const std::string& what, BatchOutcome& out) {
  size_t pending = b.count();
  while (pending > 0) {
    pollfd p{fd(), POLLIN, 0};
    int r = poll(&p, 1, out.batch_err != 0 ? 0 : kAckTimeoutMs);
    if (r < 0) {
      if (errno == EINTR) continue;
      healthy_ = false;
      return fail_errno(errno, what + ": wait for batch acks");
    }
    if (r == 0) {
      if (out.batch_err != 0) break;
      healthy_ = false;
      return fail_errno(ETIMEDOUT, what + ": " + std::to_string(pending) + " batch acks missing");
    }
    size_t len = PLUMB_TRY(receive(what));
    PLUMB_TRY(walk(len, what, [&](const nlmsghdr* nlh) {
      if (nlh->nlmsg_type != NLMSG_ERROR) return;  // NOOP/DONE carry no verdict
      const uint32_t seq = nlh->nlmsg_seq;
      if (seq == b.first_seq()) {
        KernelAnswer a = read_error(nlh);
        out.batch_err = a.err != 0 ? a.err : EPROTO;  // BEGIN is never acked on success
        out.batch_ext = std::move(a.ext);
        return;
      }
      if (seq <= b.first_seq() || seq >= b.end_seq()) return;  // a stale reply of an earlier request
      Ack& ack = out.acks[seq - b.first_seq() - 1];
      if (ack.seen) return;
      KernelAnswer a = read_error(nlh);
      ack = Ack{true, a.err, std::move(a.ext)};
      --pending;
    }));
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// One socket per namespace per process

namespace {

struct SharedEntry {
  pid_t pid = 0;
  dev_t ns_dev = 0;
  ino_t ns_ino = 0;
  std::shared_ptr<Socket> socket;
};

std::map<int, SharedEntry>& shared_cache() {
  thread_local std::map<int, SharedEntry> cache;
  return cache;
}

}  // namespace

Result<std::shared_ptr<Socket>> shared(int protocol) {
  struct stat st {};
  if (stat("/proc/thread-self/ns/net", &st) != 0) {
    return fail_errno(errno, "find the current network namespace (/proc/thread-self/ns/net)");
  }
  SharedEntry& e = shared_cache()[protocol];
  const pid_t pid = getpid();
  if (e.socket && e.pid == pid && e.ns_dev == st.st_dev && e.ns_ino == st.st_ino && e.socket->healthy()) {
    return e.socket;
  }
  e.socket.reset();  // a forked child only closes its copy of the descriptor
  auto s = PLUMB_TRY(Socket::open(protocol));
  e = SharedEntry{pid, st.st_dev, st.st_ino, std::make_shared<Socket>(std::move(s))};
  return e.socket;
}

void release_shared_elsewhere() {
  struct stat st {};
  const bool here = stat("/proc/thread-self/ns/net", &st) == 0;
  for (auto it = shared_cache().begin(); it != shared_cache().end();) {
    const SharedEntry& e = it->second;
    if (here && e.pid == getpid() && e.ns_dev == st.st_dev && e.ns_ino == st.st_ino) ++it;
    else it = shared_cache().erase(it);
  }
}

Status classify_create(Status st) {
  if (st) return st;
  Error e = st.error();
  if (e.sys_errno == EEXIST) e.cni_code = cni_code::kConflict;
  if (e.sys_errno == EOPNOTSUPP) e.cni_code = cni_code::kKernelFeature;
  return std::unexpected(e);
}

}  // namespace plumb::netlink
