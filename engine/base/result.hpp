// plumb's one result type: every fallible operation returns Result<T> = std::expected<T, Error>.
// Library code returns errors and never logs them; only cni-entry (cni-entry/pod/log.hpp) logs.
#pragma once

#include <cerrno>
#include <cstdint>
#include <expected>
#include <string>
#include <utility>

namespace plumb {

/// CNI error codes (CNI 1.1.0 "Error" section; 100+ are plumb's own).
namespace cni_code {
inline constexpr unsigned kIncompatibleVersion = 1;
inline constexpr unsigned kUnsupportedField = 2;
inline constexpr unsigned kUnknownContainer = 3;
inline constexpr unsigned kInvalidEnv = 4;
inline constexpr unsigned kIo = 5;
inline constexpr unsigned kDecode = 6;
inline constexpr unsigned kInvalidConfig = 7;
inline constexpr unsigned kTryAgainLater = 11;
inline constexpr unsigned kPluginNotAvailable = 50;
inline constexpr unsigned kPluginNotReady = 51;
/// A kernel operation (netlink, sysctl, namespace) failed.
inline constexpr unsigned kKernel = 100;
/// An address pool has no free address, or a requested address is taken.
inline constexpr unsigned kIpamExhausted = 101;
/// A NetworkAttachmentDefinition, pod or on-disk config could not be found.
inline constexpr unsigned kNotFound = 102;
/// The selection annotation is invalid (reported only with strictAnnotations).
inline constexpr unsigned kInvalidAnnotation = 103;
/// The running kernel lacks a feature the configuration asks for.
inline constexpr unsigned kKernelFeature = 104;
/// A resource (interface name, VF, host port) is already in use.
inline constexpr unsigned kConflict = 105;
/// A CNI plugin plumb delegated to could not be run, did not finish in time, or failed without
/// a CNI error of its own (its stderr is in the message).
inline constexpr unsigned kDelegate = 106;
/// A state record was written by a newer plumb (a format or undo operation this binary does not
/// know). DEL and GC keep what they cannot undo for that version and succeed (a notice in the
/// log); an ADD of the same key fails with it.
inline constexpr unsigned kNewerRecord = 107;
/// Internal invariant broken (a plumb bug).
inline constexpr unsigned kInternal = 199;
}  // namespace cni_code

/// An error: what was being done, why it failed, and the kernel's extended-ack text if any.
///   cni_code   CNI error code to report (see cni_code); kKernel when sys_errno is set and nothing
///              more specific applies.
///   sys_errno  positive errno from the kernel or libc, 0 if none.
///   msg        human text naming the operation and the offending field/value,
///              e.g. "create veth pair veth1a2b/eth0 in /run/netns/pod1".
///   details    the kernel's extended-ack message or other context; may be empty.
struct Error {
  unsigned cni_code = cni_code::kInternal;
  int sys_errno = 0;
  std::string msg;
  std::string details;

  /// "msg: strerror(sys_errno) (details)", for logs and the CNI error "msg" field.
  [[nodiscard]] std::string text() const;
  /// Returns a copy with "context: " prefixed to msg (keeps codes and details).
  [[nodiscard]] Error within(const std::string& context) const;
};

template <class T>
using Result = std::expected<T, Error>;
using Status = std::expected<void, Error>;

/// Builds the unexpected value for a CNI-level error (no errno).
[[nodiscard]] inline std::unexpected<Error> fail(unsigned cni, std::string msg, std::string details = {}) {
  return std::unexpected(Error{cni, 0, std::move(msg), std::move(details)});
}
/// Builds the unexpected value for a failed system call: code kKernel, errno kept.
[[nodiscard]] inline std::unexpected<Error> fail_errno(int err, std::string msg, std::string details = {}) {
  return std::unexpected(Error{cni_code::kKernel, err, std::move(msg), std::move(details)});
}

}  // namespace plumb

/// Propagates an error from a Result/Status expression; evaluates to the value otherwise.
/// GCC 12's std::expected has no monadic members, so this is the one early-return helper.
#define PLUMB_TRY(expr) PLUMB_TRY_NAMED_(expr, PLUMB_TRY_CAT_(plumb_try_r_, __COUNTER__))
// A fresh name per expansion, so PLUMB_TRY nested in PLUMB_TRY shadows nothing (-Wshadow).
#define PLUMB_TRY_CAT2_(a, b) a##b
#define PLUMB_TRY_CAT_(a, b) PLUMB_TRY_CAT2_(a, b)
#define PLUMB_TRY_NAMED_(expr, r)                      \
  ({                                                   \
    auto&& r = (expr);                                 \
    if (!r) return std::unexpected(r.error());         \
    std::move(r).value();                              \
  })
