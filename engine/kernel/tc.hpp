// tc over rtnetlink for BPF programs (ebpf/ uses it for bandwidth): the clsact qdisc, one cls_bpf filter
// (direct-action) per hook at plumb's own priority, and the fq root qdisc of EDT mode. Sent with
// plumb's netlink::Socket; no `tc` binary is executed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/netlink/socket.hpp"

namespace plumb::tc {

/// The two clsact hooks of a device.
enum class Hook { Ingress, Egress };
/// "ingress" / "egress", for messages.
[[nodiscard]] const char* hook_name(Hook h);

/// plumb's filter priority and handle on both clsact hooks: detach removes exactly this filter
/// and never another program's.
inline constexpr uint16_t kFilterPrio = 0xb0e;
inline constexpr uint32_t kFilterHandle = 1;

/// What a dump reports for one filter of a clsact hook.
struct FilterInfo {
  uint16_t prio = 0;
  uint16_t protocol = 0;   // host byte order (ETH_P_ALL = 3)
  uint32_t handle = 0;
  std::string kind;        // "bpf" for cls_bpf
  std::string bpf_name;    // TCA_BPF_NAME
  uint32_t bpf_prog_id = 0;
  uint32_t classid = 0;    // TCA_BPF_CLASSID, 0 if none
  bool direct_action = false;
};

/// The kind of the ingress/clsact qdisc of `ifindex` ("clsact", "ingress"), "" when none.
[[nodiscard]] Result<std::string> ingress_qdisc(netlink::Socket& nl, int ifindex);
/// Adds the clsact qdisc (NLM_F_CREATE|NLM_F_EXCL). Errors: EEXIST when one is there (an
/// "ingress" qdisc blocks clsact: callers report it), kKernelFeature when the kernel lacks clsact.
[[nodiscard]] Status add_clsact(netlink::Socket& nl, int ifindex);
/// Deletes the clsact qdisc; false when there was none.
[[nodiscard]] Result<bool> del_clsact(netlink::Socket& nl, int ifindex);

/// Attaches `prog_fd` as plumb's cls_bpf filter (direct-action, all protocols, kFilterPrio,
/// kFilterHandle) on hook `h`; an existing filter at that priority/handle is replaced.
/// classid: TCA_BPF_CLASSID when non-zero (cls_bpf hands it to the program as skb->tc_classid).
[[nodiscard]] Status attach(netlink::Socket& nl, int ifindex, Hook h, int prog_fd, const std::string& name, uint32_t classid = 0);
/// Removes plumb's filter from hook `h`; false when it was not there (or clsact is gone).
[[nodiscard]] Result<bool> detach(netlink::Socket& nl, int ifindex, Hook h);
/// The filters on hook `h` of `ifindex` (empty when there is no clsact).
[[nodiscard]] Result<std::vector<FilterInfo>> filters(netlink::Socket& nl, int ifindex, Hook h);

/// EDT mode: the root qdisc kind of `ifindex` ("noqueue", "fq", ...).
[[nodiscard]] Result<std::string> root_qdisc(netlink::Socket& nl, int ifindex);
/// EDT mode: replaces the root qdisc with fq. Errors: kKernelFeature when sch_fq is missing.
[[nodiscard]] Status set_root_fq(netlink::Socket& nl, int ifindex);
/// Deletes the root qdisc (the device returns to its default); false when there was none.
[[nodiscard]] Result<bool> del_root(netlink::Socket& nl, int ifindex);

/// The messages above, for golden-byte tests.
[[nodiscard]] netlink::Message build_add_clsact(int ifindex);
[[nodiscard]] netlink::Message build_attach(int ifindex, Hook h, int prog_fd, const std::string& name, uint32_t classid = 0);
[[nodiscard]] netlink::Message build_detach(int ifindex, Hook h);

}  // namespace plumb::tc
