// Node-wide bandwidth programs: loaded with libbpf from the skeleton of ebpf/bandwidth.bpf.c ONCE
// per node and pinned under <bpffsDir>/bandwidth_v<ABI>/ (bpffsDir defaults to
// /sys/fs/bpf/plumb); every later invocation reuses the pins. Per-pod work is an update of the
// state map (here) and a tc attach (engine/kernel/tc.hpp). Nothing per pod is ever pinned.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ebpf/bandwidth_abi.h"
#include "engine/base/result.hpp"
#include "engine/kernel/tc.hpp"

namespace plumb {
class Dir;
}  // namespace plumb

namespace plumb::ebpf {

/// A tc hook of the pod's HOST-side interface. HostIngress shapes what the pod sends (its
/// egress); HostEgress shapes what it receives (its ingress).
enum class Hook : uint32_t { HostIngress = PLUMB_BW_HOOK_HOST_INGRESS, HostEgress = PLUMB_BW_HOOK_HOST_EGRESS };
/// "host-ingress" / "host-egress", for messages and undo records.
[[nodiscard]] const char* hook_name(Hook h);
/// The clsact hook of the host-side device a Hook attaches to.
[[nodiscard]] inline tc::Hook clsact_hook(Hook h) { return h == Hook::HostIngress ? tc::Hook::Ingress : tc::Hook::Egress; }

/// How this node enforces limits, chosen when the programs are first loaded.
///   TokenBucket: no sch_fq in the kernel; both hooks run the token bucket (drop + ECN).
///   EdtFq: sch_fq exists; the host egress hook stamps departure times (EDT) and an fq root
///          qdisc on the host interface holds packets until then; the host ingress hook (which
///          has no queue) keeps the token bucket.
enum class Mode : uint32_t { TokenBucket = PLUMB_BW_MODE_TOKEN_BUCKET, EdtFq = PLUMB_BW_MODE_EDT_FQ };

/// One shaped direction as configured: the reference plugin's units.
struct Limit {
  uint64_t rate_bps = 0;    // bits per second, > 0
  uint64_t burst_bits = 0;  // bucket depth, bits, > 0
};

/// The token bucket's time parameters for a Limit (ns at the limit's rate), see bandwidth_abi.h.
///   burst_ns   = burst_bits / rate
///   mark_ns    = max(kMarkDelayNs, time of one 64 KiB GSO skb)
///   horizon_ns = max(kHorizonNs, mark_ns + 2 * time of one 64 KiB GSO skb), at most kMaxHorizonNs
/// Errors: kInvalidConfig when rate or burst is 0.
struct BucketParams {
  uint64_t burst_ns = 0;
  uint64_t mark_ns = 0;
  uint64_t horizon_ns = 0;
};
[[nodiscard]] Result<BucketParams> bucket_params(const Limit& limit);
/// Virtual queue beyond which ECN-capable packets are marked CE.
inline constexpr uint64_t kMarkDelayNs = 5'000'000;
/// The virtual queue's depth: Linux's minimum TCP retransmission timeout (TCP_RTO_MIN, 200 ms),
/// so that tokens accrued while a sender waits on its RTO are spendable afterwards.
inline constexpr uint64_t kHorizonNs = 200'000'000;
inline constexpr uint64_t kMaxHorizonNs = 60'000'000'000;  // keeps every sum of times far from 2^64

/// Handles (fds) of the pinned node-wide programs and maps. Movable; closes its fds.
class Programs {
 public:
  /// Reuses the pins under <bpffs_dir>/bandwidth_v<ABI> or, when there are none, loads the
  /// programs, probes for sch_fq (in a throwaway network namespace) to choose the mode, and pins
  /// everything atomically (pinned in a temporary directory renamed into place; a concurrent
  /// loader that loses the race reuses the winner's pins). bpffs_dir must be on a bpf
  /// filesystem (it is created if its parent is). Errors: kKernelFeature when the kernel refuses
  /// the programs (libbpf's log in details), kInvalidConfig when bpffs_dir is not on bpffs,
  /// kKernel for pin/map failures; pins of another shape are reported, never overwritten.
  [[nodiscard]] static Result<Programs> load_or_open(const std::string& bpffs_dir);
  /// Opens existing pins only: nullopt when nothing was ever loaded under bpffs_dir (a DEL must
  /// not load programs just to find nothing to remove).
  /// `abi`: the pins of another ABI version (an undo record written by an older plumb).
  /// A link at bpffs_dir's own name or at the pin directory is an error naming that path
  /// (ELOOP), never followed.
  [[nodiscard]] static Result<std::optional<Programs>> open_existing(const std::string& bpffs_dir,
                                                                     uint32_t abi = PLUMB_BW_ABI_VERSION);

  Programs(Programs&&) noexcept;
  Programs& operator=(Programs&&) noexcept;
  Programs(const Programs&) = delete;
  Programs& operator=(const Programs&) = delete;
  ~Programs();

  [[nodiscard]] Mode mode() const { return mode_; }
  /// The program to attach at `h` in this node's mode.
  [[nodiscard]] int prog_fd(Hook h) const;
  /// The program's name (what tc shows and what attach records as TCA_BPF_NAME).
  [[nodiscard]] const char* prog_name(Hook h) const;
  [[nodiscard]] int token_bucket_fd(Hook h) const { return h == Hook::HostIngress ? tb_ingress_ : tb_egress_; }
  [[nodiscard]] int edt_fd() const { return edt_egress_; }
  [[nodiscard]] int state_map_fd() const { return state_; }
  /// The kernel id of prog_fd(h) (what a tc filter dump reports as TCA_BPF_ID).
  [[nodiscard]] Result<uint32_t> prog_id(Hook h) const;
  /// <bpffs_dir>/bandwidth_v<ABI>.
  [[nodiscard]] const std::string& pin_dir() const { return pin_dir_; }

  /// Writes the entry of (ifindex, h): the limit's parameters, a full bucket, zero counters,
  /// `owner`. Errors: kInvalidConfig for a zero rate/burst, kKernel from the map update.
  [[nodiscard]] Status configure(int ifindex, Hook h, const Limit& limit, uint64_t owner) const;
  /// The same for any key. exclusive: fail with EEXIST (kConflict) when the key has an entry
  /// (claiming a pod-side id).
  [[nodiscard]] Status configure(const plumb_bw_key& key, const Limit& limit, uint64_t owner, bool exclusive) const;
  /// Writes a raw entry (tests drive the programs with chosen parameters).
  [[nodiscard]] Status write(const plumb_bw_key& key, const plumb_bw_state& value) const;
  /// The entry of (ifindex, h), nullopt when absent.
  [[nodiscard]] Result<std::optional<plumb_bw_state>> read(int ifindex, Hook h) const;
  [[nodiscard]] Result<std::optional<plumb_bw_state>> read(const plumb_bw_key& key) const;
  /// Deletes the entry of (ifindex, h) if it belongs to `owner`. Returns true if deleted, false
  /// when absent or owned by another attachment (an ifindex reused after the pod's veth died).
  [[nodiscard]] Result<bool> remove(int ifindex, Hook h, uint64_t owner) const;
  [[nodiscard]] Result<bool> remove(const plumb_bw_key& key, uint64_t owner) const;
  /// Every entry of the state map (leak checks, inspection).
  [[nodiscard]] Result<std::vector<std::pair<plumb_bw_key, plumb_bw_state>>> entries() const;

 private:
  Programs() = default;
  void close_all();
  /// The pins of ABI `abi` under the opened bpffs directory (open_existing's work).
  [[nodiscard]] static Result<std::optional<Programs>> open_in(const Dir& bpffs, uint32_t abi = PLUMB_BW_ABI_VERSION);
  int tb_ingress_ = -1, tb_egress_ = -1, edt_egress_ = -1, state_ = -1, node_ = -1;
  Mode mode_ = Mode::TokenBucket;
  std::string pin_dir_;
};

/// True when the kernel can create an sch_fq qdisc: tries it on the loopback device of a
/// throwaway network namespace (a helper thread unshares its own namespace; the node is not
/// touched). Errors only when the probe itself cannot run (no CAP_SYS_ADMIN): callers then use
/// the token bucket.
[[nodiscard]] Result<bool> kernel_has_fq();

/// The state map key of a host-side device's hook.
[[nodiscard]] inline plumb_bw_key host_key(int ifindex, Hook h) {
  return plumb_bw_key{static_cast<uint32_t>(ifindex), static_cast<uint32_t>(h)};
}
/// The state map key of a pod-side attachment's hook: its filters' classid `id` (1..65535; the
/// program sees it as skb->tc_classid) and the hook with PLUMB_BW_HOOK_POD.
[[nodiscard]] inline plumb_bw_key pod_key(uint16_t id, Hook h) {
  return plumb_bw_key{id, static_cast<uint32_t>(h) | PLUMB_BW_HOOK_POD};
}

/// The pin directory's name under a bpffsDir for ABI `abi`: "bandwidth_v<abi>".
[[nodiscard]] std::string pin_name(uint32_t abi = PLUMB_BW_ABI_VERSION);

/// Deletes the state map entries `keys` that belong to `owner` from the pins in `pin_dir` (the
/// directory an undo record names, of this ABI or an earlier one): only the state map is
/// opened and only what every ABI keeps is assumed (bandwidth_abi.h: 8-byte keys, the owner at
/// PLUMB_BW_OWNER_OFFSET of a value of any size), so a layout since changed is no obstacle.
/// Missing directory, map or entry: success. Errors: kKernel for a map of another key size or
/// a failed lookup/delete, kIo (ELOOP: a link at the directory or the map's name, not followed).
[[nodiscard]] Status remove_entries(const std::string& pin_dir, const std::vector<plumb_bw_key>& keys, uint64_t owner);

/// Removes, under `bpffs_dir`, the pins of every ABI but this binary's ("bandwidth_v<N>",
/// N != PLUMB_BW_ABI_VERSION) whose state map has no entry left: no attachment shaped by a
/// plumb of that ABI still needs them (its filters, if any remain, hold the programs and the
/// map alive without the pins). A directory without a state map is left alone. Returns the
/// removed directories. Errors: kIo/kKernel naming the path (what was removed before stays
/// removed).
[[nodiscard]] Result<std::vector<std::string>> prune_unused_pins(const std::string& bpffs_dir);

/// A random non-zero 64-bit attachment owner id (getrandom).
[[nodiscard]] Result<uint64_t> random_owner();

}  // namespace plumb::ebpf
