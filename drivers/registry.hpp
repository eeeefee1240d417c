// The explicit list of drivers (definitions live in one file per kind).
#pragma once

#include "drivers/driver.hpp"

namespace plumb::drivers {
extern const Driver kBridge;
extern const Driver kLoopback;
}  // namespace plumb::drivers
