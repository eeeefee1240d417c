// SPDX-License-Identifier: GPL-2.0
/* plumb's bandwidth shaping, attached with cls_bpf (direct-action) to the tc clsact hooks of the
 * HOST side of a pod's veth, or of the pod-side interface when it has no host-side peer. The
 * model and the map layout are in bandwidth_abi.h.
 *
 * Why one object with three SEC programs instead of one .bpf.c per hook: the two hooks run the
 * same token bucket over the same state map and differ only in the key's hook number. One object
 * gives one skeleton in which the map is shared by construction (no cross-object map reuse by
 * pin), one verifier-checked copy of the algorithm, and one set of pins to load once per node.
 *
 *   tb_host_ingress   token bucket, host ingress hook = the pod's egress
 *   tb_host_egress    token bucket, host egress hook  = the pod's ingress (nodes without sch_fq)
 *   edt_host_egress   EDT: stamps skb->tstamp with the departure time for sch_fq to enforce
 *                     (nodes with sch_fq; an ingress hook has no queue, so pod egress always
 *                     uses the token bucket)
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "bandwidth_abi.h"

char LICENSE[] SEC("license") = "GPL";

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, PLUMB_BW_MAX_ENTRIES);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, struct plumb_bw_key);
  __type(value, struct plumb_bw_state);
} plumb_bw_state SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct plumb_bw_node);
} plumb_bw_node SEC(".maps");

#define NSEC_PER_SEC 1000000000ull

/* Length of the headers (Ethernet + IP + TCP/UDP) every segment of a GSO skb repeats on the
 * wire; 0 when they cannot be read. At both tc hooks the data starts at the Ethernet header. */
static __always_inline __u32 segment_headers_len(struct __sk_buff *skb) {
  __u32 off = ETH_HLEN;
  __u8 proto = 0;
  if (skb->protocol == bpf_htons(ETH_P_IP)) {
    __u8 vihl = 0;
    if (bpf_skb_load_bytes(skb, off, &vihl, 1) || bpf_skb_load_bytes(skb, off + 9, &proto, 1)) return 0;
    off += (__u32)(vihl & 0x0f) * 4;
  } else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
    if (bpf_skb_load_bytes(skb, off + 6, &proto, 1)) return 0;
    off += 40;
  } else {
    return ETH_HLEN;
  }
  if (proto == IPPROTO_TCP) {
    __u8 doff = 0;
    if (bpf_skb_load_bytes(skb, off + 12, &doff, 1)) return off;
    off += (__u32)(doff >> 4) * 4;
  } else if (proto == IPPROTO_UDP) {
    off += 8;
  }
  return off;
}

/* Bytes the skb occupies on the wire: a GSO skb repeats its headers in every segment (what
 * qdisc_pkt_len() charges in TBF). */
static __always_inline __u64 wire_len(struct __sk_buff *skb) {
  __u64 len = skb->len;
  __u32 segs = skb->gso_segs;
  if (segs > 1 && segs < 65536) len += (__u64)(segs - 1) * segment_headers_len(skb);
  return len;
}

/* True when the packet is IPv4/IPv6 with an ECN-capable transport (ECT(0), ECT(1) or CE). */
static __always_inline int ecn_capable(struct __sk_buff *skb) {
  __u8 b[2] = {0, 0};
  if (skb->protocol == bpf_htons(ETH_P_IP)) {
    if (bpf_skb_load_bytes(skb, ETH_HLEN + 1, b, 1)) return 0;
    return (b[0] & 3) != 0;
  }
  if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
    if (bpf_skb_load_bytes(skb, ETH_HLEN, b, 2)) return 0;
    return ((b[1] >> 4) & 3) != 0;
  }
  return 0;
}

/* Cost of `len` wire bytes at `rate_bps`, in ns. len is at most 2^30, so len*8e9 fits in 64 bits. */
static __always_inline __u64 cost_ns(__u64 len, __u64 rate_bps) {
  if (len > (1ull << 30)) len = 1ull << 30;
  return len * 8 * NSEC_PER_SEC / rate_bps;
}

enum verdict { PASS = 0, MARK = 1, DROP = 2 };

/* The entry's key: a pod-side filter carries its attachment id as classid (cls_bpf sets
 * tc_classid to it before running the program); a host-side filter has none (0). */
static __always_inline struct plumb_bw_key key_of(struct __sk_buff *skb, __u32 hook) {
  __u32 id = skb->tc_classid;
  struct plumb_bw_key key = {.ifindex = id ? id : skb->ifindex, .hook = id ? hook | PLUMB_BW_HOOK_POD : hook};
  return key;
}

/* The token bucket of bandwidth_abi.h for one hook. */
static __always_inline int token_bucket(struct __sk_buff *skb, __u32 hook) {
  struct plumb_bw_key key = key_of(skb, hook);
  struct plumb_bw_state *s = bpf_map_lookup_elem(&plumb_bw_state, &key);
  if (!s) return TC_ACT_OK;
  __u64 len = wire_len(skb);
  int ect = ecn_capable(skb);
  __u64 now = bpf_ktime_get_ns();
  enum verdict v = PASS;

  bpf_spin_lock(&s->lock);
  __u64 rate = s->rate_bps;
  if (rate != 0) {
    __u64 t = s->t_empty_ns;
    if (now > s->burst_ns && t < now - s->burst_ns) t = now - s->burst_ns; /* at most `burst` tokens */
    __u64 t_new = t + cost_ns(len, rate);
    __u64 deficit = t_new > now ? t_new - now : 0;
    if (deficit > s->horizon_ns) {
      v = DROP;
    } else {
      s->t_empty_ns = t_new;
      if (deficit > s->mark_ns && ect) v = MARK;
    }
  }
  if (v == DROP) {
    s->dropped_pkts++;
    s->dropped_bytes += len;
  } else {
    s->passed_pkts++;
    s->passed_bytes += len;
    if (v == MARK) s->marked_pkts++;
  }
  bpf_spin_unlock(&s->lock);

  if (v == MARK) bpf_skb_ecn_set_ce(skb);
  return v == DROP ? TC_ACT_SHOT : TC_ACT_OK;
}

SEC("tc")
int tb_host_ingress(struct __sk_buff *skb) { return token_bucket(skb, PLUMB_BW_HOOK_HOST_INGRESS); }

SEC("tc")
int tb_host_egress(struct __sk_buff *skb) { return token_bucket(skb, PLUMB_BW_HOOK_HOST_EGRESS); }

/* Earliest departure time: the same virtual clock, but instead of dropping a packet that finds
 * the bucket short, stamp it with the time the bucket covers it (t_empty after charging it) and
 * let sch_fq hold it until then. Delays beyond mark_ns set CE on ECN-capable packets; packets
 * that would wait beyond the horizon are dropped (and not charged). */
SEC("tc")
int edt_host_egress(struct __sk_buff *skb) {
  struct plumb_bw_key key = key_of(skb, PLUMB_BW_HOOK_HOST_EGRESS);
  struct plumb_bw_state *s = bpf_map_lookup_elem(&plumb_bw_state, &key);
  if (!s) return TC_ACT_OK;
  __u64 len = wire_len(skb);
  int ect = ecn_capable(skb);
  __u64 now = bpf_ktime_get_ns();
  __u64 stamp = skb->tstamp;
  enum verdict v = PASS;
  __u64 depart = 0;

  bpf_spin_lock(&s->lock);
  __u64 rate = s->rate_bps;
  if (rate != 0) {
    /* A departure time the stack already chose (TCP pacing) counts if it is near; anything else
     * (0, a receive timestamp of another clock) means "now". */
    __u64 base = (stamp > now && stamp - now <= s->horizon_ns) ? stamp : now;
    __u64 t = s->t_empty_ns;
    if (base > s->burst_ns && t < base - s->burst_ns) t = base - s->burst_ns;
    __u64 t_new = t + cost_ns(len, rate);
    __u64 delay = t_new > now ? t_new - now : 0;
    if (delay > s->horizon_ns) {
      v = DROP;
    } else {
      s->t_empty_ns = t_new;
      depart = t_new > base ? t_new : base;
      if (delay > s->mark_ns && ect) v = MARK;
    }
  }
  if (v == DROP) {
    s->dropped_pkts++;
    s->dropped_bytes += len;
  } else {
    s->passed_pkts++;
    s->passed_bytes += len;
    if (v == MARK) s->marked_pkts++;
  }
  bpf_spin_unlock(&s->lock);

  if (v == DROP) return TC_ACT_SHOT;
  if (depart > now) skb->tstamp = depart;
  if (v == MARK) bpf_skb_ecn_set_ce(skb);
  return TC_ACT_OK;
}
