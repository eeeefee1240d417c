#include "drivers/registry.hpp"

namespace plumb::drivers {
namespace {
// The explicit list of attachment kinds and chained features, one per line.
const Driver* const kDrivers[] = {
    &kBridge,
    &kLoopback,
    &kBandwidth,
    &kMacvlan,
    &kHostDevice,
    &kTuning,
    &kSriov,
    &kIbSriov,
    &kVdpa,
    &kPortmap,
    &kPtp,
    &kTap,
    &kSbr,
    &kFirewall,
    &kIpvlan,
    &kVlan,
    &kDummy,
    &kVrf,
    &kRdma,
    &kPassthru,
};
}  // namespace

const Driver* find(std::string_view type) {
  for (const Driver* d : kDrivers) {
    if (d->type == type) return d;
  }
  return nullptr;
}

std::string known_types() {
  std::string out;
  for (const Driver* d : kDrivers) {
    if (!out.empty()) out += ", ";
    out += d->type;
  }
  return out;
}

}  // namespace plumb::drivers
