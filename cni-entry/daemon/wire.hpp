// What plumb-shim (cni-entry/shim/shim.cpp) and `plumb daemon` (daemon.cpp, worker.cpp) say to
// each other on the daemon's unix socket. Header only, with no dependency beyond the C library:
// the shim links nothing of plumb's.
//
// One connection per CNI invocation, SOCK_SEQPACKET (message boundaries, descriptors passed with
// SCM_RIGHTS):
//   shim -> worker  one request: kRequestMagic, then the shim's CNI_* environment entries
//                   ("NAME=value", each NUL-terminated), with the shim's descriptors 0, 1 and 2
//                   attached. The worker reads the network configuration from that stdin and
//                   writes its result or CNI error to that stdout itself.
//   daemon -> shim  one Status, sent by the daemon when it has reaped the worker: the worker's
//                   exit code, or the signal that ended it.
// A shim whose connection closes before its Status was sent has been ended (the runtime killed
// it): the daemon kills the worker with SIGKILL, as the runtime's kill would have ended the plumb
// process doing the work, and the journal undoes what it had begun on the next verb.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace plumb::daemon_wire {

/// Where the daemon listens unless told otherwise (`plumb daemon --socket PATH`).
inline constexpr const char* kDefaultSocket = "/run/plumb/plumb.sock";
/// The environment variable that points a shim at another socket.
inline constexpr const char* kSocketEnv = "PLUMB_DAEMON_SOCKET";
/// First bytes of a request (NUL included): the protocol and its version.
inline constexpr char kRequestMagic[] = "plumb-cni/1";
/// A request larger than this is refused (CNI_ARGS is the only open-ended entry).
inline constexpr size_t kMaxRequestBytes = 64 * 1024;
/// The CNI variables a request carries (CNI spec section 3, "Parameters"); others are ignored.
inline constexpr const char* kCniVariables[] = {"CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS",
                                                "CNI_IFNAME",  "CNI_ARGS",        "CNI_PATH"};

/// How the worker ended.
enum class End : int32_t { kExited = 1, kSignalled = 2 };

/// The daemon's answer: `value` is the exit code (kExited) or the signal number (kSignalled).
struct Status {
  End end;
  int32_t value;
};

/// Sends `len` bytes of `data` as one message with `nfds` (at most 4) descriptors attached
/// (SCM_RIGHTS). Returns whether the whole message went (errno says why not); never SIGPIPE.
inline bool send_with_fds(int sock, const void* data, size_t len, const int* fds, size_t nfds) {
  iovec iov{const_cast<void*>(data), len};
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
  std::memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
  ssize_t sent;
  do sent = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  while (sent < 0 && errno == EINTR);
  return sent == static_cast<ssize_t>(len);
}

}  // namespace plumb::daemon_wire
