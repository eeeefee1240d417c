// The clients a process keeps across invocations (engine/k8s/kept_clients.cpp): one per
// credentials and options while keeping, a new one per call otherwise, none shared with a
// forked child. No request is made (a client connects on its first request); the connections
// themselves are counted against the API test server in tests/cni-entry/source/kube_test.cpp.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/k8s/client.hpp"

using namespace plumb;

namespace {
k8s::Credentials creds(const std::string& server) {
  k8s::Credentials c;
  c.server = server;
  c.token = "tok";
  return c;
}
}  // namespace

TEST_CASE("kept clients: one per credentials and options while keeping, a few kept, none inherited by a fork") {
  const auto a = creds("https://192.0.2.1:6443");
  const auto b = creds("https://192.0.2.2:6443");
  k8s::Options other;
  other.retries = 1;

  // Not keeping: a new client each time.
  CHECK(k8s::client_for(a, {}) != k8s::client_for(a, {}));

  k8s::keep_clients(true);
  const auto first = k8s::client_for(a, {});
  CHECK(k8s::client_for(a, {}) == first);
  const auto by_b = k8s::client_for(b, {});
  const auto with_other = k8s::client_for(a, other);
  CHECK(by_b != first);
  CHECK(with_other != first);
  CHECK(k8s::client_for(a, {}) == first);  // the others did not replace it
  CHECK(k8s::client_for(b, {}) == by_b);
  auto changed = a;
  changed.token_file = "/run/token";
  CHECK(k8s::client_for(changed, {}) != first);

  // Past the few kept, the least recently used goes: b and a with `other` were used least lately.
  CHECK(k8s::client_for(a, {}) == first);
  (void)k8s::client_for(creds("https://192.0.2.3:6443"), {});
  (void)k8s::client_for(creds("https://192.0.2.4:6443"), {});
  CHECK(k8s::client_for(a, {}) == first);
  CHECK(k8s::client_for(b, {}) != by_b);

  // A forked child never gets its parent's client; the parent keeps it.
  const k8s::Client* parents = first.get();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(k8s::client_for(a, {}).get() != parents ? 0 : 1);
  int status = -1;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  CHECK(k8s::client_for(a, {}) == first);

  k8s::keep_clients(false);  // dropped; a client per call again
  CHECK(k8s::client_for(a, {}) != first);
  CHECK(k8s::client_for(a, {}) != k8s::client_for(a, {}));
}
