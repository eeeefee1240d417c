// TAP devices (the reference "tap" plugin's device), created through /dev/net/tun: TUNSETIFF
// (IFF_TAP | IFF_NO_PI | IFF_VNET_HDR [| IFF_MULTI_QUEUE]), TUNSETOWNER / TUNSETGROUP when given,
// TUNSETPERSIST so the device outlives the creating file descriptor. There is no rtnetlink way to
// create one: the device is born in the network namespace of the thread that opens /dev/net/tun
// (enter the pod's namespace with netns::Guard first). Deleting it is an ordinary RTM_DELLINK.
//
// SELinux: the device is labelled with the SID of the creating task, so a requested context needs
// a task running in it. create_tap_labelled() forks, sets the child's exec context
// (/proc/thread-self/attr/exec) and re-executes plumb's own binary in its tap helper mode
// (tap_helper_main), which creates the device in the inherited network namespace.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/base/result.hpp"

namespace plumb::tun {

/// A persistent TAP device to create.
struct TapSpec {
  std::string name;               ///< its name (1..15 bytes)
  bool multi_queue = false;       ///< IFF_MULTI_QUEUE
  std::optional<uint32_t> owner;  ///< TUNSETOWNER: only this uid may attach (unset: anyone with CAP_NET_ADMIN)
  std::optional<uint32_t> group;  ///< TUNSETGROUP
};

/// The ifr_flags TUNSETIFF receives for `spec`.
[[nodiscard]] uint16_t tap_flags(const TapSpec& spec);

/// Creates the device in the calling thread's network namespace. Errors: kKernelFeature when
/// /dev/net/tun is missing (no tun driver); EEXIST (kConflict) when the name is taken; errno
/// naming the ioctl otherwise. A device that could not be made persistent is not left behind.
[[nodiscard]] Status create_tap(const TapSpec& spec);

/// True when SELinux is enabled (selinuxfs mounted at <sysfs_root>/fs/selinux).
[[nodiscard]] bool selinux_enabled(const std::string& sysfs_root);

/// Creates the device from a child process running plumb's binary (/proc/self/exe) under the
/// SELinux exec context `context`, in the calling thread's network namespace. Errors: the
/// child's message (the context refused by the kernel, the device's errors), kInternal when the
/// child cannot be started.
[[nodiscard]] Status create_tap_labelled(const TapSpec& spec, const std::string& context);

/// The first argument that selects the helper mode of plumb's binary.
inline constexpr const char* kHelperArg = "__plumb-create-tap";
/// The helper mode: argv = {prog, kHelperArg, name, multi_queue "0"|"1", owner|"-", group|"-"}.
/// Creates the device and exits 0, or prints the error on stderr and exits 1.
[[nodiscard]] int tap_helper_main(int argc, char** argv);

}  // namespace plumb::tun
