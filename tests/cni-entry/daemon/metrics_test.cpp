// cni-entry/daemon/metrics (+ metrics_server): `plumb daemon --metrics-bind-address` serves
// /metrics in the Prometheus text format, /healthz and /readyz, scraped over the loopback of the
// test's own network namespace: the invocations by verb and CNI code with a latency histogram per
// verb, the workers busy and idle, the watched caches' sync state; ready only once the caches are
// synced.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "engine/base/http.hpp"
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
  REQUIRE(eventually([&] { return get("/readyz").status != 0; }));
  const auto not_ready = get("/readyz");
  CHECK(not_ready.status == 503);
  CHECK_MESSAGE(not_ready.body.find("the watched caches are not synced") != std::string::npos, not_ready.body);
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
