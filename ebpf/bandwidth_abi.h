/* The ABI between plumb's bandwidth BPF programs (ebpf/bandwidth.bpf.c) and C++ (ebpf/loader.*):
 * map keys and values, hook numbers, the pin layout. Included by both BPF C (clang -target bpf)
 * and C++ (GCC); static assertions pin every size and offset so a change on one side that the
 * other side does not see fails the build instead of corrupting a map.
 *
 * Model (one entry per shaped direction of one pod interface, keyed by the HOST-side veth):
 *   pod egress  = host veth tc ingress hook (PLUMB_BW_HOOK_HOST_INGRESS)
 *   pod ingress = host veth tc egress hook  (PLUMB_BW_HOOK_HOST_EGRESS)
 * An interface without a host-side peer (macvlan, ipvlan, SR-IOV VF, host-device) is shaped on
 * the POD side, inside the pod namespace, where ifindexes repeat from pod to pod. Its filters
 * carry a node-unique 16-bit id as their tc classid (TCA_BPF_CLASSID), which cls_bpf hands the
 * program as skb->tc_classid; such entries are keyed {id, hook | PLUMB_BW_HOOK_POD}:
 *   pod egress  = pod interface tc egress hook  (PLUMB_BW_HOOK_HOST_EGRESS | PLUMB_BW_HOOK_POD)
 *   pod ingress = pod interface tc ingress hook (PLUMB_BW_HOOK_HOST_INGRESS | PLUMB_BW_HOOK_POD)
 *
 * Token bucket, written as a virtual clock (GCRA): `t_empty_ns` is the time at which the bucket
 * would hold zero tokens; tokens(now) = min(burst, rate * (now - t_empty)). A packet of L wire
 * bytes costs L*8e9/rate ns: t_empty += cost. After the packet, deficit = t_empty - now:
 *   deficit <= 0                    conforms: passed
 *   0 < deficit <= horizon_ns       passed: the deficit is a VIRTUAL queue (nothing waits) that
 *                                   drains at `rate`; beyond mark_ns, ECN-capable packets get CE
 *   deficit > horizon_ns            dropped (bounded horizon); the bucket is not charged
 * Long-term throughput is at most `rate`; the most that can pass at once after idle is
 * burst + rate * horizon. Nothing is ever queued, so the shaper adds no latency.
 *
 * Why a virtual queue as deep as TCP's minimum RTO (200 ms, see loader.cpp): without a queue the
 * only way a shaper can slow a TCP sender whose RTT is far below one MSS at the limit is to make
 * it idle on its loss timers (TLP, RTO). Tokens that accrue during such a stall must still be
 * spendable afterwards or the stall is lost throughput; with horizons of 10-50 ms, measured TCP
 * throughput on a veth fell to 15-55% of the limit (ebpf/README.md).
 */
#ifndef PLUMB_EBPF_BANDWIDTH_ABI_H
#define PLUMB_EBPF_BANDWIDTH_ABI_H

#include <linux/bpf.h>
#include <linux/types.h>

#ifdef __cplusplus
#include <cstddef>
#define PLUMB_BW_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#define PLUMB_BW_OFFSETOF(type, member) offsetof(type, member)
#else
#define PLUMB_BW_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#define PLUMB_BW_OFFSETOF(type, member) __builtin_offsetof(type, member)
#endif

/* Bumped on any incompatible change of the structures or map layout below: the pins live under
 * <bpffsDir>/bandwidth_v<ABI>, so programs of another ABI are never reused. What every ABI keeps,
 * so that a plumb of a later ABI can remove an earlier one's entries (ebpf/loader.hpp
 * remove_entries): the state map's 8-byte key {id, hook} and the 64-bit owner at offset
 * PLUMB_BW_OWNER_OFFSET of its value. */
#define PLUMB_BW_ABI_VERSION 2 /* 2: pod-side entries (tc_classid keys) */

/* Where every ABI's state map value holds the owner (see PLUMB_BW_ABI_VERSION). */
#define PLUMB_BW_OWNER_OFFSET 8

/* Hook numbers (plumb_bw_key.hook). */
#define PLUMB_BW_HOOK_HOST_INGRESS 0u /* tc clsact ingress of the host veth: the pod's egress */
#define PLUMB_BW_HOOK_HOST_EGRESS 1u  /* tc clsact egress of the host veth: the pod's ingress */
#define PLUMB_BW_HOOK_POD 2u          /* flag: a pod-side entry keyed by the filter's classid */

/* Node-wide enforcement modes (plumb_bw_node.mode), chosen once when the programs are loaded. */
#define PLUMB_BW_MODE_TOKEN_BUCKET 0u /* no sch_fq: token bucket on both hooks */
#define PLUMB_BW_MODE_EDT_FQ 1u       /* sch_fq present: EDT (skb->tstamp) + fq on the host egress hook */

/* Maximum number of shaped (interface, hook) pairs on one node. */
#define PLUMB_BW_MAX_ENTRIES 16384

/* Names of the pins under <bpffsDir>/bandwidth_v<ABI>/. */
#define PLUMB_BW_PIN_PROG_HOST_INGRESS "tb_host_ingress"
#define PLUMB_BW_PIN_PROG_HOST_EGRESS "tb_host_egress"
#define PLUMB_BW_PIN_PROG_EDT_EGRESS "edt_host_egress"
#define PLUMB_BW_PIN_MAP_STATE "state"
#define PLUMB_BW_PIN_MAP_NODE "node"

/* Key of the state map: one shaped direction of one host-side interface (node namespace). */
struct plumb_bw_key {
  __u32 ifindex; /* host-side veth ifindex in the node namespace; pod side: the filter's classid */
  __u32 hook;    /* PLUMB_BW_HOOK_HOST_* [| PLUMB_BW_HOOK_POD] */
};

/* Value of the state map. The configuration fields are written by user space (with BPF_F_LOCK);
 * t_empty_ns and the counters by the programs under `lock`. Times are CLOCK_MONOTONIC ns
 * (bpf_ktime_get_ns). */
struct plumb_bw_state {
  struct bpf_spin_lock lock;
  __u32 flags;        /* reserved, 0 */
  __u64 owner;        /* random id of the attachment that configured the entry: DEL removes only its own */
  __u64 rate_bps;     /* rate, bits per second (> 0) */
  __u64 burst_bits;   /* bucket depth as configured, bits (kept for CHECK) */
  __u64 burst_ns;     /* bucket depth in time at `rate`: burst_bits * 1e9 / rate_bps */
  __u64 mark_ns;      /* deficit beyond which ECN-capable packets are marked CE */
  __u64 horizon_ns;   /* deficit beyond which every packet is dropped */
  __u64 t_empty_ns;   /* virtual clock: when the bucket is (was) empty; 0 = full bucket */
  __u64 passed_pkts;  /* counters since the entry was written (skbs; a GSO skb counts once) */
  __u64 passed_bytes; /* wire bytes */
  __u64 dropped_pkts;
  __u64 dropped_bytes;
  __u64 marked_pkts;  /* passed with CE set */
};

/* Value of the single-entry node map (key 0): how this node enforces limits. */
struct plumb_bw_node {
  __u32 abi_version; /* PLUMB_BW_ABI_VERSION */
  __u32 mode;        /* PLUMB_BW_MODE_* */
};

PLUMB_BW_STATIC_ASSERT(sizeof(struct plumb_bw_key) == 8, "plumb_bw_key is 8 bytes");
PLUMB_BW_STATIC_ASSERT(sizeof(struct bpf_spin_lock) == 4, "bpf_spin_lock is 4 bytes");
PLUMB_BW_STATIC_ASSERT(sizeof(struct plumb_bw_state) == 104, "plumb_bw_state is 104 bytes");
PLUMB_BW_STATIC_ASSERT(PLUMB_BW_OFFSETOF(struct plumb_bw_state, owner) == PLUMB_BW_OWNER_OFFSET, "owner at 8");
PLUMB_BW_STATIC_ASSERT(PLUMB_BW_OFFSETOF(struct plumb_bw_state, t_empty_ns) == 56, "t_empty_ns at 56");
PLUMB_BW_STATIC_ASSERT(PLUMB_BW_OFFSETOF(struct plumb_bw_state, marked_pkts) == 96, "marked_pkts at 96");
PLUMB_BW_STATIC_ASSERT(sizeof(struct plumb_bw_node) == 8, "plumb_bw_node is 8 bytes");

#endif /* PLUMB_EBPF_BANDWIDTH_ABI_H */
