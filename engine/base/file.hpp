// Reading small files whole (configs, manifests, tokens, sysctls) with errors that name the path.
#pragma once

#include <string>
#include <string_view>

#include "engine/base/result.hpp"

namespace plumb {

/// Reads the whole file at `path` (at most max_bytes). `what` describes it for messages
/// ("CNI config", "sysctl net.ipv4.ip_forward"). Errors: msg "read <what> <path>"; code
/// kNotFound when the file does not exist (sys_errno ENOENT), kIo otherwise (errno kept, EFBIG
/// when larger than max_bytes).
[[nodiscard]] Result<std::string> read_file(const std::string& path, std::string_view what = {},
                                            size_t max_bytes = 16u << 20);

}  // namespace plumb
