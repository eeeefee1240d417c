// The API phase (bench.hpp phase_api): scenario b's pod (the default network and two NADs) with
// its pod object and NADs served by the Kubernetes API test server
// (tests/support/kube_api_test_server.py, every request held --api-latency ms), running in
// plumb's node namespace. For each latency, one server and one `plumb daemon` watching it
// (--kubeconfig, --node-name: the node's pods and the NADs cached); the ways of kApiWays
// interleaved: plumb on the embedded store (the reference), thick plumb on the watched cache with
// its network-status write, without it (the pod's namespace in systemNamespaces) and with it after
// the answer (statusAfterAnswer), thin plumb (its pod and NADs GET per ADD), and the floors. What
// the server saw of each ADD is counted from its request log: GETs, the status PATCH, the Events,
// and for thick plumb when its last Event arrived after the shim's answer (the worker's time spent
// after it).
#include <rapidjson/document.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "bench/bench.hpp"
#include "engine/kernel/addr.hpp"
#include "engine/kernel/link.hpp"
#include "engine/netlink/socket.hpp"

namespace bench {

namespace fs = std::filesystem;

namespace {

constexpr const char* kNode = "bench-node";
constexpr const char* kToken = "plumb-bench-token";
constexpr const char* kPodPath = "/api/v1/namespaces/default/pods/";
constexpr const char* kNadPath = "/apis/k8s.cni.cncf.io/v1/namespaces/default/network-attachment-definitions/";
constexpr const char* kEventsPath = "/apis/events.k8s.io/v1/namespaces/default/events";
/// Scenario b's attachments: eth0, net1, net2 (one Event each).
constexpr int kAttachments = 3;
/// Bounds of the waits on the server (a watch sending a pod, the Events' arrival).
constexpr int64_t kWaitNs = 10'000'000'000;

/// `v` as JSON text (a string member's value).
std::string quoted(const std::string& v) {
  rapidjson::Value s(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
  return json_dump(s);
}

std::string nad_object(const std::string& name, const std::string& config) {
  return R"({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition", "metadata": {"name": ")" +
         name + R"(", "namespace": "default", "uid": "nad-)" + name +
         R"(", "resourceVersion": "10"}, "spec": {"config": )" + quoted(config) + "}}";
}

std::string pod_uid(const Pod& p) { return "uid-" + p.name; }

std::string pod_object(const Pod& p) {
  const std::string networks =
      R"([{"name": "sec-bridge", "interface": "net1"}, {"name": "sec-macvlan", "interface": "net2"}])";
  return R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": ")" + p.name +
         R"(", "namespace": "default", "uid": ")" + pod_uid(p) +
         R"(", "resourceVersion": "100", "annotations": {"k8s.v1.cni.cncf.io/networks": )" + quoted(networks) +
         R"(}}, "spec": {"nodeName": ")" + kNode + R"("}, "status": {"phase": "Pending"}})";
}

/// The network-status annotation of the server's copy of the pod ("" if none).
std::string stored_network_status(const std::string& object) {
  rapidjson::Document d;
  d.Parse(object.c_str());
  if (d.HasParseError() || !d.IsObject() || !d.HasMember("metadata") || !d["metadata"].IsObject()) return {};
  const auto& md = d["metadata"];
  if (!md.HasMember("annotations") || !md["annotations"].IsObject()) return {};
  const auto& a = md["annotations"];
  auto it = a.FindMember("k8s.v1.cni.cncf.io/network-status");
  return it != a.MemberEnd() && it->value.IsString() ? it->value.GetString() : std::string();
}

/// Without a network-status to read: net1's and net2's addresses are the pod's addresses in their
/// networks' subnets (at least one each).
void expect_from_pod_addresses(Pod& p) {
  auto ns = must(plumb::netns::Netns::open("/run/netns/" + p.netns), "open pod netns");
  auto nl = must(plumb::netlink::Socket::open_in(ns.fd()), "open rtnetlink in pod");
  auto links = must(plumb::link::list(nl), "list pod links");
  auto addrs = must(plumb::addr::list(nl), "list pod addresses");
  for (int net = 2; net <= 3; ++net) {
    const std::string ifname = net == 2 ? "net1" : "net2";
    const auto subnet = must(plumb::IpPrefix::parse(kSubnet[net]), "subnet");
    auto l =
        std::find_if(links.begin(), links.end(), [&](const plumb::link::LinkInfo& li) { return li.name == ifname; });
    if (l == links.end())
      throw std::runtime_error(std::string(way_name(p.way)) + " ADD of " + p.cid + ": no " + ifname);
    for (const auto& a : addrs) {
      if (a.index == l->index && subnet.contains(a.prefix.addr)) p.expect[ifname].push_back(a.prefix.addr);
    }
  }
}

}  // namespace

void Bench::start_api(int latency_ms) {
  const std::string tag = std::to_string(latency_ms) + "ms";
  api_.dir = scratch_ + "/api-" + tag;
  api_.log_read = api_.conn_read = api_.events_read = 0;
  fs::create_directories(api_.dir + "/objects");
  write_text(api_.dir + "/tokens", std::string(kToken) + "\n");
  write_text(plumb_.dir + "/api-token", std::string(kToken) + "\n");
  const std::string ipam_p = plumb_.dir + "/ipam";
  const std::string nads = api_.dir + "/objects/network-attachment-definitions/default/";
  write_text(nads + "sec-bridge.json", nad_object("sec-bridge", sec_bridge_json(ipam_p)));
  write_text(nads + "sec-macvlan.json", nad_object("sec-macvlan", sec_macvlan_json(ipam_p)));
  if (access(o_.kube_api_server.c_str(), R_OK) != 0) {
    throw std::runtime_error("the Kubernetes API test server " + o_.kube_api_server +
                             " cannot be read (--kube-api-server)");
  }
  {
    InNetns in(*plumb_.ns);  // 127.0.0.1 is the node's loopback, where plumb's daemon and workers run
    api_.proc.start(
        {"/usr/bin/python3", o_.kube_api_server, "--dir", api_.dir, "--latency-ms", std::to_string(latency_ms)},
        {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, api_.dir + "/server.log");
  }
  std::string port;
  for (int i = 0; i < 600 && (port = read_text(api_.dir + "/port")).empty(); ++i) ::usleep(50'000);
  if (port.empty())
    throw std::runtime_error("the Kubernetes API test server did not start in 30 s: " +
                             read_text(api_.dir + "/server.log"));
  api_.kubeconfig = plumb_.dir + "/kubeconfig-" + tag;
  write_text(api_.kubeconfig,
             "apiVersion: v1\nkind: Config\ncurrent-context: bench\nclusters:\n- name: bench\n  cluster:\n    server: "
             "https://127.0.0.1:" +
                 port + "\n    certificate-authority: " + api_.dir +
                 "/tls/ca.crt\ncontexts:\n- name: bench\n  context:\n    cluster: bench\n    user: plumb\nusers:\n- "
                 "name: plumb\n  user:\n    tokenFile: " +
                 plumb_.dir + "/api-token\n");
  start_daemon(api_daemon_, plumb_.dir + "/daemon-api-" + tag, {"--kubeconfig", api_.kubeconfig, "--node-name", kNode});
  // Measure only once both watches run (their lists done): every ADD then finds its NADs cached.
  const int64_t t0 = now_ns();
  auto watching = [&](const std::string& what) {
    return read_text(api_.dir + "/requests.log").find("GET " + what + "?watch=1") != std::string::npos;
  };
  while (!(watching("/api/v1/pods") && watching("/apis/k8s.cni.cncf.io/v1/network-attachment-definitions"))) {
    if (now_ns() - t0 > kWaitNs) {
      throw std::runtime_error("plumb daemon did not watch the API server's pods and NADs within 10 s: " +
                               read_text(api_daemon_.log));
    }
    ::usleep(10'000);
  }
  api_.events_read = read_text(api_.dir + "/watch-events.log").size();
  (void)api_new_requests();  // the lists and watches are not any ADD's
  (void)api_new_connections();
}

void Bench::stop_api() {
  api_daemon_.proc.stop();
  api_.proc.stop();
}

void Bench::api_put_pod(const Pod& p) {
  write_text(api_.dir + "/objects/pods/default/" + p.name + ".json", pod_object(p));
}

void Bench::api_wait_watched(const std::vector<Pod>& pods) {
  const int64_t t0 = now_ns();
  for (const Pod& p : pods) {
    const std::string line = "ADDED pods default/" + p.name + " ";
    while (read_text(api_.dir + "/watch-events.log").find(line, api_.events_read) == std::string::npos) {
      if (now_ns() - t0 > kWaitNs)
        throw std::runtime_error("the API server's pod watch did not send " + p.name + " within 10 s");
      ::usleep(2'000);
    }
  }
  api_.events_read = read_text(api_.dir + "/watch-events.log").size();
  ::usleep(20'000);  // the cache process's frame to the daemon (a miss would show as a GET)
}

namespace {

/// The whole lines `path` got since `offset` (moved past them).
std::vector<std::string> new_lines(const std::string& path, size_t& offset) {
  const std::string all = read_text(path);
  const size_t end = all.rfind('\n');
  std::vector<std::string> out;
  if (end == std::string::npos || end < offset) return out;
  for (size_t pos = offset; pos <= end;) {
    const size_t nl = all.find('\n', pos);
    out.push_back(all.substr(pos, nl - pos));
    pos = nl + 1;
  }
  offset = end + 1;
  return out;
}

}  // namespace

std::vector<std::string> Bench::api_new_requests() { return new_lines(api_.dir + "/requests.log", api_.log_read); }

int Bench::api_new_connections() {
  return static_cast<int>(new_lines(api_.dir + "/connections.log", api_.conn_read).size());
}

std::vector<std::string> Bench::api_env(const std::string& verb, const Pod& p) const {
  std::vector<std::string> env = cni_env(verb, p, "eth0");
  for (auto& e : env) {
    if (e.starts_with("PLUMB_DAEMON_SOCKET=")) e = "PLUMB_DAEMON_SOCKET=" + api_daemon_.socket;
    if (e.starts_with("CNI_ARGS=")) e += ";K8S_POD_UID=" + pod_uid(p);
  }
  return env;
}

std::string Bench::api_config(const Pod& p, const std::string& prev_result) const {
  std::string c = plumb_config(p, prev_result);
  c.pop_back();  // its closing brace
  c += R"(, "kubeconfig": ")" + api_.kubeconfig + R"(", "apiTimeoutSeconds": 10)";
  if (p.way == Way::ApiThickNoStatus) c += R"(, "systemNamespaces": ["kube-system", "default"])";
  if (p.way == Way::ApiThickStatusAfter) c += R"(, "statusAfterAnswer": true)";
  return c + "}";
}

Cost Bench::add_api(Pod& p, ApiCounts& n) {
  Cost c;
  const auto env = api_env("ADD", p);
  const std::string config = api_config(p, "");
  Proc r;
  const int64_t started = now_ns();
  if (p.way == Way::ApiThin) {
    r = spawn({o_.plumb}, env, config);
    c.add(r);
  } else {
    r = run_shim(api_daemon_, env, config, c);
  }
  const int64_t answered = started + r.wall_ns;  // the shim reaped (its worker's usage read after)
  if (!r.ok()) throw std::runtime_error(std::string(way_name(p.way)) + " ADD of " + p.cid + " failed: " + r.describe());
  p.plumb_result = r.out;
  // What the server saw; thick plumb's Events (and api-thick-status-after's status write, made
  // before them) come after its answer: wait for them.
  const bool later = p.way != Way::ApiThin;
  for (bool first = true; first || (later && n.events < kAttachments); first = false) {
    if (now_ns() - answered > kWaitNs) {
      throw std::runtime_error(std::string(way_name(p.way)) + " ADD of " + p.cid + ": " + std::to_string(n.events) +
                               " of " + std::to_string(kAttachments) +
                               " Events within 10 s; daemon's log: " + read_text(api_daemon_.log));
    }
    if (!first) ::usleep(100);
    for (const std::string& line : api_new_requests()) {
      n.gets += line.starts_with("GET " + std::string(kPodPath) + p.name + " ") ||
                line.starts_with("GET " + std::string(kNadPath));
      n.status += line.starts_with("PATCH " + std::string(kPodPath) + p.name + "/status ");
      n.events += line.starts_with("POST " + std::string(kEventsPath) + " ");
    }
    if (later && n.events >= kAttachments) n.events_ns = now_ns() - answered;
  }
  n.connections = api_new_connections();
  const bool want_status = p.way != Way::ApiThickNoStatus;
  if ((n.status > 0) != want_status) {
    throw std::runtime_error(std::string(way_name(p.way)) + " ADD of " + p.cid + " made " + std::to_string(n.status) +
                             " network-status write(s) (expected " + (want_status ? "one" : "none") + ")");
  }
  if (want_status) {
    expect_from_network_status(stored_network_status(read_text(api_.dir + "/objects/pods/default/" + p.name + ".json")),
                               p.name, p);
  } else {
    rapidjson::Document res;
    res.Parse(r.out.c_str());
    if (res.HasParseError()) throw std::runtime_error("plumb ADD printed no JSON result: " + r.out);
    expect_from_result(res, p.expect, "plumb ADD");
    expect_from_pod_addresses(p);
  }
  check_result_eth0(p, r.out);
  return c;
}

Cost Bench::del_api(Pod& p) {
  Cost c;
  const auto env = api_env("DEL", p);
  const std::string config = api_config(p, p.plumb_result);
  Proc r;
  if (p.way == Way::ApiThin) {
    r = spawn({o_.plumb}, env, config);
    c.add(r);
  } else {
    r = run_shim(api_daemon_, env, config, c);
  }
  if (!r.ok()) throw std::runtime_error(std::string(way_name(p.way)) + " DEL of " + p.cid + " failed: " + r.describe());
  (void)api_new_requests();  // a DEL's requests are no ADD's
  (void)api_new_connections();
  return c;
}

void Bench::api_iteration(int latency_ms, int it, bool warmup) {
  const std::vector<Way> ways = order(it, std::vector<Way>(std::begin(kApiWays), std::end(kApiWays)));
  // The API ways' pods go to the server together before the iteration (untimed), so the watch
  // has sent each to the daemon's cache before its ADD.
  std::vector<Pod> pods, on_server;
  for (Way w : ways) {
    pods.push_back(new_pod('b', w, "api"));
    make_sandbox(pods.back());
    if (is_api(w)) {
      api_put_pod(pods.back());
      on_server.push_back(pods.back());
    }
  }
  api_wait_watched(on_server);
  for (Pod& p : pods) {
    progress_.set("api: " + std::to_string(latency_ms) + " ms per request, iteration " + std::to_string(it + 1) + "/" +
                  std::to_string(o_.warmup + o_.api_samples) + " (" + std::to_string(o_.warmup) + " warm-up), " +
                  way_name(p.way));
    Sample s{"api", 'b', p.way, 0, it - o_.warmup, warmup, {}, {}, latency_ms, {}};
    {
      InNetns in(*plumb_.ns);
      s.add = is_api(p.way) ? add_api(p, s.api) : add(p);
    }
    verify_added(p);
    {
      InNetns in(*plumb_.ns);
      s.del = del(p);
    }
    verify_deleted(p);
    drop_sandbox(p);
    record(s);
  }
}

void Bench::phase_api() {
  const int64_t t0 = now_ns();
  for (int latency : o_.api_latencies) {
    progress_.set(
        "api: starting the API test server (" + std::to_string(latency) + " ms per request) and plumb's daemon on it",
        true);
    start_api(latency);
    for (int it = 0; it < o_.warmup + o_.api_samples; ++it) api_iteration(latency, it, it < o_.warmup);
    stop_api();
  }
  phase_secs_["api"] = static_cast<double>(now_ns() - t0) / 1e9;
  progress_.line("api: done in " + fmt(0, phase_secs_["api"]) + " s");
}

}  // namespace bench
