// A rtnetlink (or other protocol) socket bound to the network namespace it was opened in.
// One Socket per namespace per process; every request carries a fresh sequence number, replies
// are checked for sequence and port id, changes are sent with NLM_F_ACK, and errors carry the
// kernel's extended-ack text (NETLINK_EXT_ACK). Receive buffers grow (MSG_PEEK|MSG_TRUNC) so
// dumps and replies larger than 8 KiB are handled.
#pragma once

#include <libmnl/libmnl.h>
#include <linux/netlink.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/base/result.hpp"

namespace plumb::netlink {

/// A netlink message under construction, backed by a growable buffer. Puts are bounds-checked
/// (libmnl *_check); a put that does not fit grows the buffer. Nests are RAII (Nest below).
class Message {
 public:
  /// type: e.g. RTM_NEWLINK; flags: NLM_F_REQUEST is always added. seq/pid are set by Socket.
  Message(uint16_t type, uint16_t flags);

  /// Appends a fixed family header (ifinfomsg, ifaddrmsg, rtmsg, genlmsghdr, ...) and returns it.
  template <class T>
  T* put_header() {
    return static_cast<T*>(put_extra(sizeof(T)));
  }
  void* put_extra(size_t len);

  void put_u8(uint16_t type, uint8_t v);
  void put_u16(uint16_t type, uint16_t v);
  void put_u32(uint16_t type, uint32_t v);
  void put_u64(uint16_t type, uint64_t v);
  void put_str(uint16_t type, const std::string& v);  // NUL-terminated (mnl_attr_put_strz)
  void put(uint16_t type, const void* data, size_t len);
  void put_flag(uint16_t type);

  /// RAII nested attribute: opened on construction, closed (length fixed up) on destruction.
  class Nest {
   public:
    Nest(Message& m, uint16_t type);
    ~Nest();
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    Message& m_;
    size_t offset_;
  };

  /// The message header. Pointers returned by header()/put_header()/put_extra() are invalidated
  /// by any later put (the buffer may grow): fill a header before adding attributes.
  nlmsghdr* header();
  const uint8_t* data() const { return buf_.data(); }
  size_t size() const;  // nlmsg_len
  std::vector<uint8_t> bytes() const { return {buf_.begin(), buf_.begin() + static_cast<long>(size())}; }
  /// True when an attribute or nest exceeded the 64 KiB netlink attribute limit; Socket refuses
  /// to send such a message (EMSGSIZE).
  bool overflowed() const { return overflowed_; }

 private:
  friend class Nest;
  void reserve(size_t more);
  std::vector<uint8_t> buf_;
  bool overflowed_ = false;
};

/// Attribute table: attrs[type] is nullptr when absent. Filled by parse_attrs after validating
/// each attribute's type against a policy (MNL_TYPE_*) — never read an attribute that was not
/// validated.
struct AttrPolicy {
  uint16_t type;
  mnl_attr_data_type kind;  // MNL_TYPE_U8, MNL_TYPE_U32, MNL_TYPE_NUL_STRING, MNL_TYPE_NESTED ...
  size_t min_len = 0;       // for MNL_TYPE_BINARY: minimal payload length (fixed-width integer
                            // types must match their size exactly, as mnl_attr_validate checks)
};
using AttrTable = std::vector<const nlattr*>;

/// Parses the attributes following a family header of `header_len` bytes in `nlh`, validating
/// each attribute listed in `policy` (unknown types are skipped). max_type sizes the table.
/// Errors: EINVAL/ERANGE naming the attribute type that failed validation.
[[nodiscard]] Result<AttrTable> parse_attrs(const nlmsghdr* nlh, size_t header_len, uint16_t max_type,
                                            const std::vector<AttrPolicy>& policy);
/// Same for the payload of a nested attribute.
[[nodiscard]] Result<AttrTable> parse_nested(const nlattr* nest, uint16_t max_type,
                                             const std::vector<AttrPolicy>& policy);

/// A netlink socket. Not copyable; movable. Opened in the calling thread's current netns and
/// stays bound to it for its lifetime.
class Socket {
 public:
  /// Opens a socket of `protocol` (NETLINK_ROUTE by default) with SOCK_CLOEXEC, binds it,
  /// enables NETLINK_EXT_ACK and NETLINK_CAP_ACK. Errors: errno from socket/bind.
  [[nodiscard]] static Result<Socket> open(int protocol = NETLINK_ROUTE);
  /// Opens a socket inside the namespace open at `netns_fd` (enters it with a netns::Guard for
  /// the socket() call only; the socket stays bound to that namespace).
  [[nodiscard]] static Result<Socket> open_in(int netns_fd, int protocol = NETLINK_ROUTE);

  Socket(Socket&&) noexcept;
  Socket& operator=(Socket&&) noexcept;
  ~Socket();

  /// Sends a change request (NLM_F_ACK is added) and waits for the kernel's ACK.
  /// `what` describes the operation for the error message. Errors: the kernel's errno with
  /// its extended-ack text in Error::details.
  [[nodiscard]] Status request(Message& msg, const std::string& what);

  /// Sends a request expecting reply messages (a GET, or NLM_F_DUMP); calls on_msg for each data
  /// message of the reply, until NLMSG_DONE (dumps) or the single reply + ACK. A callback error
  /// stops processing and is returned (the rest of the reply is drained).
  [[nodiscard]] Status query(Message& msg, const std::string& what,
                             const std::function<Status(const nlmsghdr*)>& on_msg);

  /// Sends raw bytes already containing a complete request (used by generic-netlink and tests);
  /// handles the reply like query(). Exposed for layers built on this socket (nftables batches).
  /// Unlike request()/query() the flags are sent as built (NLM_F_ACK is not added; seq and pid are
  /// still set): the reply ends at NLMSG_DONE, NLMSG_ERROR, or - without NLM_F_ACK - at the first
  /// reply message lacking NLM_F_MULTI. A request that elicits no reply at all would block.
  [[nodiscard]] Status transact(Message& msg, const std::string& what,
                                const std::function<Status(const nlmsghdr*)>& on_msg);

  uint32_t port_id() const;
  int fd() const;

 private:
  explicit Socket(mnl_socket* nl);
  Status exchange(Message& msg, const std::string& what, const std::function<Status(const nlmsghdr*)>* on_msg,
                  bool add_ack);
  Result<size_t> receive(const std::string& what);
  mnl_socket* nl_ = nullptr;
  uint32_t seq_ = 0;
  std::vector<uint8_t> rxbuf_;
};

}  // namespace plumb::netlink
