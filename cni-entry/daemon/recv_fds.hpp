// The daemon side's receive of wire.hpp's messages, with their descriptors: the worker's (a shim's
// request, the daemon's hand-over of a connection) and the bench's warm floor, which speaks the
// same protocol. Apart from wire.hpp because the shim, built against musl's headers, never
// receives descriptors, and musl's CMSG_NXTHDR compares signed with unsigned.
#pragma once

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

namespace plumb::daemon_wire {

/// Receives one message of up to `cap` bytes into `buf` with up to `max_fds` (at most 4)
/// descriptors attached (SCM_RIGHTS, received close-on-exec; any beyond `max_fds` are closed).
/// Returns the byte count (0 at end of stream, -1 on error with errno, or for a truncated
/// message or control part); `nfds` gets how many descriptors `fds` holds, which the caller
/// owns even when -1 is returned.
inline ssize_t recv_with_fds(int sock, char* buf, size_t cap, int* fds, int max_fds, int& nfds) {
  iovec iov{buf, cap};
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  nfds = 0;
  if (n < 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (nfds < max_fds)
        fds[nfds++] = fd;
      else
        ::close(fd);
    }
  }
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) return -1;
  return n;
}

}  // namespace plumb::daemon_wire
