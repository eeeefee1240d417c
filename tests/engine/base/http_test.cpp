// engine/base/http: the one HTTP client against a small local HTTP server (python3's
// http.server, started by the test on the node's loopback): retries on 503 then success, a
// retry budget that runs out with an error naming the URL, per-attempt timeouts, no retry on
// 404/409, request and response fields, keep-alive connection reuse, TLS settings (against the
// Kubernetes API test server's certificates), and libcurl loaded only by a client's first
// request (checked in a fresh process; base64 never loads libcrypto).
#include "engine/base/http.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/base/base64.hpp"
#include "tests/support/kube_api_server.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;
using namespace std::chrono_literals;
using plumb::test::Node;
using plumb::test::read_file;
using plumb::test::write_file;

namespace {

// The server. Paths:
//   /flaky/<name>/<k>  503 (Retry-After: 1) for the first k requests to it, then 200 "ok"
//   /status/<code>     always <code>
//   /slow/<seconds>    200 after sleeping
//   /drop              closes the connection without answering
//   /echo              200 with the method, Content-Type, X-Test header and body; X-Echo: yes
// Every request is logged as "METHOD PATH CLIENT-PORT" to <dir>/requests.log.
constexpr const char* kServer = R"PY(
import http.server, os, sys, threading, time
d = sys.argv[1]
hits = {}
lock = threading.Lock()

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def answer(self, code, body, headers=()):
        data = body.encode()
        self.send_response(code)
        for k, v in headers: self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode() if n else ""
        with open(os.path.join(d, "requests.log"), "a") as f:
            f.write("%s %s %d\n" % (self.command, self.path, self.client_address[1]))
        p = self.path.split("/")
        if p[1] == "flaky":
            with lock:
                hits[p[2]] = hits.get(p[2], 0) + 1
                h = hits[p[2]]
            if h <= int(p[3]): return self.answer(503, "busy %d" % h, [("Retry-After", "1")])
            return self.answer(200, "ok")
        if p[1] == "status": return self.answer(int(p[2]), "status " + p[2])
        if p[1] == "slow":
            time.sleep(float(p[2]))
            return self.answer(200, "slow")
        if p[1] == "drop":
            self.close_connection = True
            return
        if p[1] == "echo":
            return self.answer(200, "%s|%s|%s|%s" % (self.command, self.headers.get("Content-Type", ""),
                                                     self.headers.get("X-Test", ""), body), [("X-Echo", "yes")])
        self.answer(404, "no such path")
    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = handle_any

s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
s.daemon_threads = True
with open(os.path.join(d, "port.tmp"), "w") as f: f.write(str(s.server_address[1]))
os.rename(os.path.join(d, "port.tmp"), os.path.join(d, "port"))
s.serve_forever()
)PY";

/// The test server, running in the current network namespace until destroyed.
class TestServer {
 public:
  explicit TestServer(std::string dir) : dir_(std::move(dir)) {
    write_file(dir_ + "/server.py", kServer);
    auto p = plumb::test::sh("python3 " + dir_ + "/server.py " + dir_ + " >" + dir_ +
                             "/server.log 2>&1 </dev/null & echo $!");
    REQUIRE(p.exit_code == 0);
    pid_ = std::stoi(p.out);
    for (int i = 0; i < 200 && port_ == 0; ++i) {
      if (std::string s = read_file(dir_ + "/port"); !s.empty()) {
        port_ = std::stoi(s);
        break;
      }
      std::this_thread::sleep_for(50ms);
    }
    REQUIRE_MESSAGE(port_ != 0, "the HTTP test server did not start: " << read_file(dir_ + "/server.log"));
  }
  ~TestServer() { ::kill(pid_, SIGKILL); }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  /// The logged requests: "METHOD PATH CLIENT-PORT".
  std::vector<std::string> requests() const {
    std::vector<std::string> out;
    std::istringstream in(read_file(dir_ + "/requests.log"));
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

http::RetryPolicy policy(int attempts, std::chrono::milliseconds backoff, std::chrono::milliseconds backoff_max,
                         std::chrono::milliseconds budget = 0ms) {
  http::RetryPolicy p;
  p.max_attempts = attempts;
  p.backoff = backoff;
  p.backoff_max = backoff_max;
  p.budget = budget;
  return p;
}

/// A quick retry policy for tests: `attempts` attempts, 50 ms back-off doubling to 200 ms.
http::Options quick(int attempts, std::chrono::milliseconds timeout = 2000ms) {
  http::Options o;
  o.timeout = timeout;
  o.retry = policy(attempts, 50ms, 200ms);
  return o;
}

http::Request make(const std::string& method, const std::string& url, std::vector<std::string> headers = {}) {
  http::Request r;
  r.method = method;
  r.url = url;
  r.headers = std::move(headers);
  return r;
}
http::Request get(const std::string& url) { return make("GET", url); }

std::chrono::milliseconds since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
}

#if !PLUMB_STATIC_BINARY
bool mapped(const std::string& lib) { return read_file("/proc/self/maps").find(lib) != std::string::npos; }
bool libcurl_mapped() { return mapped("libcurl"); }
#endif

}  // namespace

TEST_CASE("retry(): back-off doubles to its cap, RetryNow does not wait, the budget bounds the time") {
  http::RetryPolicy p = policy(4, 20ms, 40ms);
  int n = 0;
  auto t0 = std::chrono::steady_clock::now();
  auto stats = http::retry(p, [&] { return ++n < 10 ? http::Verdict::Retry : http::Verdict::Done; });
  CHECK(n == 4);
  CHECK(stats.attempts == 4);
  CHECK(stats.exhausted);
  CHECK(since(t0) >= 20ms + 40ms + 40ms);

  // RetryNow: with a 1 s back-off, two waits would take 3 s; the bound leaves a loaded machine
  // room (a 20 ms bound is within its scheduling delays).
  n = 0;
  t0 = std::chrono::steady_clock::now();
  stats = http::retry(policy(4, 1000ms, 2000ms), [&] { return ++n < 3 ? http::Verdict::RetryNow : http::Verdict::Done; });
  CHECK(n == 3);
  CHECK_FALSE(stats.exhausted);
  CHECK(since(t0) < 900ms);

  // At least one attempt even with the smallest budget; the budget cuts a long back-off short.
  http::RetryPolicy budget = policy(100, 1000ms, 1000ms, 150ms);
  n = 0;
  t0 = std::chrono::steady_clock::now();
  stats = http::retry(budget, [&] { return ++n, http::Verdict::Retry; });
  CHECK(n == 1);
  CHECK(stats.exhausted);
  CHECK(since(t0) >= 140ms);
  CHECK(since(t0) < 900ms);  // the back-off not cut short would take 1000 ms
}

TEST_CASE("a 503 is retried with back-off until the server answers") {
  Node node;
  TestServer srv(node.dir());
  http::Client c(quick(4));
  auto t0 = std::chrono::steady_clock::now();
  auto r = c.request(get(srv.url("/flaky/a/2")));
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().text()));
  CHECK(r->status == 200);
  CHECK(r->body == "ok");
  CHECK(c.attempts() == 3);
  CHECK(srv.requests().size() == 3);
  CHECK(since(t0) >= 50ms + 100ms);

  // The budget runs out on a transient status: the last answer is returned as it is.
  auto busy = c.request(get(srv.url("/flaky/b/10")));
  REQUIRE(busy.has_value());
  CHECK(busy->status == 503);
  CHECK(busy->body == "busy 4");
  CHECK(c.attempts() == 3 + 4);
}

TEST_CASE("404, 409 and other non-transient statuses are answers, never retried") {
  Node node;
  TestServer srv(node.dir());
  http::Client c(quick(4));
  for (long code : {400L, 401L, 404L, 409L, 422L}) {
    CAPTURE(code);
    auto r = c.request(get(srv.url("/status/" + std::to_string(code))));
    REQUIRE(r.has_value());
    CHECK(r->status == code);
  }
  CHECK(c.attempts() == 5);
  CHECK(srv.requests().size() == 5);
  CHECK(http::reason_phrase(409) == "Conflict");
  CHECK(http::transient_status(429));
  CHECK_FALSE(http::transient_status(501));
}

TEST_CASE("an unreachable server: the retry budget runs out with an error naming the URL") {
  Node node;
  TestServer srv(node.dir());
  http::Options o = quick(3);
  o.peer = "the test server";
  http::Client c(o);
  // Nothing listens on port 1: connection refused, every attempt.
  auto refused = c.request(make("PATCH", "http://127.0.0.1:1/x/y"));
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().cni_code == cni_code::kTryAgainLater);
  CHECK_MESSAGE(refused.error().msg.find("PATCH http://127.0.0.1:1/x/y: the test server cannot be reached") == 0,
                refused.error().msg);
  CHECK(refused.error().msg.find("(3 attempts, 2000 ms timeout each)") != std::string::npos);
  CHECK_FALSE(refused.error().details.empty());  // libcurl's own words
  CHECK(c.attempts() == 3);

  // A server that hangs up without answering is transient too.
  auto dropped = c.request(get(srv.url("/drop")));
  REQUIRE_FALSE(dropped.has_value());
  CHECK(dropped.error().cni_code == cni_code::kTryAgainLater);
  CHECK(srv.requests().size() == 3);

  // send() is one attempt, and says nothing about attempts.
  auto once = c.send(get("http://127.0.0.1:1/"));
  REQUIRE_FALSE(once.has_value());
  CHECK(once.error().msg.find("attempts") == std::string::npos);
}

TEST_CASE("each attempt is bounded by the timeout; a slow server costs attempts x timeout + back-off") {
  Node node;
  TestServer srv(node.dir());
  http::Client c(quick(2, 300ms));
  auto t0 = std::chrono::steady_clock::now();
  auto r = c.request(get(srv.url("/slow/5")));
  auto took = since(t0);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kTryAgainLater);
  CHECK_MESSAGE(r.error().msg.find("GET " + srv.url("/slow/5")) == 0, r.error().msg);
  CHECK(r.error().msg.find("2 attempts, 300 ms timeout each") != std::string::npos);
  CHECK(took >= 600ms + 50ms);
  CHECK(took < 4000ms);  // one attempt without its timeout would take 5 s
  // A request within the timeout goes through on the same client.
  auto fast = c.request(get(srv.url("/slow/0")));
  REQUIRE(fast.has_value());
  CHECK(fast->status == 200);
}

TEST_CASE("method, body, content type, extra headers; wanted response headers; keep-alive reuse") {
  Node node;
  TestServer srv(node.dir());
  http::Client c(quick(1));
  http::Request post = make("POST", srv.url("/echo"), {"X-Test: one"});
  post.body = R"({"a": 1})";
  post.content_type = "application/json";
  post.want_headers = {"x-echo", "Retry-After", "Content-Length"};
  auto r = c.request(post);
  REQUIRE(r.has_value());
  CHECK(r->body == R"(POST|application/json|one|{"a": 1})");
  CHECK(r->headers.at("x-echo") == "yes");
  CHECK(r->headers.at("content-length") == std::to_string(r->body.size()));
  CHECK(r->headers.count("retry-after") == 0);

  post.method = "PATCH";
  post.body.clear();
  post.want_headers.clear();
  r = c.request(post);
  REQUIRE(r.has_value());
  CHECK(r->body == "PATCH|application/json|one|");
  CHECK(r->headers.empty());
  r = c.request(get(srv.url("/echo")));
  REQUIRE(r.has_value());
  CHECK(r->body == "GET|||");

  // All three came over one connection: the same client port.
  auto log = srv.requests();
  REQUIRE(log.size() == 3);
  auto port = [](const std::string& line) { return line.substr(line.rfind(' ') + 1); };
  CHECK(port(log[0]) == port(log[1]));
  CHECK(port(log[1]) == port(log[2]));
  // Another client is another connection.
  http::Client other(quick(1));
  REQUIRE(other.request(get(srv.url("/echo"))).has_value());
  CHECK(port(srv.requests().at(3)) != port(log[0]));

  // A header value with a line break is refused before anything is sent.
  auto bad = c.request(make("GET", srv.url("/echo"), {"Authorization: Bearer a\r\nX-Evil: 1"}));
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().cni_code == cni_code::kInvalidConfig);
  CHECK(bad.error().msg.find("Bearer") == std::string::npos);  // the value is not repeated
  CHECK(srv.requests().size() == 4);
}

TEST_CASE("TLS: CA as a file or as PEM data, a wrong CA is a TLS configuration error, insecure-skip-verify") {
  Node node;
  plumb::test::KubeApiServer api(node.dir() + "/api");
  const std::string url = api.url() + "/api/v1/namespaces/default/pods/x";  // 401 without a token: an answer
  auto with = [&](auto set) {
    http::Options o = quick(1);
    set(o.tls);
    o.peer = "the API server";
    return http::Client(o).request(get(url));
  };
  auto by_file = with([&](http::Tls& t) { t.ca_file = api.tls("ca.crt"); });
  REQUIRE_MESSAGE(by_file.has_value(), (by_file ? "" : by_file.error().text()));
  CHECK(by_file->status == 401);
  auto by_pem = with([&](http::Tls& t) { t.ca_pem = read_file(api.tls("ca.crt")); });
  REQUIRE(by_pem.has_value());
  CHECK(by_pem->status == 401);
  auto insecure = with([](http::Tls& t) { t.insecure_skip_verify = true; });
  REQUIRE(insecure.has_value());
  CHECK(insecure->status == 401);

  auto wrong = with([&](http::Tls& t) { t.ca_file = api.tls("client.crt"); });
  REQUIRE_FALSE(wrong.has_value());
  CHECK(wrong.error().cni_code == cni_code::kInvalidConfig);
  CHECK_MESSAGE(wrong.error().msg == "GET " + url + ": TLS with the API server failed", wrong.error().msg);
  auto system_cas = with([](http::Tls&) {});  // the test CA is not among the system's
  REQUIRE_FALSE(system_cas.has_value());
  CHECK(system_cas.error().cni_code == cni_code::kInvalidConfig);
}

// Run only in the child process the next case starts (--no-skip): a fresh process, so nothing
// has loaded libcurl before.
// The dynamic build (PLUMB_STATIC=OFF) dlopen()s libcurl (engine/base/lazy_libs.cpp); the static
// binary links it and has nothing to load.
#if !PLUMB_STATIC_BINARY
TEST_CASE("http child: libcurl is loaded by the first request, not before" * doctest::skip()) {
  const char* url = std::getenv("PLUMB_HTTP_URL");
  const char* netns = std::getenv("PLUMB_HTTP_NETNS");
  REQUIRE(url != nullptr);
  REQUIRE(netns != nullptr);
  // test_main put this process in a namespace of its own: join the parent's node, where the
  // server listens.
  int fd = ::open(netns, O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::setns(fd, CLONE_NEWNET) == 0);
  ::close(fd);
  CHECK_FALSE(libcurl_mapped());
  http::Client c(quick(1));
  CHECK_FALSE(libcurl_mapped());  // constructing a client loads nothing
  CHECK(base64::decode(base64::encode("kubeconfig data"), "test").value() == "kubeconfig data");
  CHECK_FALSE(mapped("libcrypto"));  // nor does base64
  auto r = c.request(get(url));
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().text()));
  CHECK(r->status == 200);
  CHECK(libcurl_mapped());
}

TEST_CASE("libcurl is loaded lazily: a fresh process maps it only after a client's first request") {
  Node node;
  TestServer srv(node.dir());
  auto p = plumb::test::run(
      {"/proc/self/exe", "--test-case=http child: libcurl*", "--no-skip=true", "--no-version=true"},
      {{"PLUMB_HTTP_URL", srv.url("/echo")}, {"PLUMB_HTTP_NETNS", "/proc/" + std::to_string(::getpid()) + "/ns/net"}});
  CHECK_MESSAGE(p.exit_code == 0, p.out << p.err);
  CHECK_MESSAGE(p.out.find("1 passed") != std::string::npos, p.out);
  CHECK(srv.requests().size() == 1);
}
#endif
