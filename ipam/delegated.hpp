// CNI IPAM delegation (CNI SPEC "Delegated plugins"): an "ipam" type plumb does not implement
// (calico-ipam, dhcp, ...) inside one of plumb's own drivers is executed like the reference
// plugins do it (ipam.ExecAdd): the whole plugin config on stdin, the attachment's CNI_*
// environment, its result (ips, routes, dns) returned to the driver.
#pragma once

#include <memory>
#include <string>

#include "engine/cni/delegate.hpp"
#include "ipam/ipam.hpp"

namespace plumb::ipam::detail {

/// The delegated IPAM of plugin type `type`, whose binary is found now through `search`.
/// Errors: kNotFound naming the type and every directory searched; kInvalidConfig for a type
/// that is not a plain file name.
[[nodiscard]] Result<std::unique_ptr<Ipam>> make_delegated(const std::string& type, const cni::PluginSearch& search);

}  // namespace plumb::ipam::detail
