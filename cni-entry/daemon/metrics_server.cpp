// The metrics process (metrics.hpp): prometheus-cpp's registry and text format, civetweb's HTTP
// server. The one file that includes them (CMakeLists.txt compiles it apart).
#include <CivetServer.h>
#include <civetweb.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "cni-entry/daemon/metrics.hpp"

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

class MetricsHandler final : public CivetHandler {
 public:
  explicit MetricsHandler(prometheus::Registry& registry) : registry_(registry) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    reply(conn, 200, prometheus::TextSerializer().Serialize(registry_.Collect()),
          "text/plain; version=0.0.4; charset=utf-8");
    return true;
  }

 private:
  prometheus::Registry& registry_;
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
        busy_(workers_.Add({{"state", "busy"}})),
        idle_(workers_.Add({{"state", "idle"}})),
        synced_(cache_.Add({})) {}

  void apply(const MetricsUpdate& m, Health& health) {
    static const prometheus::Histogram::BucketBoundaries kBuckets{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                                  0.25,  0.5,    1,     2.5,  5,     10,   30};
    const std::string verb(m.verb, strnlen(m.verb, sizeof m.verb));
    const double seconds = static_cast<double>(m.duration_us) / 1e6;
    if (m.kind == MetricsUpdate::kInvocation) {
      invocations_.Add({{"verb", verb}, {"code", std::to_string(m.code)}}).Increment();
      durations_.Add({{"verb", verb}}, kBuckets).Observe(seconds);
      return;
    }
    if (m.kind == MetricsUpdate::kApiRequest) {
      const std::string resource(m.resource, strnlen(m.resource, sizeof m.resource));
      requests_
          .Add({{"resource", resource},
                {"verb", verb},
                {"outcome", std::string(m.outcome, strnlen(m.outcome, sizeof m.outcome))}})
          .Increment();
      request_durations_.Add({{"resource", resource}, {"verb", verb}}, kBuckets).Observe(seconds);
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
  prometheus::Family<prometheus::Counter>& invocations_;
  prometheus::Family<prometheus::Histogram>& durations_;
  prometheus::Family<prometheus::Gauge>& workers_;
  prometheus::Family<prometheus::Gauge>& cache_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_durations_;
  prometheus::Gauge &busy_, &idle_, &synced_;
};

}  // namespace

void metrics_main(int updates, const std::string& bind) {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);  // the daemon's signals are its own
  ::signal(SIGPIPE, SIG_IGN);                  // a scraper that hangs up mid-answer
  prometheus::Registry registry;
  Feed feed(registry);
  Health health;
  MetricsHandler metrics(registry);
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
