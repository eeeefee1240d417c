// plumb-shim: the CNI plugin a runtime executes when plumb runs as a node daemon ("thick", as
// Multus's multus-shim). It hands its CNI environment and its standard descriptors to `plumb
// daemon` over a unix socket (cni-entry/daemon/wire.hpp) and ends as the worker doing the work
// ended: the same exit code, or the same signal. The worker reads the configuration from the
// shim's stdin and writes the result to its stdout, so the shim never copies either.
//
// Without a daemon (nothing listens on the socket), or when the socket's directory could be
// written by others than root and the shim's user (socket_dir.hpp), the shim executes the plumb
// binary beside it with the same environment and descriptors: a node without the daemon behaves
// as one without the shim, only slower (`plumb-shim --probe`, the daemon's probe, does not). It uses the C library alone (its C headers; no C++
// runtime, nothing of plumb's), linked statically: musl's where Debian's musl-dev is installed
// (CMakeLists.txt), whose start-up is a few system calls, where glibc's static start-up takes
// about 0.25 ms of CPU in a VM (its CPU feature and cache detection: dozens of CPUID
// instructions, each a VM exit).
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cni-entry/daemon/socket_dir.hpp"
#include "cni-entry/daemon/wire.hpp"

extern char** environ;

namespace {

namespace wire = plumb::daemon_wire;

/// Appends `s` to `out` as JSON string content (quote, backslash and control bytes escaped).
void append_escaped(char* out, size_t cap, const char* s) {
  size_t n = strlen(out);
  for (; *s != '\0' && n + 7 < cap; ++s) {
    const auto c = static_cast<unsigned char>(*s);
    if (c == '"' || c == '\\') n += static_cast<size_t>(snprintf(out + n, cap - n, "\\%c", c));
    else if (c < 0x20) n += static_cast<size_t>(snprintf(out + n, cap - n, "\\u%04x", c));
    else out[n++] = static_cast<char>(c);
  }
  out[n] = '\0';
}

/// Prints a CNI error (spec section "Error": 4, invalid environment; 11, try again later, for a
/// daemon that stopped; 50, plugin not available, for what a reinstall must fix; the
/// configuration's version is not known here, so the newest) naming `what` and `detail`, and returns the exit code 1.
int fail(const char* what, const char* detail, int code = 50) {
  char msg[3072] = "";
  append_escaped(msg, sizeof msg, what);
  char det[1024] = "";
  append_escaped(det, sizeof det, detail);
  printf("{\"cniVersion\":\"1.1.0\",\"code\":%d,\"msg\":\"%s\",\"details\":\"%s\"}\n", code, msg, det);
  fflush(stdout);
  return 1;
}

/// Executes the plumb binary in the shim's own directory in place of the shim (same arguments,
/// environment and descriptors). Returns only on failure.
int exec_plumb(const char* why) {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return fail("plumb-shim: cannot find its own path to run plumb beside it", why);
  self[n] = '\0';
  char* slash = strrchr(self, '/');
  if (slash == nullptr || static_cast<size_t>(slash - self) + sizeof "/plumb" > sizeof self) return fail("plumb-shim: bad path", self);
  memcpy(slash, "/plumb", sizeof "/plumb");
  char* args[] = {self, nullptr};
  ::execve(self, args, environ);
  char detail[4200];
  snprintf(detail, sizeof detail, "%.1000s; executing %.3000s: %.100s", why, self, strerror(errno));
  return fail("plumb-shim: no plumb daemon answers and plumb beside the shim cannot be executed", detail);
}

/// The request body: the magic, then every CNI_* variable that is set as "NAME=value\0".
/// Returns its length, 0 when it does not fit.
size_t build_request(char* buf, size_t cap) {
  size_t n = sizeof wire::kRequestMagic;
  memcpy(buf, wire::kRequestMagic, n);
  for (const char* name : wire::kCniVariables) {
    const char* v = getenv(name);
    if (v == nullptr) continue;
    const int written = snprintf(buf + n, cap - n, "%s=%s", name, v);  // with its NUL
    if (written < 0 || static_cast<size_t>(written) + 1 > cap - n) return 0;
    n += static_cast<size_t>(written) + 1;
  }
  return n;
}

}  // namespace

/// `plumb-shim --probe`, the thick DaemonSet's liveness and readiness probe: a VERSION request
/// (stdin /dev/null) sent through the socket as a runtime's would be, never falling back to plumb,
/// so exit 0 (the versions on stdout) proves a worker answers. Returns false when stdin cannot be
/// replaced.
bool become_probe() {
  for (const char* name : wire::kCniVariables) unsetenv(name);
  setenv("CNI_COMMAND", "VERSION", 1);
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0) return false;
  const bool ok = ::dup2(null, 0) == 0;
  ::close(null);
  return ok;
}

int main(int argc, char** argv) {
  const bool probe = argc == 2 && strcmp(argv[1], "--probe") == 0;
  if (probe && !become_probe()) return fail("plumb-shim --probe: cannot open /dev/null as stdin", strerror(errno), 4);
  const char* path = getenv(wire::kSocketEnv);
  if (path == nullptr || *path == '\0') path = wire::kDefaultSocket;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof addr.sun_path) return fail("plumb-shim: PLUMB_DAEMON_SOCKET is too long for a unix socket", path, 4);
  memcpy(addr.sun_path, path, strlen(path) + 1);

  // Built before connecting: a request that cannot be sent never reaches the daemon.
  static char body[wire::kMaxRequestBytes];
  const size_t len = build_request(body, sizeof body);
  if (len == 0) return fail("plumb-shim: the CNI environment is larger than a request may be (CNI_ARGS?)", path, 4);

  // A socket in a directory others can write may be anyone's: not connected to. plumb beside the
  // shim does the work then, as when no daemon answers (what whoever can write there could bring
  // about anyway by removing the socket); the daemon itself refuses to start there.
  // A directory that does not exist holds no daemon: plumb runs, without a word.
  char distrust[4096];
  const wire::DirTrust trust = wire::socket_dir_trust(path, ::geteuid(), distrust, sizeof distrust);
  if (trust == wire::DirTrust::kUntrusted) {
    fprintf(stderr, "plumb-shim: not connecting to %.200s: %s; running plumb instead\n", path, distrust);
  }
  if (trust != wire::DirTrust::kTrusted) return exec_plumb(distrust);
  const int sock = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (sock < 0) return fail("plumb-shim: socket(AF_UNIX)", strerror(errno));
  if (::connect(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    char why[4200];
    snprintf(why, sizeof why, "connecting to %.200s: %.100s", path, strerror(errno));
    ::close(sock);
    if (probe) return fail("plumb-shim --probe: no plumb daemon answers", why, 11);
    return exec_plumb(why);
  }
  const int stdio[3] = {0, 1, 2};
  if (!wire::send_with_fds(sock, body, len, stdio, 3)) return fail("plumb-shim: sending the request to the plumb daemon failed", strerror(errno), 11);

  wire::Status st{};
  ssize_t r;
  do r = ::recv(sock, &st, sizeof st, 0);
  while (r < 0 && errno == EINTR);
  if (r != static_cast<ssize_t>(sizeof st)) {
    return fail("plumb-shim: the plumb daemon ended the request without an exit status (stopped, or refused this user)", path, 11);
  }
  if (st.end == wire::End::kSignalled) {
    signal(st.value, SIG_DFL);
    raise(st.value);
    return 128 + st.value;  // a signal whose default is to be ignored
  }
  return st.value;
}
