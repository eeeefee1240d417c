// Interface names as the kernel accepts them for a device it creates or renames. Header only, no
// netlink: every place a name enters plumb (CNI_IFNAME, the selection annotation's "interface",
// plugin keys) checks it with this one rule before anything is created under it.
#pragma once

#include <string_view>

namespace plumb::link {

/// The rule of valid_ifname, as error messages state it.
inline constexpr std::string_view kIfnameRule = "1..15 bytes, not \".\" or \"..\", no '/', ':', '%', NUL or whitespace";

/// Whether `name` is a name the kernel gives a device as it is (net/core/dev.c dev_valid_name):
/// 1..15 bytes (IFNAMSIZ 16 with its NUL), not "." or "..", no '/', ':', NUL or whitespace
/// (isspace: space, \t \n \v \f \r). '%' is refused as well: the kernel takes "eth%d" as a
/// template and names the device eth0, eth1... (dev_alloc_name), not what plumb would record.
[[nodiscard]] constexpr bool valid_ifname(std::string_view name) {
  if (name.empty() || name.size() > 15 || name == "." || name == "..") return false;
  for (char c : name) {
    if (c == '/' || c == ':' || c == '%' || c == '\0' || c == ' ' || (c >= '\t' && c <= '\r')) return false;
  }
  return true;
}

}  // namespace plumb::link
