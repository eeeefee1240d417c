// The explicit list of drivers (definitions live in one file per kind).
#pragma once

#include "drivers/driver.hpp"

namespace plumb::drivers {
extern const Driver kBridge;
extern const Driver kLoopback;
extern const Driver kBandwidth;
extern const Driver kMacvlan;
extern const Driver kHostDevice;
extern const Driver kTuning;
extern const Driver kSriov;
extern const Driver kIbSriov;
extern const Driver kVdpa;
extern const Driver kPortmap;
extern const Driver kPtp;
extern const Driver kTap;
extern const Driver kSbr;
extern const Driver kFirewall;
extern const Driver kIpvlan;
extern const Driver kVlan;
extern const Driver kDummy;
extern const Driver kVrf;
extern const Driver kRdma;
extern const Driver kPassthru;
/// Every type plumb does not implement (drivers/delegate.cpp); not in find()'s list.
extern const Driver kDelegate;
}  // namespace plumb::drivers
