// cni-entry/daemon/metrics (+ metrics_server): `plumb daemon --metrics-bind-address` serves
// /metrics in the Prometheus text format, /healthz and /readyz, scraped over the loopback of the
// test's own network namespace: the invocations by verb and CNI code with a latency histogram per
// verb, the workers busy and idle, the watched caches' sync state; ready only once the caches are
// synced; the workers' requests to the API server and to etcd; a metrics process that dies is
// started again, after a back-off that doubles while it keeps dying.
#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "engine/base/http.hpp"
#include "tests/support/etcd_cluster.hpp"
#include "tests/support/kube_cluster.hpp"
#include "tests/support/plumb_daemon.hpp"
#include "tests/support/pod_fixture.hpp"

using plumb::test::Daemon;
using plumb::test::eventually;
using plumb::test::KubeCluster;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;

namespace {

const std::string kBind = "127.0.0.1:9091";

/// GET http://<kBind><path>: the answer (status 0 when nothing answers).
plumb::http::Response get(const std::string& path) {
  plumb::http::Client client(plumb::http::Options{});
  plumb::http::Request req;
  req.url = "http://" + kBind + path;
  auto r = client.send(req);
  return r ? *r : plumb::http::Response{};
}

/// The value of the sample `series` (name and labels exactly as the text format writes them, the
/// labels sorted by name) in the scrape `text`; -1 when absent.
double sample(const std::string& text, const std::string& series) {
  const std::string line = "\n" + series + " ";
  const size_t at = ("\n" + text).find(line);
  if (at == std::string::npos) return -1;
  return std::strtod(text.c_str() + at + line.size() - 1, nullptr);
}

/// The sum of the samples of the scrape `text` whose line starts with `prefix` (a metric's name
/// and "{") and holds every one of `labels` ("verb=\"GET\""); 0 when none.
double sum_of(const std::string& text, const std::string& prefix, const std::vector<std::string>& labels) {
  double total = 0;
  for (const auto& line : plumb::test::lines_of(text)) {
    if (!line.starts_with(prefix)) continue;
    bool all = true;
    for (const auto& l : labels) all = all && line.find(l) != std::string::npos;
    if (all) total += std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
  }
  return total;
}

/// The daemon's child named `comm` (its metrics process is "plumb-metrics"), or -1.
pid_t child_named(const Daemon& d, const std::string& comm) {
  for (pid_t p : d.workers()) {
    if (plumb::test::read_file("/proc/" + std::to_string(p) + "/comm") == comm + "\n") return p;
  }
  return -1;
}

/// The back-offs the daemon announced in its log `text`, in order: the N of each "the metrics
/// process ended; started again in N ms".
std::vector<long> announced_backoffs(const std::string& text) {
  const std::string mark = "the metrics process ended; started again in ";
  std::vector<long> out;
  for (const auto& line : plumb::test::lines_of(text)) {
    const size_t at = line.find(mark);
    if (at != std::string::npos) out.push_back(std::strtol(line.c_str() + at + mark.size(), nullptr, 10));
  }
  return out;
}

/// Polls `cond` every 50 ms for at most `limit`: a bound on a wait, not a measure of speed.
bool within(std::chrono::seconds limit, const std::function<bool()>& cond) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return cond();
}

}  // namespace

TEST_CASE("/metrics counts the invocations by verb and CNI code, with a latency histogram per verb, and the workers") {
  Node node;
  PodFixture fx(node);
  Daemon d({"--workers", "2", "--metrics-bind-address", kBind});
  const std::map<std::string, std::string> via = {{"PLUMB_DAEMON_SOCKET", d.socket}};
  const std::string shim = plumb::test::plumb_shim_binary(), conf = fx.config();
  for (const std::string name : {"p1", "p2"}) {
    fx.add_pod("default", name, "");
    Proc add = fx.run_with(shim, via, "ADD", "c-" + name, node.add_netns(name), "default", name, conf);
    REQUIRE_MESSAGE(add.exit_code == 0, add.out << add.err);
  }
  Proc del = fx.run_with(shim, via, "DEL", "c-p1", "/run/netns/p1", "default", "p1", conf);
  REQUIRE_MESSAGE(del.exit_code == 0, del.out << del.err);
  // A configuration that does not decode: CNI code 6.
  Proc bad = fx.run_with(shim, via, "ADD", "c-p3", node.add_netns("p3"), "default", "p3",
                         R"({"cniVersion": "1.0.0", "name": )");
  REQUIRE(bad.exit_code == 1);

  std::string text;
  REQUIRE_MESSAGE(eventually([&] {
                    text = get("/metrics").body;
                    return sample(text, R"(plumb_daemon_invocations_total{code="6",verb="ADD"})") == 1;
                  }),
                  text);
  CHECK(sample(text, R"(plumb_daemon_invocations_total{code="0",verb="ADD"})") == 2);
  CHECK(sample(text, R"(plumb_daemon_invocations_total{code="0",verb="DEL"})") == 1);
  CHECK(sample(text, R"(plumb_daemon_invocation_duration_seconds_count{verb="ADD"})") == 3);
  CHECK(sample(text, R"(plumb_daemon_invocation_duration_seconds_count{verb="DEL"})") == 1);
  // Every invocation is in the last bucket, and an ADD takes more than no time at all.
  CHECK(sample(text, R"(plumb_daemon_invocation_duration_seconds_bucket{verb="ADD",le="+Inf"})") == 3);
  CHECK(sample(text, R"(plumb_daemon_invocation_duration_seconds_sum{verb="ADD"})") > 0);
  CHECK(text.find("# TYPE plumb_daemon_invocation_duration_seconds histogram") != std::string::npos);
  // All served: both warm workers idle again.
  REQUIRE(eventually([&] {
    text = get("/metrics").body;
    return sample(text, R"(plumb_daemon_workers{state="idle"})") == 2;
  }));
  CHECK(sample(text, R"(plumb_daemon_workers{state="busy"})") == 0);
  // Without watched caches there is nothing to sync, and the daemon is ready.
  CHECK(sample(text, "plumb_daemon_cache_synced") == 0);
  CHECK(get("/readyz").status == 200);
  CHECK(get("/healthz").status == 200);
  CHECK(get("/other").status == 404);
}

TEST_CASE("/readyz says not ready until the watched caches are synced, then ready; /healthz answers all along") {
  Node node;
  KubeCluster c(node);
  c.api.stop();  // nothing to list yet
  Daemon d({"--workers", "1", "--kubeconfig", c.kubeconfig, "--node-name", "node-1", "--metrics-bind-address", kBind});
  // The metrics process may answer before the daemon has told it the caches exist (its reasons
  // are then the socket and the workers): the caches' reason must come while the API is down.
  REQUIRE(eventually([&] { return get("/readyz").status != 0; }));
  std::string reasons;
  CHECK_MESSAGE(eventually([&] {
                  const auto not_ready = get("/readyz");
                  reasons = not_ready.body;
                  return not_ready.status == 503 &&
                         not_ready.body.find("the watched caches are not synced") != std::string::npos;
                }),
                reasons);
  CHECK(get("/healthz").status == 200);
  CHECK(sample(get("/metrics").body, "plumb_daemon_cache_synced") == 0);
  c.api.restart();
  REQUIRE_MESSAGE(eventually([&] { return get("/readyz").status == 200; }), plumb::test::read_file(d.log));
  CHECK(get("/readyz").body == "ok\n");
  const std::string text = get("/metrics").body;
  CHECK(sample(text, "plumb_daemon_cache_synced") == 1);
  // The lists the cache made: refused while the server was away, then one of each collection.
  CHECK_MESSAGE(sample(text, R"(plumb_daemon_api_requests_total{outcome="error",resource="pods",verb="list"})") >= 1,
                text);
  CHECK(sample(text, R"(plumb_daemon_api_requests_total{outcome="ok",resource="pods",verb="list"})") == 1);
  CHECK(sample(text, R"(plumb_daemon_api_requests_total{outcome="ok",resource="nads",verb="list"})") == 1);
  CHECK(sample(text, R"(plumb_daemon_api_request_duration_seconds_count{resource="pods",verb="list"})") >= 2);
}

TEST_CASE("--metrics-bind-address that is not HOST:PORT, or taken, stops the daemon with a message naming it") {
  Node node;
  plumb::test::TempDir dir;
  for (const std::string bad : {"9091", "localhost:9091", "127.0.0.1:0", "127.0.0.1:70000"}) {
    CAPTURE(bad);
    Proc p = plumb::test::run(
        {plumb::test::plumb_binary(), "daemon", "--socket", dir.path + "/s", "--metrics-bind-address", bad}, {}, "");
    CHECK(p.exit_code == 1);
    CHECK(p.err.find("--metrics-bind-address \"" + bad + "\"") != std::string::npos);
  }
  Daemon first({"--metrics-bind-address", kBind});
  Proc taken = plumb::test::run(
      {plumb::test::plumb_binary(), "daemon", "--socket", dir.path + "/s", "--metrics-bind-address", kBind}, {}, "");
  CHECK(taken.exit_code == 1);
  CHECK_MESSAGE(taken.err.find("cannot listen") != std::string::npos, taken.err);
}

TEST_CASE("/metrics counts the workers' requests to the API server and to etcd by outcome, with their latency") {
  Node node;
  KubeCluster c(node);
  plumb::test::EtcdCluster etcd(1, 32579);
  REQUIRE_MESSAGE(etcd.ok(), etcd.log(0));
  // blue: whereabouts on the API server's IPPools; red: whereabouts on etcd.
  c.add_nad(
      "default", "blue",
      R"({"cniVersion": "0.4.0", "type": "bridge", "bridge": "br-blue", "ipam": {"type": "whereabouts", "range": "192.0.2.0/24"}})");
  c.add_nad(
      "default", "red",
      R"({"cniVersion": "0.4.0", "type": "bridge", "bridge": "br-red", "ipam": {"type": "whereabouts", "range": "198.51.100.0/24", "etcd_endpoints": )" +
          etcd.endpoints_json() + "}}");
  c.add_pod("default", "web", "uid-1", {{"k8s.v1.cni.cncf.io/networks", "blue,red"}});
  // No watched caches (no node name): the pod and the NADs are read with GETs; the kubeconfig
  // is where /metrics lists the IPPools.
  Daemon d({"--workers", "1", "--kubeconfig", c.kubeconfig, "--metrics-bind-address", kBind});
  Proc add = c.run("ADD", "ctr-1", node.add_netns("web"), "default", "web", "uid-1",
                   c.config(R"("whereaboutsNamespace": "kube-system")"), {{"PLUMB_DAEMON_SOCKET", d.socket}},
                   plumb::test::plumb_shim_binary());
  REQUIRE_MESSAGE(add.exit_code == 0, add.out << add.err << plumb::test::read_file(d.log));
  INFO("requests: " << plumb::test::read_file(c.api.dir() + "/requests.log"));

  std::string text;
  // The Events are posted after the shim's answer: counted with the worker's second Done.
  REQUIRE_MESSAGE(eventually([&] {
                    text = get("/metrics").body;
                    return sum_of(text, "plumb_api_requests_total{", {R"(resource="events")", R"(verb="POST")"}) >= 3;
                  }),
                  text);
  CHECK(sample(text, R"(plumb_api_requests_total{outcome="ok",resource="pods",verb="GET"})") >= 1);
  CHECK(sample(text,
               R"(plumb_api_requests_total{outcome="ok",resource="network-attachment-definitions",verb="GET"})") == 2);
  CHECK(sample(text, R"(plumb_api_requests_total{outcome="ok",resource="pods/status",verb="PATCH"})") == 1);
  // One AddedInterface per attachment: the default network, blue, red.
  CHECK(sample(text, R"(plumb_api_requests_total{outcome="ok",resource="events",verb="POST"})") == 3);
  // The cluster IPAM of blue: the IPPool read (absent at first) and created.
  CHECK(sample(text, R"(plumb_api_requests_total{outcome="notfound",resource="ippools",verb="GET"})") == 1);
  CHECK(sample(text, R"(plumb_api_requests_total{outcome="ok",resource="ippools",verb="POST"})") == 1);
  CHECK(sample(text, R"(plumb_api_request_duration_seconds_count{resource="pods/status",verb="PATCH"})") == 1);
  CHECK(sample(text, R"(plumb_api_request_duration_seconds_sum{resource="pods/status",verb="PATCH"})") > 0);
  // red's allocation in etcd: a read and a transaction at least.
  CHECK(sum_of(text, "plumb_etcd_requests_total{", {R"(outcome="ok")"}) >= 2);
  CHECK(sum_of(text, "plumb_etcd_requests_total{", {R"(operation="kv/txn")", R"(outcome="ok")"}) >= 1);
  CHECK(sum_of(text, "plumb_etcd_request_duration_seconds_count{", {}) >= 2);
  // blue's IPPool as the scrape lists it: one address allocated of the 254 of a /24.
  const std::string pool = R"(pool="kube-system/192.0.2.0-24")";
  CHECK(sum_of(text, "plumb_ippool_addresses{", {pool, R"(state="allocated")"}) == 1);
  CHECK(sum_of(text, "plumb_ippool_addresses{", {pool, R"(state="total")"}) == 254);
}

TEST_CASE("a metrics process that dies is started again by the daemon; meanwhile its port is closed, so not ready") {
  Node node;
  Daemon d({"--workers", "1", "--metrics-bind-address", kBind});
  REQUIRE(eventually([&] { return get("/readyz").status == 200; }));
  const pid_t first = child_named(d, "plumb-metrics");
  REQUIRE(first > 0);
  REQUIRE(::kill(first, SIGKILL) == 0);
  // Forked again after a back-off (a second at first): until then nothing answers a probe.
  REQUIRE(eventually([&] { return get("/readyz").status == 0; }));
  REQUIRE_MESSAGE(eventually([&] { return get("/readyz").status == 200; }), plumb::test::read_file(d.log));
  const pid_t second = child_named(d, "plumb-metrics");
  CHECK(second > 0);
  CHECK(second != first);
  // The new process has the daemon's state again.
  CHECK(sample(get("/metrics").body, R"(plumb_daemon_workers{state="idle"})") == 1);
  CHECK(plumb::test::read_file(d.log).find("the metrics process ended") != std::string::npos);
}

TEST_CASE("a metrics process that dies again and again is restarted after a back-off doubling from 1 s up to 30 s") {
  Node node;
  Daemon d({"--workers", "1", "--metrics-bind-address", kBind});
  REQUIRE(eventually([&] { return get("/readyz").status == 200; }));
  // Each process is killed as soon as it is up, well within the minute that would reset the
  // back-off; the daemon logs the wait before the next start. The sixth wait would be 32 s
  // doubled: it is held at 30 s (the last process is not waited for).
  const std::vector<long> expected = {1000, 2000, 4000, 8000, 16000, 30000};
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    const pid_t metrics = child_named(d, "plumb-metrics");
    REQUIRE(metrics > 0);
    REQUIRE(::kill(metrics, SIGKILL) == 0);
    REQUIRE_MESSAGE(eventually([&] { return announced_backoffs(plumb::test::read_file(d.log)).size() == i + 1; }),
                    plumb::test::read_file(d.log));
    if (i + 1 == expected.size()) break;
    // The next process, after the announced wait (bounded generously: the machine may be loaded).
    const auto limit = std::chrono::seconds(expected[i] / 1000 + 20);
    REQUIRE_MESSAGE(within(limit,
                           [&] {
                             const pid_t next = child_named(d, "plumb-metrics");
                             return next > 0 && next != metrics && get("/readyz").status == 200;
                           }),
                    plumb::test::read_file(d.log));
  }
  INFO(plumb::test::read_file(d.log));
  CHECK(announced_backoffs(plumb::test::read_file(d.log)) == expected);
}
