// What plumb-shim (cni-entry/shim/shim.cpp) and `plumb daemon` (daemon.cpp, worker.cpp) say to
// each other on the daemon's unix socket. Header only, with no dependency beyond the C library
// (its C headers, not libstdc++'s: the shim is built against musl's, CMakeLists.txt): the shim
// links nothing of plumb's.
//
// One connection per CNI invocation, SOCK_SEQPACKET (message boundaries, descriptors passed with
// SCM_RIGHTS):
//   shim -> worker  one request: kRequestMagic, then the shim's CNI_* environment entries
//                   ("NAME=value", each NUL-terminated), with the shim's descriptors 0, 1 and 2
//                   attached. The worker reads the network configuration from that stdin and
//                   writes its result or CNI error to that stdout itself.
//   worker -> shim  one Status once the invocation is over: its exit code. The worker sends it
//                   itself, right after telling the daemon (its Done), so that no wake-up of the
//                   daemon lies between the end of the work and the shim's exit.
//   daemon -> shim  one Status for a worker that died in the invocation (before its Done): the
//                   signal that ended it, or its exit code.
// A shim whose connection closes before its Status was sent has been ended (the runtime killed
// it): the daemon kills the worker with SIGKILL, as the runtime's kill would have ended the plumb
// process doing the work, and the journal undoes what it had begun on the next verb. A worker
// that dies between its Done and its Status leaves the shim with a closed connection and no
// Status: the shim's CNI error code 11 (try again later); the invocation itself was complete.
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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

/// Sends `st` to a shim on `conn` (MSG_NOSIGNAL: a shim that is gone is no error here). Returns
/// whether it went.
inline bool send_status(int conn, Status st) {
  ssize_t sent;
  do sent = ::send(conn, &st, sizeof st, MSG_NOSIGNAL);
  while (sent < 0 && errno == EINTR);
  return sent == static_cast<ssize_t>(sizeof st);
}

/// Sends `len` bytes of `data` as one message with `nfds` (at most 4) descriptors attached
/// (SCM_RIGHTS). Returns whether the whole message went (errno says why not); never SIGPIPE.
inline bool send_with_fds(int sock, const void* data, size_t len, const int* fds, size_t nfds) {
  iovec iov{const_cast<void*>(data), len};
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  // size_t in glibc, socklen_t in musl (as POSIX has it).
  msg.msg_controllen = static_cast<decltype(msg.msg_controllen)>(CMSG_SPACE(nfds * sizeof(int)));
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = static_cast<decltype(c->cmsg_len)>(CMSG_LEN(nfds * sizeof(int)));
  memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
  ssize_t sent;
  do sent = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  while (sent < 0 && errno == EINTR);
  return sent == static_cast<ssize_t>(len);
}

}  // namespace plumb::daemon_wire
