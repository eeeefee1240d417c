#include "engine/kernel/tc.hpp"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cerrno>

namespace plumb::tc {
namespace {

using netlink::AttrPolicy;
using netlink::Message;

const std::vector<AttrPolicy> kTcPolicy = {
    {TCA_KIND, MNL_TYPE_NUL_STRING},
    {TCA_OPTIONS, MNL_TYPE_NESTED},
};
const std::vector<AttrPolicy> kBpfPolicy = {
    {TCA_BPF_NAME, MNL_TYPE_NUL_STRING},
    {TCA_BPF_ID, MNL_TYPE_U32},
    {TCA_BPF_FLAGS, MNL_TYPE_U32},
    {TCA_BPF_CLASSID, MNL_TYPE_U32},
};

uint32_t hook_parent(Hook h) {
  return TC_H_MAKE(TC_H_CLSACT, h == Hook::Ingress ? TC_H_MIN_INGRESS : TC_H_MIN_EGRESS);
}

uint32_t filter_info() { return TC_H_MAKE(static_cast<uint32_t>(kFilterPrio) << 16, htons(ETH_P_ALL)); }

tcmsg* put_tcmsg(Message& m, int ifindex, uint32_t parent, uint32_t handle, uint32_t info) {
  auto* t = m.put_header<tcmsg>();
  t->tcm_family = AF_UNSPEC;
  t->tcm_ifindex = ifindex;
  t->tcm_parent = parent;
  t->tcm_handle = handle;
  t->tcm_info = info;
  return t;
}

std::string on(int ifindex) { return " on ifindex " + std::to_string(ifindex); }

/// Marks errors that mean "this kernel lacks the qdisc/classifier" with kKernelFeature.
Status feature(Status st) {
  if (st) return st;
  Error e = st.error();
  if (e.sys_errno == ENOENT || e.sys_errno == EOPNOTSUPP) e.cni_code = cni_code::kKernelFeature;
  return std::unexpected(e);
}

/// The kind of the qdisc of `ifindex` attached at `parent` (TC_H_ROOT, TC_H_INGRESS = clsact's
/// parent), "" when none (or a built-in one, noqueue: neither a dump nor a get reports those).
/// One RTM_GETQDISC for that qdisc, not a dump: the kernel does not filter qdisc dumps by
/// device, so a dump walks every device of the node (1,000 pods: a third of a DEL's CPU). The
/// kernel answers a get as a notification to RTNLGRP_TC, and to the asker only with NLM_F_ECHO.
Result<std::string> qdisc_kind(netlink::Socket& nl, int ifindex, uint32_t parent, const std::string& what) {
  Message m(RTM_GETQDISC, NLM_F_ECHO);
  put_tcmsg(m, ifindex, parent, 0, 0);
  std::string kind;
  auto st = nl.query(m, what, [&](const nlmsghdr* nlh) -> Status {
    if (nlh->nlmsg_type != RTM_NEWQDISC) return {};
    const auto* t = static_cast<const tcmsg*>(mnl_nlmsg_get_payload(nlh));
    if (t->tcm_ifindex != ifindex || t->tcm_parent != parent) return {};
    auto tb = PLUMB_TRY(netlink::parse_attrs(nlh, sizeof(tcmsg), TCA_MAX, kTcPolicy));
    if (tb[TCA_KIND]) kind = mnl_attr_get_str(tb[TCA_KIND]);
    return {};
  });
  // ENOENT: no qdisc there; EINVAL: a built-in one (nothing to report); ENODEV: no such device.
  if (!st && st.error().sys_errno != ENOENT && st.error().sys_errno != EINVAL && st.error().sys_errno != ENODEV) {
    return std::unexpected(st.error());
  }
  return kind;
}

}  // namespace

const char* hook_name(Hook h) { return h == Hook::Ingress ? "ingress" : "egress"; }

Message build_add_clsact(int ifindex) {
  Message m(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_EXCL);
  put_tcmsg(m, ifindex, TC_H_CLSACT, TC_H_MAKE(TC_H_CLSACT, 0), 0);
  m.put_str(TCA_KIND, "clsact");
  return m;
}

//   tcmsg{ifindex, parent ffff:fff2|fff3, handle 1, info prio<<16 | htons(ETH_P_ALL)}
//   TCA_KIND "bpf"
//   TCA_OPTIONS { TCA_BPF_FD prog_fd | TCA_BPF_NAME name | TCA_BPF_FLAGS ACT_DIRECT | [TCA_BPF_CLASSID] }
Message build_attach(int ifindex, Hook h, int prog_fd, const std::string& name, uint32_t classid) {
  Message m(RTM_NEWTFILTER, NLM_F_CREATE);
  put_tcmsg(m, ifindex, hook_parent(h), kFilterHandle, filter_info());
  m.put_str(TCA_KIND, "bpf");
  {
    Message::Nest opts(m, TCA_OPTIONS);
    m.put_u32(TCA_BPF_FD, static_cast<uint32_t>(prog_fd));
    m.put_str(TCA_BPF_NAME, name);
    m.put_u32(TCA_BPF_FLAGS, TCA_BPF_FLAG_ACT_DIRECT);
    if (classid != 0) m.put_u32(TCA_BPF_CLASSID, classid);
  }
  return m;
}

Message build_detach(int ifindex, Hook h) {
  Message m(RTM_DELTFILTER, 0);
  put_tcmsg(m, ifindex, hook_parent(h), kFilterHandle, filter_info());
  m.put_str(TCA_KIND, "bpf");
  return m;
}

Result<std::string> ingress_qdisc(netlink::Socket& nl, int ifindex) {
  return qdisc_kind(nl, ifindex, TC_H_INGRESS, "find the clsact qdisc" + on(ifindex));
}

Status add_clsact(netlink::Socket& nl, int ifindex) {
  Message m = build_add_clsact(ifindex);
  return feature(nl.request(m, "add clsact qdisc" + on(ifindex)));
}

Result<bool> del_clsact(netlink::Socket& nl, int ifindex) {
  Message m(RTM_DELQDISC, 0);
  put_tcmsg(m, ifindex, TC_H_CLSACT, TC_H_MAKE(TC_H_CLSACT, 0), 0);
  m.put_str(TCA_KIND, "clsact");
  auto st = nl.request(m, "delete clsact qdisc" + on(ifindex));
  if (!st) {
    int e = st.error().sys_errno;
    if (e == ENOENT || e == ENODEV || e == EINVAL) return false;
    return std::unexpected(st.error());
  }
  return true;
}

Status attach(netlink::Socket& nl, int ifindex, Hook h, int prog_fd, const std::string& name, uint32_t classid) {
  Message m = build_attach(ifindex, h, prog_fd, name, classid);
  return feature(nl.request(m, std::string("attach bpf filter ") + name + " at " + hook_name(h) + on(ifindex)));
}

Result<bool> detach(netlink::Socket& nl, int ifindex, Hook h) {
  if (PLUMB_TRY(ingress_qdisc(nl, ifindex)) != "clsact") return false;
  Message m = build_detach(ifindex, h);
  auto st = nl.request(m, std::string("detach bpf filter at ") + hook_name(h) + on(ifindex));
  if (!st) {
    int e = st.error().sys_errno;
    if (e == ENOENT || e == ENODEV) return false;
    return std::unexpected(st.error());
  }
  return true;
}

Result<std::vector<FilterInfo>> filters(netlink::Socket& nl, int ifindex, Hook h) {
  std::vector<FilterInfo> out;
  if (PLUMB_TRY(ingress_qdisc(nl, ifindex)) != "clsact") return out;
  Message m(RTM_GETTFILTER, NLM_F_DUMP);
  put_tcmsg(m, ifindex, hook_parent(h), 0, 0);
  auto st = nl.dump(m, std::string("dump filters at ") + hook_name(h) + on(ifindex), [&](const nlmsghdr* nlh) -> Status {
    if (nlh->nlmsg_type != RTM_NEWTFILTER) return {};
    const auto* t = static_cast<const tcmsg*>(mnl_nlmsg_get_payload(nlh));
    if (t->tcm_handle == 0) return {};  // the classifier instance itself, not a filter
    auto tb = PLUMB_TRY(netlink::parse_attrs(nlh, sizeof(tcmsg), TCA_MAX, kTcPolicy));
    FilterInfo f;
    f.prio = static_cast<uint16_t>(TC_H_MAJ(t->tcm_info) >> 16);
    f.protocol = ntohs(static_cast<uint16_t>(TC_H_MIN(t->tcm_info)));
    f.handle = t->tcm_handle;
    if (tb[TCA_KIND]) f.kind = mnl_attr_get_str(tb[TCA_KIND]);
    if (f.kind == "bpf" && tb[TCA_OPTIONS]) {
      auto opts = PLUMB_TRY(netlink::parse_nested(tb[TCA_OPTIONS], TCA_BPF_MAX, kBpfPolicy));
      if (opts[TCA_BPF_NAME]) f.bpf_name = mnl_attr_get_str(opts[TCA_BPF_NAME]);
      if (opts[TCA_BPF_ID]) f.bpf_prog_id = mnl_attr_get_u32(opts[TCA_BPF_ID]);
      if (opts[TCA_BPF_CLASSID]) f.classid = mnl_attr_get_u32(opts[TCA_BPF_CLASSID]);
      if (opts[TCA_BPF_FLAGS]) f.direct_action = (mnl_attr_get_u32(opts[TCA_BPF_FLAGS]) & TCA_BPF_FLAG_ACT_DIRECT) != 0;
    }
    out.push_back(std::move(f));
    return {};
  });
  if (!st) return std::unexpected(st.error());
  return out;
}

Result<std::string> root_qdisc(netlink::Socket& nl, int ifindex) {
  return qdisc_kind(nl, ifindex, TC_H_ROOT, "find the root qdisc" + on(ifindex));
}

Status set_root_fq(netlink::Socket& nl, int ifindex) {
  Message m(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE);
  put_tcmsg(m, ifindex, TC_H_ROOT, 0, 0);
  m.put_str(TCA_KIND, "fq");
  return feature(nl.request(m, "set root qdisc fq" + on(ifindex)));
}

Result<bool> del_root(netlink::Socket& nl, int ifindex) {
  Message m(RTM_DELQDISC, 0);
  put_tcmsg(m, ifindex, TC_H_ROOT, 0, 0);
  auto st = nl.request(m, "delete root qdisc" + on(ifindex));
  if (!st) {
    int e = st.error().sys_errno;
    if (e == ENOENT || e == ENODEV || e == EINVAL) return false;
    return std::unexpected(st.error());
  }
  return true;
}

}  // namespace plumb::tc
