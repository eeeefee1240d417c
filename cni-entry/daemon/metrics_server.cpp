// The metrics process (metrics.hpp): prometheus-cpp's registry and text format, civetweb's HTTP
// server. The one file that includes them (CMakeLists.txt compiles it apart).
#include <CivetServer.h>
#include <civetweb.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cni-entry/daemon/metrics.hpp"
#include "engine/k8s/client.hpp"
#include "ipam/whereabouts.hpp"

namespace plumb::daemon::detail {
namespace {

/// What /readyz and /healthz read; written by the thread applying the daemon's messages.
struct Health {
  std::atomic<bool> connected{true};
  std::atomic<bool> listening{false}, workers_up{false}, watching{false}, synced{false};
};

/// Answers `conn` with `status` and `body` (text/plain, or the Prometheus text format).
void reply(mg_connection* conn, int status, const std::string& body, const char* type = "text/plain; charset=utf-8") {
  if (status == 200) {
    mg_send_http_ok(conn, type, static_cast<long long>(body.size()));
    mg_write(conn, body.data(), body.size());
  } else {
    mg_send_http_error(conn, status, "%s", body.c_str());
  }
}

/// The addresses whereabouts can hand out in an IPPool's spec.range: all but the network address
/// (and, IPv4, the broadcast address), as ipam/cluster_config's default range start and end.
double pool_size(const IpPrefix& range) {
  const int host_bits = static_cast<int>(range.max_len()) - range.len;
  return std::max(0.0, std::ldexp(1.0, host_bits) - (range.addr.is_v4() ? 2 : 1));
}

/// The whereabouts IPPools of the daemon's API server (the Kubernetes datastore), listed at each
/// scrape, never on an invocation's path: plumb_ippool_addresses{pool, state="allocated|total"}.
class Pools {
 public:
  explicit Pools(std::string kubeconfig) : kubeconfig_(std::move(kubeconfig)) {}

  /// Appends the pools' family to `out`; nothing without API credentials, or when the list
  /// fails (IPPool CRD absent: 404, or the server away).
  void collect(std::vector<prometheus::MetricFamily>& out) {
    const std::lock_guard lock(mu_);  // civetweb's two threads; the client is not thread-safe
    if (!client_ && !tried_) {
      tried_ = true;
      auto creds = k8s::configured(kubeconfig_);
      if (creds && *creds) client_.emplace(std::move(**creds), k8s::Options{std::chrono::seconds(5), 0});
    }
    if (!client_) return;
    auto pools = client_->list("/apis/whereabouts.cni.cncf.io/v1alpha1/ippools", "list IPPools");
    if (!pools) return;
    prometheus::MetricFamily f{"plumb_ippool_addresses",
                               "Addresses of each whereabouts IPPool (namespace/name) of the API server: allocated, "
                               "and total (what spec.range can hand out)",
                               prometheus::MetricType::Gauge,
                               {}};
    for (const auto& doc : *pools) {
      auto p = ipam::whereabouts::decode_pool(doc, "IPPool");
      if (!p) continue;
      const std::string name = k8s::meta_string(doc, "namespace") + "/" + p->name;
      for (const auto& [state, value] : {std::pair{"allocated", static_cast<double>(p->allocations.size())},
                                         std::pair{"total", pool_size(p->range)}}) {
        prometheus::ClientMetric m;
        m.label = {{"pool", name}, {"state", state}};
        m.gauge.value = value;
        f.metric.push_back(std::move(m));
      }
    }
    out.push_back(std::move(f));
  }

 private:
  std::string kubeconfig_;
  std::mutex mu_;
  bool tried_ = false;
  std::optional<k8s::Client> client_;
};

class MetricsHandler final : public CivetHandler {
 public:
  MetricsHandler(prometheus::Registry& registry, Pools& pools) : registry_(registry), pools_(pools) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    auto families = registry_.Collect();
    pools_.collect(families);
    reply(conn, 200, prometheus::TextSerializer().Serialize(families), "text/plain; version=0.0.4; charset=utf-8");
    return true;
  }

 private:
  prometheus::Registry& registry_;
  Pools& pools_;
};

class HealthHandler final : public CivetHandler {
 public:
  HealthHandler(const Health& health, bool readiness) : health_(health), readiness_(readiness) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    std::string missing;
    if (!health_.connected) missing += "the daemon is gone\n";
    if (readiness_) {
      if (!health_.listening) missing += "the daemon's socket is not listening\n";
      if (!health_.workers_up) missing += "the daemon's warm workers are not all up\n";
      if (health_.watching && !health_.synced) missing += "the watched caches are not synced\n";
    }
    reply(conn, missing.empty() ? 200 : 503, missing.empty() ? "ok\n" : missing);
    return true;
  }

 private:
  const Health& health_;
  bool readiness_;
};

/// The metrics the daemon's messages feed.
class Feed {
 public:
  explicit Feed(prometheus::Registry& r)
      : invocations_(prometheus::BuildCounter()
                         .Name("plumb_daemon_invocations_total")
                         .Help("CNI invocations the daemon's workers ran, by verb and CNI result code (0: success)")
                         .Register(r)),
        durations_(prometheus::BuildHistogram()
                       .Name("plumb_daemon_invocation_duration_seconds")
                       .Help("How long a worker took to run a CNI invocation, by verb")
                       .Register(r)),
        workers_(prometheus::BuildGauge()
                     .Name("plumb_daemon_workers")
                     .Help("The daemon's workers, busy or idle")
                     .Register(r)),
        cache_(prometheus::BuildGauge()
                   .Name("plumb_daemon_cache_synced")
                   .Help("1 when the watched caches (the node's pods, the NADs, the IPAMClaims) have all been listed")
                   .Register(r)),
        requests_(prometheus::BuildCounter()
                      .Name("plumb_daemon_api_requests_total")
                      .Help("The watched caches' lists and watches of the API server, by resource, verb and outcome")
                      .Register(r)),
        request_durations_(
            prometheus::BuildHistogram()
                .Name("plumb_daemon_api_request_duration_seconds")
                .Help("How long the watched caches' lists took (watches: until they ended), by resource and verb")
                .Register(r)),
        worker_requests_(
            prometheus::BuildCounter()
                .Name("plumb_api_requests_total")
                .Help("Requests the daemon's workers made to the API server, by verb, resource and outcome")
                .Register(r)),
        worker_request_durations_(
            prometheus::BuildHistogram()
                .Name("plumb_api_request_duration_seconds")
                .Help("How long the workers' requests to the API server took, by verb and resource")
                .Register(r)),
        etcd_requests_(prometheus::BuildCounter()
                           .Name("plumb_etcd_requests_total")
                           .Help("Requests the daemon's workers made to etcd (cluster IPAM), by operation and outcome")
                           .Register(r)),
        etcd_request_durations_(prometheus::BuildHistogram()
                                    .Name("plumb_etcd_request_duration_seconds")
                                    .Help("How long the workers' requests to etcd took, by operation")
                                    .Register(r)),
        busy_(workers_.Add({{"state", "busy"}})),
        idle_(workers_.Add({{"state", "idle"}})),
        synced_(cache_.Add({})) {}

  void apply(const MetricsUpdate& m, Health& health) {
    const std::string verb(m.verb, strnlen(m.verb, sizeof m.verb));
    const double seconds =
        static_cast<double>(m.kind == MetricsUpdate::kWorkerRequest ? m.request.duration_us : m.duration_us) / 1e6;
    if (m.kind == MetricsUpdate::kInvocation) {
      invocations_.Add({{"verb", verb}, {"code", std::to_string(m.code)}}).Increment();
      durations_.Add({{"verb", verb}}, buckets()).Observe(seconds);
      return;
    }
    if (m.kind == MetricsUpdate::kApiRequest) {
      const std::string resource(m.resource, strnlen(m.resource, sizeof m.resource));
      requests_
          .Add({{"resource", resource},
                {"verb", verb},
                {"outcome", std::string(m.outcome, strnlen(m.outcome, sizeof m.outcome))}})
          .Increment();
      request_durations_.Add({{"resource", resource}, {"verb", verb}}, buckets()).Observe(seconds);
      return;
    }
    if (m.kind == MetricsUpdate::kWorkerRequest) {
      worker_request(m.request, seconds);
      return;
    }
    busy_.Set(m.busy);
    idle_.Set(m.idle);
    synced_.Set(m.synced);
    health.listening = m.listening != 0;
    health.workers_up = m.workers_up != 0;
    health.watching = m.watching != 0;
    health.synced = m.synced != 0;
  }

 private:
  void worker_request(const RequestSample& r, double seconds) {
    const std::string resource(r.resource, strnlen(r.resource, sizeof r.resource));
    const std::string outcome(r.outcome, strnlen(r.outcome, sizeof r.outcome));
    if (r.etcd != 0) {
      etcd_requests_.Add({{"operation", resource}, {"outcome", outcome}}).Increment();
      etcd_request_durations_.Add({{"operation", resource}}, buckets()).Observe(seconds);
      return;
    }
    const std::string verb(r.verb, strnlen(r.verb, sizeof r.verb));
    worker_requests_.Add({{"verb", verb}, {"resource", resource}, {"outcome", outcome}}).Increment();
    worker_request_durations_.Add({{"verb", verb}, {"resource", resource}}, buckets()).Observe(seconds);
  }

  /// The histograms' buckets, seconds.
  static const prometheus::Histogram::BucketBoundaries& buckets() {
    static const prometheus::Histogram::BucketBoundaries b{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                           0.25,  0.5,    1,     2.5,  5,     10,   30};
    return b;
  }
  prometheus::Family<prometheus::Counter>& invocations_;
  prometheus::Family<prometheus::Histogram>& durations_;
  prometheus::Family<prometheus::Gauge>& workers_;
  prometheus::Family<prometheus::Gauge>& cache_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_durations_;
  prometheus::Family<prometheus::Counter>& worker_requests_;
  prometheus::Family<prometheus::Histogram>& worker_request_durations_;
  prometheus::Family<prometheus::Counter>& etcd_requests_;
  prometheus::Family<prometheus::Histogram>& etcd_request_durations_;
  prometheus::Gauge &busy_, &idle_, &synced_;
};

}  // namespace

void metrics_main(int updates, const std::string& bind, const std::string& kubeconfig) {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);  // the daemon's signals are its own
  ::signal(SIGPIPE, SIG_IGN);                  // a scraper that hangs up mid-answer
  prometheus::Registry registry;
  Feed feed(registry);
  Health health;
  Pools pools(kubeconfig);
  MetricsHandler metrics(registry, pools);
  HealthHandler healthz(health, false), readyz(health, true);
  try {
    // Two threads: a scrape and a probe at once; civetweb serves nothing but these three paths.
    CivetServer server(std::vector<std::string>{"listening_ports", bind, "num_threads", "2"});
    server.addHandler("/metrics", metrics);
    server.addHandler("/healthz", healthz);
    server.addHandler("/readyz", readyz);
    (void)::send(updates, "1", 1, MSG_NOSIGNAL);
    MetricsUpdate m;
    for (;;) {
      const ssize_t n = ::recv(updates, &m, sizeof m, 0);
      if (n == static_cast<ssize_t>(sizeof m)) feed.apply(m, health);
      if (n == 0 || (n < 0 && errno != EINTR)) break;
    }
    health.connected = false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plumb daemon: --metrics-bind-address \"%s\": cannot listen: %s\n", bind.c_str(), e.what());
    (void)::send(updates, "0", 1, MSG_NOSIGNAL);
  }
  ::_exit(0);
}

}  // namespace plumb::daemon::detail
