// kubelet's pod-resources API (kubelet.hpp): Get, else List, over gRPC on the unix socket.
#include "cni-entry/source/kubelet.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <span>

#include "cni-entry/source/podresources/codec_abi.h"
#include "engine/base/grpc.hpp"
#include "engine/base/http.hpp"

#if PLUMB_STATIC_BINARY
// The static build links the codec in (cni-entry/source/podresources/CMakeLists.txt), its and
// libprotobuf-lite's static initialisers deferred to the first call (cni-entry/deferred_init.hpp).
#include "cni-entry/deferred_init.hpp"
extern "C" const plumb_podresources_codec* plumb_podresources_entry();
#else
#include "engine/base/embedded_lib.hpp"
// The bytes of plumb-podresources.so (cni-entry/source/podresources/embed.S.in).
extern "C" const unsigned char plumb_podresources_so_start[];
extern "C" const unsigned char plumb_podresources_so_end[];
#endif

namespace plumb::source {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kCodecName = "plumb-podresources.so";
constexpr const char* kAuthority = "http://localhost";  // names nothing: the socket is the server
constexpr const char* kGet = "/v1.PodResourcesLister/Get";
constexpr const char* kList = "/v1.PodResourcesLister/List";

/// The codec, loaded on the first call.
Result<const plumb_podresources_codec*> codec() {
  static std::once_flag once;
  static Result<const plumb_podresources_codec*> loaded = fail(cni_code::kInternal, "not loaded");
  std::call_once(once, [] {
    loaded = [&]() -> Result<const plumb_podresources_codec*> {
#if PLUMB_STATIC_BINARY
      deferred_init::run();
      const plumb_podresources_codec* c = plumb_podresources_entry();
#else
      std::span<const unsigned char> image(plumb_podresources_so_start, plumb_podresources_so_end);
      void* handle = PLUMB_TRY(embedded::open(kCodecName, image));
      void* entry = PLUMB_TRY(embedded::symbol(handle, kCodecName, PLUMB_PODRESOURCES_ENTRY));
      const plumb_podresources_codec* c = reinterpret_cast<plumb_podresources_entry_fn>(entry)();
#endif
      if (c == nullptr || c->abi != PLUMB_PODRESOURCES_ABI) {
        return fail(cni_code::kInternal, std::string(kCodecName) + " has another interface version than plumb");
      }
      return c;
    }();
  });
  return loaded;
}

void collect(void* user, const char* resource, size_t resource_len, const char* id, size_t id_len) {
  (*static_cast<PodDevices*>(user))[std::string(resource, resource_len)].emplace_back(id, id_len);
}

/// The error of a call the timeout ended: code kTryAgainLater, sys_errno ETIMEDOUT.
std::unexpected<Error> timed_out(const std::string& peer, const KubeletOptions& opts, std::string details = {}) {
  return std::unexpected(Error{cni_code::kTryAgainLater, ETIMEDOUT,
                               peer + " did not answer within " + std::to_string(opts.timeout.count()) +
                                   " ms (plumb config podResourcesTimeoutSeconds)",
                               std::move(details)});
}

/// One attempt of `method` with `request`, bounded by what is left until `deadline`. Errors:
/// timed_out() when the time is up (before or during the call), the transport's otherwise.
Result<grpc::Reply> call(const KubeletOptions& opts, Clock::time_point deadline, const char* method,
                         const std::string& request) {
  const std::string peer = "kubelet's pod-resources API (socket " + opts.socket + ")";
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return timed_out(peer, opts);
  http::Options o;
  o.timeout = left;
  o.unix_socket = opts.socket;
  o.http2_prior_knowledge = true;
  o.peer = peer;
  http::Client client(std::move(o));
  auto reply = grpc::unary(client, kAuthority, method, request);
  if (!reply && reply.error().cni_code == cni_code::kTryAgainLater &&
      (reply.error().sys_errno == ETIMEDOUT || Clock::now() >= deadline)) {
    return timed_out(peer, opts, reply.error().details);
  }
  return reply;
}

/// A decoded answer: kPodAbsent counts as "no devices".
Status decoded(int rc, const char* method, const PodRef& pod) {
  if (rc == PLUMB_PR_MALFORMED) {
    return fail(cni_code::kIo, std::string("kubelet's answer to ") + method + " for pod " + pod.namespace_ + "/" +
                                   pod.name + " is not a valid pod-resources message");
  }
  return {};
}

template <class Encode>
std::string encode(Encode&& fn) {
  std::string buf(fn(nullptr, 0), '\0');
  fn(buf.data(), buf.size());
  return buf;
}

Status bad_status(const grpc::Reply& r, const char* method) {
  return fail(cni_code::kIo, std::string("kubelet answered ") + method + " with gRPC status " + std::to_string(r.status),
              r.message);
}

}  // namespace

Result<PodDevices> pod_devices(const KubeletOptions& opts, const PodRef& pod) {
  struct stat st {};
  if (::stat(opts.socket.c_str(), &st) != 0) {
    return fail(cni_code::kTryAgainLater, "kubelet's pod-resources socket " + opts.socket + " cannot be used (" +
                                              std::strerror(errno) + "; plumb config podResourcesSocket)");
  }
  const plumb_podresources_codec* c = PLUMB_TRY(codec());
  const auto deadline = Clock::now() + opts.timeout;
  const std::string& ns = pod.namespace_;
  const std::string& name = pod.name;
  PodDevices out;
  auto get_req = encode([&](char* b, size_t n) { return c->encode_get(ns.data(), ns.size(), name.data(), name.size(), b, n); });
  auto got = call(opts, deadline, kGet, get_req);
  // A Get the timeout ended is final: the transport's clock may end it a little before ours, and
  // a List then would only be cut off.
  if (!got && (got.error().sys_errno == ETIMEDOUT || Clock::now() >= deadline)) return std::unexpected(got.error());
  if (got && got->status == grpc::code::kOk) {
    int rc = c->decode_get(got->payload.data(), got->payload.size(), ns.data(), ns.size(), name.data(), name.size(),
                           collect, &out);
    PLUMB_TRY(decoded(rc, kGet, pod));
    if (rc == PLUMB_PR_OK) {
      for (auto& [res, ids] : out) std::sort(ids.begin(), ids.end());
      return out;
    }
  }
  // Get is only a shortcut: whatever kept it from answering for the pod (Unimplemented from a
  // kubelet before 1.27, Unknown with the gate off, a stream reset with that answer), List decides.
  auto list_req = encode([&](char* b, size_t n) { return c->encode_list(b, n); });
  grpc::Reply r = PLUMB_TRY(call(opts, deadline, kList, list_req));
  if (r.status != grpc::code::kOk) return std::unexpected(bad_status(r, kList).error());
  int rc = c->decode_list(r.payload.data(), r.payload.size(), ns.data(), ns.size(), name.data(), name.size(), collect, &out);
  PLUMB_TRY(decoded(rc, kList, pod));
  for (auto& [res, ids] : out) std::sort(ids.begin(), ids.end());
  return out;
}

}  // namespace plumb::source
