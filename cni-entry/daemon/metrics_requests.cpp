// A worker's requests to the API server and to etcd, counted for the daemon's metrics process
// (metrics.hpp): collected in memory by the process's HTTP request observer, carried to the daemon
// in the message that already says the invocation is done.
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "cni-entry/daemon/metrics.hpp"
#include "engine/base/http.hpp"

namespace plumb::daemon::detail {
namespace {

/// Requests not sent yet; a worker makes a handful per invocation, so this never fills in
/// practice (one that does drops the newest).
std::array<RequestSample, 256> g_pending;
size_t g_count = 0;

std::string_view outcome_of(long status) {
  if (status == 0) return "unreachable";
  if (status >= 200 && status < 300) return "ok";
  if (status == 404) return "notfound";
  if (status == 409) return "conflict";
  if (status >= 400 && status < 500) return "refused";
  return "failed";
}

/// The path of `url` without its scheme, host and query, split at '/' (no empty parts).
std::vector<std::string_view> path_parts(std::string_view url) {
  if (const size_t scheme = url.find("://"); scheme != std::string_view::npos) {
    const size_t slash = url.find('/', scheme + 3);
    url = slash == std::string_view::npos ? std::string_view() : url.substr(slash);
  }
  url = url.substr(0, url.find('?'));
  std::vector<std::string_view> out;
  for (size_t at = 0; at < url.size();) {
    const size_t next = std::min(url.find('/', at), url.size());
    if (next > at) out.push_back(url.substr(at, next - at));
    at = next + 1;
  }
  return out;
}

void observed(const http::Observed& o) {
  if (g_count == g_pending.size()) return;
  g_pending[g_count++] = request_sample(o.as, o.method, o.url, o.status,
                                        std::chrono::duration_cast<std::chrono::microseconds>(o.took).count());
}

}  // namespace

RequestSample request_sample(std::string_view as, std::string_view method, std::string_view url, long status,
                             int64_t us) {
  RequestSample r;
  r.duration_us = us;
  put(r.outcome, outcome_of(status));
  auto parts = path_parts(url);
  if (as == "etcd") {  // grpc-gateway: /v3/<service>/<method>
    r.etcd = 1;
    if (parts.size() >= 3) put(r.resource, std::string(parts[1]) + "/" + std::string(parts[2]));
    return r;
  }
  // /api/v1/... or /apis/<group>/<version>/..., then [namespaces/<ns>/]<resource>[/<name>[/<subresource>]]
  size_t at = !parts.empty() && parts[0] == "api" ? 2 : 3;
  if (parts.size() > at + 2 && parts[at] == "namespaces") at += 2;
  std::string resource = parts.size() > at ? std::string(parts[at]) : std::string();
  if (parts.size() > at + 2) resource += "/" + std::string(parts[at + 2]);
  put(r.resource, resource);
  put(r.verb, method == "GET" && parts.size() == at + 1 ? std::string_view("LIST") : method);
  return r;
}

void observe_requests() { http::set_request_observer(observed); }

bool send_with_requests(int control, const void* head, size_t size) {
  const size_t n = std::min(g_count, kMaxRequestSamples);
  const iovec parts[2] = {{const_cast<void*>(head), size}, {g_pending.data(), n * sizeof(RequestSample)}};
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(parts);
  msg.msg_iovlen = n > 0 ? 2 : 1;
  const bool whole = ::sendmsg(control, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(size + n * sizeof(RequestSample));
  std::move(g_pending.begin() + static_cast<std::ptrdiff_t>(n),
            g_pending.begin() + static_cast<std::ptrdiff_t>(g_count), g_pending.begin());
  g_count -= n;
  return whole;
}

}  // namespace plumb::daemon::detail
