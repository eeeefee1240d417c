// cni-entry/daemon/metrics_requests: what a worker's observed request is counted as — the verb and
// resource from the API server's path (a collection's GET is a LIST, a subresource keeps its
// name), etcd's operation from grpc-gateway's path, the outcome from the HTTP status.
#include <doctest/doctest.h>

#include <string>

#include "cni-entry/daemon/metrics.hpp"

using plumb::daemon::RequestSample;
using plumb::daemon::detail::request_sample;

namespace {

std::string field(const char* f) { return std::string(f); }

}  // namespace

TEST_CASE("a worker's API server request is counted by verb, resource and outcome from its path and status") {
  const std::string server = "https://127.0.0.1:6443";
  RequestSample r = request_sample("api", "GET", server + "/api/v1/namespaces/default/pods/web", 200, 1500);
  CHECK(r.etcd == 0);
  CHECK(field(r.verb) == "GET");
  CHECK(field(r.resource) == "pods");
  CHECK(field(r.outcome) == "ok");
  CHECK(r.duration_us == 1500);
  r = request_sample("api", "PATCH", server + "/api/v1/namespaces/default/pods/web/status", 409, 1);
  CHECK(field(r.resource) == "pods/status");
  CHECK(field(r.outcome) == "conflict");
  r = request_sample(
      "api", "GET", server + "/apis/whereabouts.cni.cncf.io/v1alpha1/namespaces/kube-system/ippools/x?limit=1", 404, 1);
  CHECK(field(r.resource) == "ippools");
  CHECK(field(r.outcome) == "notfound");
  r = request_sample("api", "GET", server + "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1", 503, 1);
  CHECK(field(r.verb) == "LIST");
  CHECK(field(r.resource) == "pods");
  CHECK(field(r.outcome) == "failed");
  r = request_sample("api", "POST", server + "/apis/events.k8s.io/v1/namespaces/default/events", 403, 1);
  CHECK(field(r.verb) == "POST");
  CHECK(field(r.resource) == "events");
  CHECK(field(r.outcome) == "refused");
  r = request_sample("api", "GET", server + "/api/v1/namespaces/default", 0, 1);
  CHECK(field(r.resource) == "namespaces");
  CHECK(field(r.outcome) == "unreachable");
}

TEST_CASE("a worker's etcd request is counted by its operation") {
  const RequestSample r = request_sample("etcd", "POST", "http://127.0.0.1:2379/v3/kv/txn", 200, 7);
  CHECK(r.etcd == 1);
  CHECK(field(r.resource) == "kv/txn");
  CHECK(field(r.verb).empty());
  CHECK(field(r.outcome) == "ok");
}
