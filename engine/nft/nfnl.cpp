#include "engine/nft/nfnl.hpp"

#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sys/socket.h>

#include <libnftnl/rule.h>
#include <libnftnl/udata.h>
#include <libnftnl/common.h>

#include <cerrno>
#include <ctime>
#include <new>

namespace plumb::nft::nfnl {
namespace {

constexpr int kAckTimeoutMs = 5000;
constexpr size_t kRecvBuf = 64 * 1024;

// NLMSG_ERROR payload: struct nlmsgerr, then (NLM_F_ACK_TLVS) attributes. With NETLINK_CAP_ACK
// (NLM_F_CAPPED) the echoed request is only its header.
//   +-----------+----------------------+-----------------------------+
//   | int error | nlmsghdr of request  | [request payload] | TLVs... |
//   +-----------+----------------------+-----------------------------+
struct ExtAck {
  std::string msg;
  bool has_offset = false;
  uint32_t offset = 0;
};

int ext_attr_cb(const nlattr* attr, void* data) {
  auto* ext = static_cast<ExtAck*>(data);
  switch (mnl_attr_get_type(attr)) {
    case NLMSGERR_ATTR_MSG:
      if (mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) >= 0) ext->msg = mnl_attr_get_str(attr);
      break;
    case NLMSGERR_ATTR_OFFS:
      if (mnl_attr_validate(attr, MNL_TYPE_U32) >= 0) {
        ext->has_offset = true;
        ext->offset = mnl_attr_get_u32(attr);
      }
      break;
    default:
      break;
  }
  return MNL_CB_OK;
}

// Returns the errno (positive) of an NLMSG_ERROR and its extended-ack text; EPROTO if truncated.
int parse_error(const nlmsghdr* nlh, std::string& text) {
  if (nlh->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) {
    text = "truncated NLMSG_ERROR";
    return EPROTO;
  }
  const auto* e = static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(nlh));
  if ((nlh->nlmsg_flags & NLM_F_ACK_TLVS) != 0) {
    size_t off = sizeof(nlmsgerr);
    if ((nlh->nlmsg_flags & NLM_F_CAPPED) == 0 && e->msg.nlmsg_len >= sizeof(nlmsghdr)) {
      off += e->msg.nlmsg_len - sizeof(nlmsghdr);
    }
    if (NLMSG_LENGTH(off) <= nlh->nlmsg_len) {
      ExtAck ext;
      mnl_attr_parse(nlh, static_cast<unsigned>(off), ext_attr_cb, &ext);
      text = ext.msg;
      if (ext.has_offset && e->error != 0) {
        if (!text.empty()) text += ", ";
        text += "bad attribute at offset " + std::to_string(ext.offset);
      }
    }
  }
  return e->error < 0 ? -e->error : e->error;
}

}  // namespace

// ---- Batch ---------------------------------------------------------------------------------

Batch::Batch(uint32_t first_seq, size_t limit) : first_seq_(first_seq), buf_(2 * limit) {
  // mnl_nlmsg_batch writes a message before checking it fits: the buffer is twice the limit,
  // and no single message comes close to `limit`.
  batch_ = mnl_nlmsg_batch_start(buf_.data(), limit);
  if (batch_ == nullptr) throw std::bad_alloc();
  nftnl_batch_begin(static_cast<char*>(mnl_nlmsg_batch_current(batch_)), first_seq_);
  mnl_nlmsg_batch_next(batch_);
}

Batch::~Batch() { mnl_nlmsg_batch_stop(batch_); }

nlmsghdr* Batch::begin_message(uint16_t type, uint16_t flags, std::string what, std::string feature) {
  uint32_t seq = seq_of(what_.size());
  what_.push_back(std::move(what));
  feature_.push_back(std::move(feature));
  return nftnl_nlmsg_build_hdr(static_cast<char*>(mnl_nlmsg_batch_current(batch_)), type, obj::kFamily,
                               static_cast<uint16_t>(flags | NLM_F_ACK), seq);
}

void Batch::end_message() {
  if (!mnl_nlmsg_batch_next(batch_)) overflow_ = true;
}

size_t Batch::add_table(uint16_t type, uint16_t flags, const nftnl_table* t, std::string what, std::string feature) {
  nlmsghdr* nlh = begin_message(type, flags, std::move(what), std::move(feature));
  nftnl_table_nlmsg_build_payload(nlh, t);
  end_message();
  return count() - 1;
}

size_t Batch::add_chain(uint16_t type, uint16_t flags, const nftnl_chain* c, std::string what, std::string feature) {
  nlmsghdr* nlh = begin_message(type, flags, std::move(what), std::move(feature));
  nftnl_chain_nlmsg_build_payload(nlh, c);
  end_message();
  return count() - 1;
}

size_t Batch::add_rule(uint16_t type, uint16_t flags, nftnl_rule* r, std::string what, std::string feature) {
  nlmsghdr* nlh = begin_message(type, flags, std::move(what), std::move(feature));
  nftnl_rule_nlmsg_build_payload(nlh, r);
  end_message();
  return count() - 1;
}

size_t Batch::add_set(uint16_t type, uint16_t flags, nftnl_set* s, std::string what, std::string feature) {
  nlmsghdr* nlh = begin_message(type, flags, std::move(what), std::move(feature));
  nftnl_set_nlmsg_build_payload(nlh, s);
  end_message();
  return count() - 1;
}

size_t Batch::add_elems(uint16_t type, uint16_t flags, nftnl_set* s, std::string what, std::string feature) {
  nlmsghdr* nlh = begin_message(type, flags, std::move(what), std::move(feature));
  nftnl_set_elems_nlmsg_build_payload(nlh, s);
  end_message();
  return count() - 1;
}

Status Batch::finish() {
  if (!finished_) {
    nftnl_batch_end(static_cast<char*>(mnl_nlmsg_batch_current(batch_)), end_seq());
    end_message();
    finished_ = true;
  }
  if (overflow_) {
    return fail(cni_code::kInternal, "nftables batch of " + std::to_string(count()) + " messages exceeds " +
                                         std::to_string(buf_.size() / 2) + " bytes");
  }
  return {};
}

const void* Batch::data() const { return mnl_nlmsg_batch_head(batch_); }
size_t Batch::size() const { return mnl_nlmsg_batch_size(batch_); }

// ---- Outcome -------------------------------------------------------------------------------

bool Outcome::ok() const {
  if (batch_err != 0) return false;
  for (const Ack& a : acks) {
    if (!a.seen || a.err != 0) return false;
  }
  return true;
}

Error to_error(const Batch& b, const Outcome& out) {
  for (size_t i = 0; i < out.acks.size(); ++i) {
    const Ack& a = out.acks[i];
    if (!a.seen || a.err == 0) continue;
    // A missing chain type or expression is ENOENT once module autoloading failed. EOPNOTSUPP
    // here is a conflict (e.g. a foreign regular chain where a base chain goes), not a feature.
    if (!b.feature(i).empty() && a.err == ENOENT) {
      return Error{cni_code::kKernelFeature, a.err, "nftables: " + b.what(i) + ": " + b.feature(i), a.ext};
    }
    return Error{cni_code::kKernel, a.err, "nftables: " + b.what(i), a.ext};
  }
  if (out.batch_err == EOPNOTSUPP) {
    return Error{cni_code::kKernelFeature, out.batch_err,
                 "nftables: the kernel has no nf_tables support (CONFIG_NF_TABLES)", out.batch_ext};
  }
  if (out.batch_err != 0) {
    return Error{cni_code::kKernel, out.batch_err, "nftables: commit transaction of " + b.what(0), out.batch_ext};
  }
  return Error{cni_code::kInternal, 0, "nftables: no ack for " + b.what(0) + " and following", {}};
}

// ---- Session -------------------------------------------------------------------------------

Session::Session(mnl_socket* nl) : nl_(nl), seq_(static_cast<uint32_t>(time(nullptr))) {}

Session::Session(Session&& o) noexcept : nl_(o.nl_), seq_(o.seq_) { o.nl_ = nullptr; }

Session& Session::operator=(Session&& o) noexcept {
  if (this != &o) {
    if (nl_ != nullptr) mnl_socket_close(nl_);
    nl_ = o.nl_;
    seq_ = o.seq_;
    o.nl_ = nullptr;
  }
  return *this;
}

Session::~Session() {
  if (nl_ != nullptr) mnl_socket_close(nl_);
}

Result<Session> Session::open() {
  mnl_socket* nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
  if (nl == nullptr) {
    int err = errno;
    if (err == EPROTONOSUPPORT || err == EAFNOSUPPORT) {
      return std::unexpected(Error{cni_code::kKernelFeature, err,
                                   "nftables: the kernel has no nfnetlink (CONFIG_NETFILTER_NETLINK)", {}});
    }
    return fail_errno(err, "nftables: open NETLINK_NETFILTER socket");
  }
  Session s(nl);
  if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) return fail_errno(errno, "nftables: bind netlink socket");
  int one = 1;
  // Both options exist since Linux 4.12/4.3; an older kernel only loses the error text.
  (void)mnl_socket_setsockopt(nl, NETLINK_EXT_ACK, &one, sizeof one);
  (void)mnl_socket_setsockopt(nl, NETLINK_CAP_ACK, &one, sizeof one);
  return s;
}

std::unique_ptr<Batch> Session::batch() {
  // Leave room for BEGIN, up to 4096 messages and END before the next batch's numbers.
  uint32_t first = seq_;
  seq_ += 4100;
  return std::make_unique<Batch>(first);
}

Result<Outcome> Session::send(const Batch& b) {
  const std::string what = b.count() > 0 ? b.what(0) : std::string("empty batch");
  ssize_t n = mnl_socket_sendto(nl_, b.data(), b.size());
  if (n < 0) return fail_errno(errno, "nftables: send batch (" + what + ")");
  if (static_cast<size_t>(n) != b.size()) return fail_errno(EMSGSIZE, "nftables: short send of batch (" + what + ")");

  Outcome out;
  out.acks.resize(b.count());
  size_t pending = b.count();
  const uint32_t portid = mnl_socket_get_portid(nl_);
  std::vector<char> buf(kRecvBuf);
  // The kernel handles the batch inside sendmsg(), so every reply is queued by now; the poll
  // timeout only guards against a kernel that never answers. After a batch-level error the
  // remaining acks may or may not follow: take what is queued, then stop.
  while (pending > 0) {
    pollfd p{mnl_socket_get_fd(nl_), POLLIN, 0};
    int r = poll(&p, 1, out.batch_err != 0 ? 0 : kAckTimeoutMs);
    if (r < 0) {
      if (errno == EINTR) continue;
      return fail_errno(errno, "nftables: wait for acks (" + what + ")");
    }
    if (r == 0) {
      if (out.batch_err != 0) break;
      return fail_errno(ETIMEDOUT, "nftables: " + std::to_string(pending) + " acks missing (" + what + ")");
    }
    ssize_t len = recv(mnl_socket_get_fd(nl_), buf.data(), buf.size(), MSG_TRUNC);
    if (len < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return fail_errno(errno, "nftables: receive acks (" + what + ")");
    }
    if (static_cast<size_t>(len) > buf.size()) {
      return fail_errno(EMSGSIZE, "nftables: reply larger than " + std::to_string(buf.size()) + " bytes (" + what + ")");
    }
    int rest = static_cast<int>(len);
    for (const auto* nlh = reinterpret_cast<const nlmsghdr*>(buf.data()); mnl_nlmsg_ok(nlh, rest);
         nlh = mnl_nlmsg_next(nlh, &rest)) {
      if (nlh->nlmsg_pid != portid) {
        return fail_errno(EPROTO, "nftables: reply for port id " + std::to_string(nlh->nlmsg_pid) + ", ours is " +
                                      std::to_string(portid) + " (" + what + ")");
      }
      if (nlh->nlmsg_type != NLMSG_ERROR) continue;  // NOOP/DONE/notifications carry no verdict
      const uint32_t seq = nlh->nlmsg_seq;
      if (seq == b.first_seq()) {
        out.batch_err = parse_error(nlh, out.batch_ext);
        if (out.batch_err == 0) out.batch_err = EPROTO;  // BEGIN is never acked on success
        continue;
      }
      if (seq <= b.first_seq() || seq >= b.end_seq()) continue;  // a stale reply of an earlier batch
      Ack& a = out.acks[seq - b.first_seq() - 1];
      if (a.seen) continue;
      a.seen = true;
      a.err = parse_error(nlh, a.ext);
      --pending;
    }
  }
  return out;
}

Result<std::optional<std::string>> Session::first_rule_comment(const std::string& table, const std::string& chain) {
  const std::string what = "nftables: list chain inet " + table + " " + chain;
  std::vector<char> buf(kRecvBuf);
  const uint32_t seq = seq_++;
  nlmsghdr* nlh = nftnl_nlmsg_build_hdr(buf.data(), NFT_MSG_GETRULE, NFPROTO_INET, NLM_F_DUMP, seq);
  nftnl_rule* filter = nftnl_rule_alloc();
  if (filter == nullptr) return fail_errno(ENOMEM, what);
  nftnl_rule_set_str(filter, NFTNL_RULE_TABLE, table.c_str());
  nftnl_rule_set_str(filter, NFTNL_RULE_CHAIN, chain.c_str());
  nftnl_rule_nlmsg_build_payload(nlh, filter);
  nftnl_rule_free(filter);
  if (mnl_socket_sendto(nl_, nlh, nlh->nlmsg_len) < 0) return fail_errno(errno, what);

  struct Reply {
    bool first_seen = false;
    std::string comment;
  } reply;
  auto on_data = [](const nlmsghdr* m, void* data) -> int {
    auto* r = static_cast<Reply*>(data);
    if (r->first_seen) return MNL_CB_OK;  // drain the rest of the dump
    nftnl_rule* rule = nftnl_rule_alloc();
    if (rule == nullptr) return MNL_CB_ERROR;
    if (nftnl_rule_nlmsg_parse(m, rule) == 0) {
      r->first_seen = true;
      uint32_t len = 0;
      const void* ud = nftnl_rule_is_set(rule, NFTNL_RULE_USERDATA) ? nftnl_rule_get_data(rule, NFTNL_RULE_USERDATA, &len) : nullptr;
      if (ud != nullptr) {
        auto cb = [](const nftnl_udata* attr, void* out) -> int {
          if (nftnl_udata_type(attr) != NFTNL_UDATA_RULE_COMMENT) return 0;
          const char* text = static_cast<const char*>(nftnl_udata_get(attr));
          uint8_t n = nftnl_udata_len(attr);
          while (n > 0 && text[n - 1] == '\0') --n;
          static_cast<std::string*>(out)->assign(text, n);
          return 0;
        };
        nftnl_udata_parse(ud, len, cb, &r->comment);
      }
    }
    nftnl_rule_free(rule);
    return MNL_CB_OK;
  };
  const uint32_t portid = mnl_socket_get_portid(nl_);
  for (;;) {
    ssize_t n = mnl_socket_recvfrom(nl_, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail_errno(errno, what);
    }
    int rc = mnl_cb_run(buf.data(), static_cast<size_t>(n), seq, portid, on_data, &reply);
    if (rc == MNL_CB_STOP) break;  // NLMSG_DONE
    if (rc < 0) {
      if (errno == ENOENT) return std::optional<std::string>{};
      return fail_errno(errno, what);
    }
  }
  return std::optional<std::string>(reply.comment);
}

}  // namespace plumb::nft::nfnl
