#include "engine/netlink/message.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace plumb::netlink {
namespace {

constexpr size_t kInitialMessageBytes = 4096;
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

/// The extended-ack attributes (NLMSGERR_ATTR_*) at `payload_offset` of an NLMSG_ERROR or
/// NLMSG_DONE payload, as one line of text.
std::string ext_ack_text(const nlmsghdr* nlh, size_t payload_offset, bool failed) {
  if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS)) return {};
  size_t payload_len = mnl_nlmsg_get_payload_len(nlh);
  size_t off = MNL_ALIGN(payload_offset);
  if (off >= payload_len) return {};
  const auto* start = static_cast<const uint8_t*>(mnl_nlmsg_get_payload(nlh)) + off;
  static const std::vector<AttrPolicy> kPolicy = {
      {NLMSGERR_ATTR_MSG, MNL_TYPE_NUL_STRING},
      {NLMSGERR_ATTR_OFFS, MNL_TYPE_U32},
      {NLMSGERR_ATTR_MISS_TYPE, MNL_TYPE_U32},
  };
  auto tb = parse_region(start, payload_len - off, NLMSGERR_ATTR_MAX, kPolicy, "extended ack");
  if (!tb) return {};  // the errno alone still reports the failure
  std::string text;
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : "; ") + part; };
  if (const nlattr* a = (*tb)[NLMSGERR_ATTR_MSG]) add(mnl_attr_get_str(a));
  if (const nlattr* a = (*tb)[NLMSGERR_ATTR_MISS_TYPE]) add("missing attribute type " + std::to_string(mnl_attr_get_u32(a)));
  if (const nlattr* a = (*tb)[NLMSGERR_ATTR_OFFS]; a != nullptr && failed) {
    add("bad attribute at offset " + std::to_string(mnl_attr_get_u32(a)));
  }
  return text;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Message

Message::Message(uint16_t type, uint16_t flags) : buf_(kInitialMessageBytes) {
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf_.data());
  nlh->nlmsg_type = type;
  nlh->nlmsg_flags = static_cast<uint16_t>(NLM_F_REQUEST | flags);
}

nlmsghdr* Message::header() { return reinterpret_cast<nlmsghdr*>(buf_.data()); }

size_t Message::size() const { return reinterpret_cast<const nlmsghdr*>(buf_.data())->nlmsg_len; }

void Message::reserve(size_t more) {
  size_t need = size() + more;
  if (need <= buf_.size()) return;
  buf_.resize(std::max(need, buf_.size() * 2));
}

nlmsghdr* Message::raw(size_t room) {
  reserve(room);
  return header();
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
  const size_t at = size();  // where the attribute starts
  if (!mnl_attr_put_check(header(), buf_.size(), type, len, data)) {
    reserve(MNL_ATTR_HDRLEN + MNL_ALIGN(len));
    mnl_attr_put(header(), type, len, data);
  }
  // libmnl 1.0.4 leaves the padding after the payload as it finds it; the buffer is not cleared.
  if (const size_t pad = MNL_ALIGN(len) - len; pad > 0) std::memset(buf_.data() + at + MNL_ATTR_HDRLEN + len, 0, pad);
}

void write_over_zeroes(char* buf, size_t room, const std::function<void(char* buf)>& write) {
  constexpr size_t kClearedAhead = 4096;
  const size_t cleared = std::min(room, kClearedAhead);
  std::memset(buf, 0, cleared);
  write(buf);
  const uint32_t len = reinterpret_cast<const nlmsghdr*>(buf)->nlmsg_len;
  if (len > cleared && len <= room) {
    std::memset(buf, 0, len);
    write(buf);
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

Result<IpAddr> read_addr(const nlattr* a, int family) {
  IpAddr ip;
  ip.family = family;
  const size_t want = family == AF_INET ? 4 : 16;
  if (mnl_attr_get_payload_len(a) != want) {
    return fail_errno(EINVAL, "parse address attribute type " + std::to_string(mnl_attr_get_type(a)) + ": " +
                                  std::to_string(mnl_attr_get_payload_len(a)) + " bytes for a " +
                                  std::to_string(want) + "-byte address");
  }
  std::memcpy(ip.bytes.data(), mnl_attr_get_payload(a), want);
  return ip;
}

// ---------------------------------------------------------------------------------------------
// Kernel answers

KernelAnswer read_error(const nlmsghdr* nlh) {
  if (mnl_nlmsg_get_payload_len(nlh) < sizeof(nlmsgerr)) return {EBADMSG, "truncated NLMSG_ERROR"};
  const auto* e = static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(nlh));
  KernelAnswer a;
  a.err = e->error < 0 ? -e->error : e->error;
  size_t off = sizeof(nlmsgerr);
  if (!(nlh->nlmsg_flags & NLM_F_CAPPED) && e->msg.nlmsg_len > sizeof(nlmsghdr)) {
    off += e->msg.nlmsg_len - sizeof(nlmsghdr);  // the echoed request payload
  }
  a.ext = ext_ack_text(nlh, off, a.err != 0);
  return a;
}

KernelAnswer read_done(const nlmsghdr* nlh) {
  KernelAnswer a;
  if (mnl_nlmsg_get_payload_len(nlh) < sizeof(int32_t)) return a;  // a DONE without payload: success
  const int32_t err = *static_cast<const int32_t*>(mnl_nlmsg_get_payload(nlh));
  if (err >= 0) return a;
  a.err = -err;
  a.ext = ext_ack_text(nlh, sizeof(int32_t), true);
  return a;
}

}  // namespace plumb::netlink
