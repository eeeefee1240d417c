#include "engine/netlink/socket.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <optional>
#include <utility>

#include "engine/kernel/netns.hpp"

namespace plumb::netlink {
namespace {

constexpr size_t kInitialMessageBytes = 4096;
constexpr size_t kInitialReceiveBytes = 32 * 1024;
/// nla_len is 16 bits: payload + header must fit.
constexpr size_t kMaxAttrPayload = 0xFFFF - MNL_ATTR_HDRLEN;

const char* kind_name(mnl_attr_data_type kind) {
  switch (kind) {
    case MNL_TYPE_U8: return "u8";
    case MNL_TYPE_U16: return "u16";
    case MNL_TYPE_U32: return "u32";
    case MNL_TYPE_U64: return "u64";
    case MNL_TYPE_STRING: return "string";
    case MNL_TYPE_FLAG: return "flag";
    case MNL_TYPE_MSECS: return "msecs";
    case MNL_TYPE_NESTED: return "nested";
    case MNL_TYPE_NESTED_COMPAT: return "nested-compat";
    case MNL_TYPE_NUL_STRING: return "NUL-terminated string";
    case MNL_TYPE_BINARY: return "binary";
    default: return "unknown";
  }
}

/// Walks the attributes in [start, start+len) with libmnl, validating every attribute whose
/// type is listed in `policy` (mnl_attr_validate, plus the policy's minimum length) and storing
/// only those.
Result<AttrTable> parse_region(const uint8_t* start, size_t len, uint16_t max_type,
                               const std::vector<AttrPolicy>& policy, const char* where) {
  std::vector<const AttrPolicy*> by_type(static_cast<size_t>(max_type) + 1, nullptr);
  for (const auto& p : policy) {
    if (p.type <= max_type) by_type[p.type] = &p;
  }
  AttrTable table(static_cast<size_t>(max_type) + 1, nullptr);
  const uint8_t* end = start + len;
  const auto* attr = reinterpret_cast<const nlattr*>(start);
  while (mnl_attr_ok(attr, static_cast<int>(end - reinterpret_cast<const uint8_t*>(attr)))) {
    uint16_t type = mnl_attr_get_type(attr);
    if (type <= max_type && by_type[type] != nullptr) {
      const AttrPolicy& p = *by_type[type];
      // mnl_attr_validate checks the type's own rules (exact size for fixed-width integers, NUL
      // for NUL_STRING, ...); libmnl's length argument is exact, so a minimum is checked here.
      int rc = mnl_attr_validate(attr, p.kind);
      if (rc == 0 && p.min_len != 0 && mnl_attr_get_payload_len(attr) < p.min_len) {
        errno = ERANGE;
        rc = -1;
      }
      if (rc < 0) {
        int err = errno != 0 ? errno : EINVAL;
        return fail_errno(err, std::string("parse ") + where + ": attribute type " + std::to_string(type) +
                                   " with a payload of " + std::to_string(mnl_attr_get_payload_len(attr)) +
                                   " bytes is not a valid " + kind_name(p.kind) +
                                   (p.min_len != 0 ? " of at least " + std::to_string(p.min_len) + " bytes" : ""));
      }
      table[type] = attr;
    }
    attr = mnl_attr_next(attr);
  }
  auto rest = end - reinterpret_cast<const uint8_t*>(attr);
  if (rest > 0) {
    return fail_errno(EINVAL, std::string("parse ") + where + ": malformed attribute (" + std::to_string(rest) +
                                  " trailing bytes do not form a valid attribute)");
  }
  return table;
}

/// State of one request/reply exchange, shared with the libmnl callbacks.
struct Exchange {
  const std::function<Status(const nlmsghdr*)>* on_msg = nullptr;
  bool end_on_single = false;  // request without NLM_F_ACK: a reply without NLM_F_MULTI ends it
  bool done = false;
  int kernel_errno = 0;
  std::string ext_ack;
  std::optional<Error> cb_error;
};

/// Extended-ack TLVs (NLMSGERR_ATTR_*) that follow an NLMSG_ERROR or NLMSG_DONE payload.
void read_ext_ack(const nlmsghdr* nlh, size_t payload_offset, Exchange& ex) {
  if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS)) return;
  size_t payload_len = mnl_nlmsg_get_payload_len(nlh);
  size_t off = MNL_ALIGN(payload_offset);
  if (off >= payload_len) return;
  const auto* start = static_cast<const uint8_t*>(mnl_nlmsg_get_payload(nlh)) + off;
  static const std::vector<AttrPolicy> kPolicy = {
      {NLMSGERR_ATTR_MSG, MNL_TYPE_NUL_STRING},
      {NLMSGERR_ATTR_OFFS, MNL_TYPE_U32},
      {NLMSGERR_ATTR_MISS_TYPE, MNL_TYPE_U32},
  };
  auto tb = parse_region(start, payload_len - off, NLMSGERR_ATTR_MAX, kPolicy, "extended ack");
  if (!tb) return;  // the errno alone still reports the failure
  std::string text;
  if (const nlattr* a = (*tb)[NLMSGERR_ATTR_MSG]) text = mnl_attr_get_str(a);
  if (const nlattr* a = (*tb)[NLMSGERR_ATTR_MISS_TYPE]) {
    if (!text.empty()) text += "; ";
    text += "missing attribute type " + std::to_string(mnl_attr_get_u32(a));
  }
  ex.ext_ack = text;
}

int on_data(const nlmsghdr* nlh, void* data) {
  auto& ex = *static_cast<Exchange*>(data);
  if (ex.on_msg != nullptr && *ex.on_msg && !ex.cb_error) {
    Status st = (*ex.on_msg)(nlh);
    // Stop handing messages to the caller but keep reading: the rest of the reply is drained.
    if (!st) ex.cb_error = st.error();
  }
  if (ex.end_on_single && !(nlh->nlmsg_flags & NLM_F_MULTI)) {
    ex.done = true;
    return MNL_CB_STOP;
  }
  return MNL_CB_OK;
}

int on_error(const nlmsghdr* nlh, void* data) {
  auto& ex = *static_cast<Exchange*>(data);
  ex.done = true;
  if (mnl_nlmsg_get_payload_len(nlh) < sizeof(nlmsgerr)) {
    ex.kernel_errno = EBADMSG;
    ex.ext_ack = "truncated NLMSG_ERROR";
    return MNL_CB_STOP;
  }
  const auto* err = static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(nlh));
  if (err->error == 0) return MNL_CB_STOP;  // the ACK
  ex.kernel_errno = err->error < 0 ? -err->error : err->error;
  size_t off = sizeof(nlmsgerr);
  if (!(nlh->nlmsg_flags & NLM_F_CAPPED) && err->msg.nlmsg_len > sizeof(nlmsghdr)) {
    off += err->msg.nlmsg_len - sizeof(nlmsghdr);  // the echoed request payload
  }
  read_ext_ack(nlh, off, ex);
  return MNL_CB_STOP;
}

int on_done(const nlmsghdr* nlh, void* data) {
  auto& ex = *static_cast<Exchange*>(data);
  ex.done = true;
  if (mnl_nlmsg_get_payload_len(nlh) >= sizeof(int)) {
    int err = *static_cast<const int*>(mnl_nlmsg_get_payload(nlh));
    if (err < 0) {
      ex.kernel_errno = -err;
      read_ext_ack(nlh, sizeof(int), ex);
    }
  }
  return MNL_CB_STOP;
}

/// True when the datagram holds the end (NLMSG_DONE or NLMSG_ERROR) of the reply to `seq`.
bool holds_end(const uint8_t* buf, size_t len, uint32_t seq) {
  const auto* nlh = reinterpret_cast<const nlmsghdr*>(buf);
  int left = static_cast<int>(len);
  while (mnl_nlmsg_ok(nlh, left)) {
    if (nlh->nlmsg_seq == seq && (nlh->nlmsg_type == NLMSG_DONE || nlh->nlmsg_type == NLMSG_ERROR)) return true;
    nlh = mnl_nlmsg_next(nlh, &left);
  }
  return false;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Message

Message::Message(uint16_t type, uint16_t flags) : buf_(kInitialMessageBytes, 0) {
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf_.data());
  nlh->nlmsg_type = type;
  nlh->nlmsg_flags = static_cast<uint16_t>(NLM_F_REQUEST | flags);
}

nlmsghdr* Message::header() { return reinterpret_cast<nlmsghdr*>(buf_.data()); }

size_t Message::size() const { return reinterpret_cast<const nlmsghdr*>(buf_.data())->nlmsg_len; }

void Message::reserve(size_t more) {
  size_t need = size() + more;
  if (need <= buf_.size()) return;
  buf_.resize(std::max(need, buf_.size() * 2), 0);
}

void* Message::put_extra(size_t len) {
  reserve(MNL_ALIGN(len));
  return mnl_nlmsg_put_extra_header(header(), len);
}

void Message::put(uint16_t type, const void* data, size_t len) {
  if (len > kMaxAttrPayload) {
    overflowed_ = true;
    return;
  }
  static const uint8_t kEmpty = 0;
  if (data == nullptr) data = &kEmpty;  // len is 0 then; memcpy must not see a null pointer
  if (!mnl_attr_put_check(header(), buf_.size(), type, len, data)) {
    reserve(MNL_ATTR_HDRLEN + MNL_ALIGN(len));
    mnl_attr_put(header(), type, len, data);
  }
}

void Message::put_u8(uint16_t type, uint8_t v) { put(type, &v, sizeof v); }
void Message::put_u16(uint16_t type, uint16_t v) { put(type, &v, sizeof v); }
void Message::put_u32(uint16_t type, uint32_t v) { put(type, &v, sizeof v); }
void Message::put_u64(uint16_t type, uint64_t v) { put(type, &v, sizeof v); }
void Message::put_str(uint16_t type, const std::string& v) { put(type, v.c_str(), v.size() + 1); }
void Message::put_flag(uint16_t type) { put(type, nullptr, 0); }

Message::Nest::Nest(Message& m, uint16_t type) : m_(m), offset_(m.size()) {
  if (mnl_attr_nest_start_check(m_.header(), m_.buf_.size(), type) == nullptr) {
    m_.reserve(MNL_ATTR_HDRLEN);
    mnl_attr_nest_start(m_.header(), type);
  }
}

Message::Nest::~Nest() {
  auto* start = reinterpret_cast<nlattr*>(m_.buf_.data() + offset_);
  if (m_.size() - offset_ > 0xFFFF) m_.overflowed_ = true;
  mnl_attr_nest_end(m_.header(), start);
}

// ---------------------------------------------------------------------------------------------
// Attribute parsing

Result<AttrTable> parse_attrs(const nlmsghdr* nlh, size_t header_len, uint16_t max_type,
                              const std::vector<AttrPolicy>& policy) {
  size_t payload_len = mnl_nlmsg_get_payload_len(nlh);
  if (payload_len < header_len) {
    return fail_errno(EINVAL, "parse netlink message type " + std::to_string(nlh->nlmsg_type) + ": payload of " +
                                  std::to_string(payload_len) + " bytes is shorter than its " +
                                  std::to_string(header_len) + "-byte family header");
  }
  size_t off = MNL_ALIGN(header_len);
  if (off > payload_len) off = payload_len;
  const auto* start = static_cast<const uint8_t*>(mnl_nlmsg_get_payload(nlh)) + off;
  std::string where = "netlink message type " + std::to_string(nlh->nlmsg_type);
  return parse_region(start, payload_len - off, max_type, policy, where.c_str());
}

Result<AttrTable> parse_nested(const nlattr* nest, uint16_t max_type, const std::vector<AttrPolicy>& policy) {
  std::string where = "nested attribute type " + std::to_string(mnl_attr_get_type(nest));
  return parse_region(static_cast<const uint8_t*>(mnl_attr_get_payload(nest)), mnl_attr_get_payload_len(nest),
                      max_type, policy, where.c_str());
}

// ---------------------------------------------------------------------------------------------
// Socket

Socket::Socket(mnl_socket* nl) : nl_(nl), seq_(static_cast<uint32_t>(time(nullptr))), rxbuf_(kInitialReceiveBytes) {}

Socket::Socket(Socket&& o) noexcept
    : nl_(std::exchange(o.nl_, nullptr)), seq_(o.seq_), rxbuf_(std::move(o.rxbuf_)) {}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    if (nl_ != nullptr) mnl_socket_close(nl_);
    nl_ = std::exchange(o.nl_, nullptr);
    seq_ = o.seq_;
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
  Socket s(nl);
  if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) return fail_errno(errno, "bind " + what);
  int one = 1;
  // Both options exist since Linux 4.12; an older kernel only loses the extended-ack text.
  if (mnl_socket_setsockopt(nl, NETLINK_EXT_ACK, &one, sizeof one) < 0 && errno != ENOPROTOOPT) {
    return fail_errno(errno, "enable NETLINK_EXT_ACK on " + what);
  }
  if (mnl_socket_setsockopt(nl, NETLINK_CAP_ACK, &one, sizeof one) < 0 && errno != ENOPROTOOPT) {
    return fail_errno(errno, "enable NETLINK_CAP_ACK on " + what);
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

Result<size_t> Socket::receive(const std::string& what) {
  for (;;) {
    // Size the buffer to the pending datagram first so large dump parts are never truncated.
    ssize_t pending = recv(fd(), nullptr, 0, MSG_PEEK | MSG_TRUNC);
    if (pending < 0) {
      if (errno == EINTR) continue;
      return fail_errno(errno, what + ": receive netlink reply");
    }
    if (static_cast<size_t>(pending) > rxbuf_.size()) {
      rxbuf_.resize((static_cast<size_t>(pending) + 4095) & ~static_cast<size_t>(4095));
    }
    ssize_t n = mnl_socket_recvfrom(nl_, rxbuf_.data(), rxbuf_.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail_errno(errno, what + ": receive netlink reply");
    }
    return static_cast<size_t>(n);
  }
}

Status Socket::exchange(Message& msg, const std::string& what,
                        const std::function<Status(const nlmsghdr*)>* on_msg, bool add_ack) {
  if (msg.overflowed()) return fail_errno(EMSGSIZE, what + ": netlink attribute larger than 64 KiB");
  nlmsghdr* nlh = msg.header();
  if (add_ack) nlh->nlmsg_flags |= NLM_F_ACK;
  if (++seq_ == 0) ++seq_;
  nlh->nlmsg_seq = seq_;
  nlh->nlmsg_pid = port_id();
  const uint32_t seq = seq_;

  ssize_t sent = mnl_socket_sendto(nl_, msg.data(), msg.size());
  if (sent < 0) return fail_errno(errno, what + ": send netlink request");
  if (static_cast<size_t>(sent) != msg.size()) return fail_errno(EMSGSIZE, what + ": short netlink send");

  Exchange ex;
  ex.on_msg = on_msg;
  ex.end_on_single = !(nlh->nlmsg_flags & NLM_F_ACK);
  mnl_cb_t ctl[NLMSG_MIN_TYPE] = {nullptr, nullptr, on_error, on_done};  // libmnl wants it non-const
  bool interrupted = false;
  while (!ex.done) {
    size_t n = PLUMB_TRY(receive(what));
    const auto* first = reinterpret_cast<const nlmsghdr*>(rxbuf_.data());
    if (n >= sizeof(nlmsghdr) && first->nlmsg_seq != 0 && first->nlmsg_seq != seq) {
      continue;  // the tail of an earlier request that failed before its end: not ours
    }
    if (interrupted) {
      ex.done = holds_end(rxbuf_.data(), n, seq);
      continue;
    }
    int rc = mnl_cb_run2(rxbuf_.data(), n, seq, port_id(), on_data, &ex, ctl, NLMSG_MIN_TYPE);
    if (rc < 0) {
      int err = errno;
      if (err == EINTR) {
        // NLM_F_DUMP_INTR: the dump saw a concurrent change. Drain it, then report EINTR.
        interrupted = true;
        ex.done = holds_end(rxbuf_.data(), n, seq);
        continue;
      }
      std::string why = err == EPROTO  ? "reply sequence number mismatch"
                        : err == ESRCH ? "reply port id mismatch"
                                       : "malformed netlink reply";
      return fail_errno(err, what + ": " + why);
    }
  }
  if (interrupted) return fail_errno(EINTR, what + ": dump interrupted by a concurrent change, retry");
  if (ex.kernel_errno != 0) return fail_errno(ex.kernel_errno, what, ex.ext_ack);
  if (ex.cb_error) return std::unexpected(*ex.cb_error);
  return {};
}

Status Socket::request(Message& msg, const std::string& what) { return exchange(msg, what, nullptr, true); }

Status Socket::query(Message& msg, const std::string& what, const std::function<Status(const nlmsghdr*)>& on_msg) {
  return exchange(msg, what, &on_msg, true);
}

Status Socket::transact(Message& msg, const std::string& what,
                        const std::function<Status(const nlmsghdr*)>& on_msg) {
  return exchange(msg, what, &on_msg, false);
}

}  // namespace plumb::netlink
