// Kernel parameters under /proc/sys, in the calling thread's network namespace (enter the pod's
// namespace with netns::Guard before touching its per-namespace net.* keys).
#pragma once

#include <string>

#include "engine/base/result.hpp"

namespace plumb::sysctl {

/// key uses '/' or '.' separators relative to /proc/sys ("net/ipv4/ip_forward" or
/// "net.ipv4.ip_forward"); interface names containing '.' must use the '/' form.
/// Rejects keys with ".." components or that leave /proc/sys. Errors: errno naming the key.
[[nodiscard]] Status write(const std::string& key, const std::string& value);
/// Reads the value with the trailing newline removed.
[[nodiscard]] Result<std::string> read(const std::string& key);
/// Path under /proc/sys for a key (validated).
[[nodiscard]] Result<std::string> path_of(const std::string& key);

}  // namespace plumb::sysctl
