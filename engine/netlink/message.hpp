// Netlink messages for every protocol plumb speaks (rtnetlink, generic netlink, RDMA netlink,
// nfnetlink): a growable request built with libmnl's bounds-checked puts, and policy-validated
// attribute parsing of replies (libmnl's mnl_attr_validate against a table per attribute family).
#pragma once

#include <libmnl/libmnl.h>
#include <linux/netlink.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/base/ip.hpp"
#include "engine/base/result.hpp"

namespace plumb::netlink {

/// plumb's netlink buffers: growth keeps the bytes held and leaves new ones as they are, without
/// clearing them. The buffers are sized for the largest message or datagram (a batch slot and an
/// nftables request: 64 KiB; a receive buffer: 32 KiB) and only bytes written by the builders
/// (Message::put, libmnl's headers, write_over_zeroes) or by the kernel's recv are read; clearing
/// them cost a tenth of an ADD's user-space instructions and a page fault per 4 KiB never used.
template <class Byte>
class ByteBuffer {
 public:
  explicit ByteBuffer(size_t size = 0) { resize(size); }
  Byte* data() { return data_.get(); }
  const Byte* data() const { return data_.get(); }
  size_t size() const { return size_; }
  /// Grows or shrinks to `size` bytes; the first min(size, size()) keep their value. Growth
  /// beyond the capacity at least doubles it (one copy per doubling).
  void resize(size_t size) {
    if (size > capacity_) reserve(std::max(size, 2 * capacity_));
    size_ = size;
  }
  /// Makes room for `capacity` bytes without changing size().
  void reserve(size_t capacity) {
    if (capacity <= capacity_) return;
    auto grown = std::make_unique_for_overwrite<Byte[]>(capacity);
    if (size_ > 0) std::memcpy(grown.get(), data_.get(), size_);
    data_ = std::move(grown);
    capacity_ = capacity;
  }

 private:
  std::unique_ptr<Byte[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

/// A netlink message under construction, backed by a growable buffer. Puts are bounds-checked
/// (libmnl *_check); a put that does not fit grows the buffer. Nests are RAII (Nest below).
class Message {
 public:
  /// type: e.g. RTM_NEWLINK; flags: NLM_F_REQUEST is always added. seq/pid are set by Socket.
  Message(uint16_t type, uint16_t flags);

  /// Appends a fixed family header (ifinfomsg, ifaddrmsg, rtmsg, genlmsghdr, nfgenmsg, ...) and
  /// returns it (zeroed).
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

  /// For builders that write without bounds checks (libnftnl's *_nlmsg_build_*): makes room for
  /// `room` more bytes after the message and returns its header. The builder may rewrite the
  /// header, must keep nlmsg_len current and must not write more than `room` bytes past it. The
  /// room is not cleared: a builder that skips bytes runs through write_over_zeroes.
  nlmsghdr* raw(size_t room);

  /// The message header. Pointers returned by header()/put_header()/put_extra()/raw() are
  /// invalidated by any later put (the buffer may grow): fill a header before adding attributes.
  nlmsghdr* header();
  const uint8_t* data() const { return buf_.data(); }
  size_t size() const;  // nlmsg_len
  std::vector<uint8_t> bytes() const { return {buf_.data(), buf_.data() + size()}; }
  /// True when an attribute or nest exceeded the 64 KiB netlink attribute limit; Socket refuses
  /// to send such a message (EMSGSIZE).
  bool overflowed() const { return overflowed_; }

 private:
  friend class Nest;
  void reserve(size_t more);
  ByteBuffer<uint8_t> buf_;
  bool overflowed_ = false;
};

/// Runs `write(buf)`, a builder that writes one netlink message at `buf` (room for `room` bytes)
/// and skips bytes it does not set (libnftnl's builders through libmnl 1.0.4, which leaves
/// attribute padding as it finds it), so that every byte of the message is defined: the first
/// 4 KiB are cleared before it runs, and a longer message is written again over cleared bytes.
/// Clearing the whole room (64 KiB per message) cost more than the message.
void write_over_zeroes(char* buf, size_t room, const std::function<void(char* buf)>& write);

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

/// Calls f(attr) for each attribute nested in `nest`, in order (mnl_attr_for_each_nested without
/// its C casts); stops at the first error f returns.
template <class F>
Status for_each_nested(const nlattr* nest, F&& f) {
  const auto* p = static_cast<const uint8_t*>(mnl_attr_get_payload(nest));
  int len = static_cast<int>(mnl_attr_get_payload_len(nest));
  const auto* a = reinterpret_cast<const nlattr*>(p);
  while (mnl_attr_ok(a, len)) {
    PLUMB_TRY(f(a));
    len -= static_cast<int>(MNL_ALIGN(a->nla_len));
    a = mnl_attr_next(a);
  }
  return {};
}

/// Reads an address attribute (IFA_ADDRESS, RTA_GATEWAY, CTA_IP_V4_SRC, ...) of `family`
/// (AF_INET or AF_INET6): the payload must be exactly 4 or 16 bytes, in network order.
/// Errors: EINVAL naming the attribute type and both lengths.
[[nodiscard]] Result<IpAddr> read_addr(const nlattr* a, int family);

/// The kernel's verdict carried by an NLMSG_ERROR (or the errno of a dump's NLMSG_DONE).
struct KernelAnswer {
  int err = 0;       ///< positive errno; 0 = success (the ACK)
  std::string ext;   ///< extended-ack text (NLMSGERR_ATTR_MSG, missing attribute, bad offset), may be empty
};
/// Reads an NLMSG_ERROR message. A truncated one gives EBADMSG.
///
///   NLMSG_ERROR payload (NETLINK_CAP_ACK sets NLM_F_CAPPED: the echoed request is its header only;
///   NETLINK_EXT_ACK sets NLM_F_ACK_TLVS: NLMSGERR_ATTR_* attributes follow):
///   +-----------+-----------------------+-------------------+----------------------+
///   | s32 error | nlmsghdr of request   | [request payload] | [NLMSGERR_ATTR_* ...] |
///   +-----------+-----------------------+-------------------+----------------------+
[[nodiscard]] KernelAnswer read_error(const nlmsghdr* nlh);
/// Reads an NLMSG_DONE message: `s32 error` then, with NLM_F_ACK_TLVS, NLMSGERR_ATTR_* attributes.
[[nodiscard]] KernelAnswer read_done(const nlmsghdr* nlh);

}  // namespace plumb::netlink
