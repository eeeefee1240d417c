// MAC spoof checking for bridge ports (the reference bridge plugin's `macspoofchk`) in plumb's own
// table of the bridge family. Frames entering the bridge from a checked port must carry the pod's
// MAC as source; everything else from that port is dropped. One rule for every pod: per pod the
// work is two set elements, so the ruleset does not grow with pods.
//
//   table bridge plumb {
//     set macspoof-ports   { type ifname; }                 # host ends of checked pods
//     set macspoof-allowed { type ifname . ether_addr; }    # host end . the pod's MAC
//     chain macspoof {
//       type filter hook prerouting priority -300; policy accept;
//       iifname @macspoof-ports iifname . ether saddr != @macspoof-allowed drop
//     }
//   }
//
// The reference installs the same check as per-pod chains in `bridge nat` (priority -300, "ether
// saddr == <mac> return; drop"); each element carries "<containerID>/<ifname>" as its comment.
#pragma once

#include <string>

#include "engine/base/ip.hpp"
#include "engine/base/result.hpp"

namespace plumb::nft {

/// Name of plumb's bridge-family table (the same name as the inet one: nft keeps families apart).
inline constexpr const char* kBridgeTableName = "plumb";

/// Frames entering the bridge from port `port` (the host end of a pod's veth) are dropped unless
/// their source MAC is `mac`. Installs the table, sets and chain if needed (one transaction,
/// race-free), then both elements (another one). Idempotent. `owner` ("<containerID>/<ifname>")
/// becomes the elements' comment. Errors: kInvalidConfig for an invalid port name;
/// kKernelFeature when the kernel lacks nftables for bridges (CONFIG_NF_TABLES_BRIDGE);
/// kKernel with the kernel's errno and extended-ack text otherwise.
[[nodiscard]] Status add_macspoof(const std::string& port, const Mac& mac, const std::string& owner);
/// Removes the elements of (port, mac). Returns true when something was removed, false when both
/// were absent (a missing table or set included). Errors: as add_macspoof.
[[nodiscard]] Result<bool> del_macspoof(const std::string& port, const Mac& mac);
/// CNI CHECK: both elements of (port, mac) are installed. Errors: kKernel naming what is missing.
[[nodiscard]] Status check_macspoof(const std::string& port, const Mac& mac);

}  // namespace plumb::nft
