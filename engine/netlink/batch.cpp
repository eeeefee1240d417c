#include "engine/netlink/batch.hpp"

#include <arpa/inet.h>
#include <linux/netfilter/nfnetlink.h>

#include <cstring>

namespace plumb::netlink {

Batch::Batch(uint16_t res_id, uint32_t first_seq, size_t limit)
    // Sized for the BATCH_BEGIN message up front: growing an empty vector in slot() here makes
    // GCC 12 at -O3 report a false -Warray-bounds in the inlined relocation.
    : res_id_(res_id), first_seq_(first_seq), limit_(limit),
      buf_(MNL_NLMSG_HDRLEN + MNL_ALIGN(sizeof(nfgenmsg))) {
  // A batch holds at most limit bytes (finish() refuses more) plus the message being written
  // (room for limit bytes): one allocation, whose pages are touched only as far as it is written.
  buf_.reserve(2 * limit_);
  put_control(NFNL_MSG_BATCH_BEGIN, first_seq_);
}

char* Batch::slot(size_t room) {
  if (buf_.size() < used_ + room) buf_.resize(used_ + room);
  std::memset(buf_.data() + used_, 0, MNL_NLMSG_HDRLEN);  // builders write everything after it
  return buf_.data() + used_;
}

size_t Batch::commit() {
  const auto* nlh = reinterpret_cast<const nlmsghdr*>(buf_.data() + used_);
  used_ += MNL_ALIGN(nlh->nlmsg_len);
  return used_;
}

void Batch::put_control(uint16_t type, uint32_t seq) {
  nlmsghdr* nlh = mnl_nlmsg_put_header(slot(MNL_NLMSG_HDRLEN + MNL_ALIGN(sizeof(nfgenmsg))));
  nlh->nlmsg_type = type;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  nlh->nlmsg_seq = seq;
  auto* nfg = static_cast<nfgenmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(nfgenmsg)));
  nfg->nfgen_family = AF_UNSPEC;
  nfg->version = NFNETLINK_V0;
  nfg->res_id = htons(res_id_);
  commit();
}

size_t Batch::add(const Message& m) {
  if (m.size() > limit_ || m.overflowed()) {
    malformed_ = true;
    return count_++;
  }
  return add_raw([&](char* buf, uint32_t) { std::memcpy(buf, m.data(), m.size()); });
}

size_t Batch::add_raw(const std::function<void(char* buf, uint32_t seq)>& write) {
  const uint32_t seq = seq_of(count_);
  char* buf = slot(limit_);
  write_over_zeroes(buf, limit_, [&](char* b) { write(b, seq); });
  auto* nlh = reinterpret_cast<nlmsghdr*>(buf);
  if (nlh->nlmsg_len < MNL_NLMSG_HDRLEN || nlh->nlmsg_len > limit_) {
    malformed_ = true;  // nothing of it is kept
    return count_++;
  }
  nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
  nlh->nlmsg_seq = seq;
  nlh->nlmsg_pid = 0;
  commit();
  return count_++;
}

Status Batch::finish() {
  if (!finished_) {
    put_control(NFNL_MSG_BATCH_END, end_seq());
    finished_ = true;
  }
  if (malformed_) {
    return fail(cni_code::kInternal, "nfnetlink batch: a message is larger than the batch limit of " +
                                         std::to_string(limit_) + " bytes or malformed");
  }
  if (used_ > limit_) {
    return fail(cni_code::kInternal, "nfnetlink batch of " + std::to_string(count_) + " messages (" +
                                         std::to_string(used_) + " bytes) exceeds " + std::to_string(limit_) + " bytes");
  }
  return {};
}

bool BatchOutcome::ok() const {
  if (batch_err != 0) return false;
  for (const Ack& a : acks) {
    if (!a.seen || a.err != 0) return false;
  }
  return true;
}

}  // namespace plumb::netlink
