// The three ways of attaching a pod (bench.hpp): plumb as a runtime runs it, the reference
// plugins as Multus delegates to them, and the kernel floor; and the checks every ADD and DEL
// must pass before it counts.
#include <net/if.h>

#include <rapidjson/document.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "bench/bench.hpp"
#include "engine/kernel/addr.hpp"
#include "engine/kernel/link.hpp"
#include "engine/netlink/socket.hpp"

namespace fs = std::filesystem;

namespace bench {

using plumb::IpAddr;

std::vector<std::string> Bench::cni_env(const std::string& verb, const Pod& p, const std::string& ifname) const {
  return {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
          "PLUMB_DAEMON_SOCKET=" + daemon_.socket,
          "CNI_COMMAND=" + verb,
          "CNI_CONTAINERID=" + p.cid,
          "CNI_NETNS=/run/netns/" + p.netns,
          "CNI_IFNAME=" + ifname,
          "CNI_PATH=" + o_.cni_path,
          "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + p.name +
              ";K8S_POD_INFRA_CONTAINER_ID=" + p.cid};
}

std::string Bench::plumb_config(const Pod& p, const std::string& prev_result) const {
  const char s = p.scenario == 'b' ? 'a' : p.scenario;  // b's default network is a's (x, y: the user's conflists)
  std::string c = R"({"cniVersion": "1.0.0", "name": "plumb", "type": "plumb", "clusterNetwork": ")" + plumb_.dir + "/default-" +
                  s + R"(.conflist", "storeDir": ")" + plumb_.dir + R"(/store", "stateDir": ")" + plumb_.dir +
                  R"(/state", "confDir": ")" + plumb_.dir + R"(/net.d", "bpffsDir": ")" + bpffs_ +
                  R"(", "capabilities": {"portMappings": true, "bandwidth": true})";
  if (has_runtime_config(p.scenario)) c += R"(, "runtimeConfig": )" + runtime_config(p);
  if (!prev_result.empty()) c += R"(, "prevResult": )" + prev_result;
  return c + "}";
}

Cost Bench::add(Pod& p) {
  switch (p.way) {
    case Way::ApiThin:
    case Way::ApiThick:
    case Way::ApiThickNoStatus:
    case Way::ApiThickStatusAfter: {
      ApiCounts ignored;
      return add_api(p, ignored);
    }
    case Way::Plumb: return add_plumb(p);
    case Way::Reference: return add_reference(p);
    case Way::Floor:
    case Way::FloorNaive:
    case Way::FloorWarm:
      return add_floor(p);
  }
  return {};
}

Cost Bench::del(Pod& p) {
  switch (p.way) {
    case Way::ApiThin:
    case Way::ApiThick:
    case Way::ApiThickNoStatus:
    case Way::ApiThickStatusAfter:
      return del_api(p);
    case Way::Plumb: return del_plumb(p);
    case Way::Reference: return del_reference(p);
    case Way::Floor:
    case Way::FloorNaive:
    case Way::FloorWarm:
      return del_floor(p);
  }
  return {};
}

void expect_from_result(const rapidjson::Value& r, std::map<std::string, std::vector<IpAddr>>& expect,
                        const std::string& what, bool ips_required) {
  if (!ips_required && r.IsObject() && !r.HasMember("ips")) return;
  if (!r.IsObject() || !r.HasMember("ips") || !r["ips"].IsArray() || !r.HasMember("interfaces") || !r["interfaces"].IsArray()) {
    throw std::runtime_error(what + ": result has no ips/interfaces: " + json_dump(r));
  }
  const auto& ifs = r["interfaces"];
  for (const auto& ip : r["ips"].GetArray()) {
    if (!ip.HasMember("interface") || !ip["interface"].IsInt() || !ip.HasMember("address")) {
      throw std::runtime_error(what + ": result ip without interface/address: " + json_dump(ip));
    }
    const int idx = ip["interface"].GetInt();
    if (idx < 0 || static_cast<rapidjson::SizeType>(idx) >= ifs.Size() || !ifs[idx].HasMember("sandbox")) {
      throw std::runtime_error(what + ": result ip points at no sandbox interface: " + json_dump(r));
    }
    auto prefix = must(plumb::IpPrefix::parse(ip["address"].GetString()), what + ": result address");
    expect[ifs[idx]["name"].GetString()].push_back(prefix.addr);
  }
}

void expect_from_network_status(const std::string& status, const std::string& pod, Pod& p) {
  rapidjson::Document d;
  d.Parse(status.c_str());
  if (d.HasParseError() || !d.IsArray())
    throw std::runtime_error("plumb wrote no valid network-status for " + pod + ": " + status);
  for (const auto& e : d.GetArray()) {
    if (!e.HasMember("interface") || !e.HasMember("ips")) continue;
    for (const auto& ip : e["ips"].GetArray()) {
      p.expect[e["interface"].GetString()].push_back(must(IpAddr::parse(ip.GetString()), "network-status ip"));
    }
  }
}

void Bench::check_result_eth0(const Pod& p, const std::string& result) {
  rapidjson::Document res;
  res.Parse(result.c_str());
  if (res.HasParseError()) throw std::runtime_error("plumb ADD printed no JSON result: " + result);
  std::map<std::string, std::vector<IpAddr>> from_result;
  expect_from_result(res, from_result, "plumb ADD", !is_user_scenario(p.scenario));
  if (from_result["eth0"] != p.expect.at("eth0"))
    throw std::runtime_error("plumb's result and network-status disagree on eth0's addresses");
}

void Bench::start_daemon(PlumbDaemon& d, const std::string& dir, const std::vector<std::string>& extra) {
  d.dir = dir;
  d.socket = dir + "/plumb.sock";
  d.usage = dir + "/usage-log";
  d.log = dir + "/log";
  d.usage_read = 0;
  fs::create_directories(dir);
  std::vector<std::string> argv = {o_.plumb, "daemon", "--socket", d.socket, "--workers", "4", "--usage-log", d.usage};
  argv.insert(argv.end(), extra.begin(), extra.end());
  {
    InNetns in(*plumb_.ns);
    d.proc.start(argv, {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, d.log);
  }
  for (int i = 0; i < 500 && !fs::exists(d.socket); ++i) ::usleep(10'000);
  if (!fs::exists(d.socket)) {
    throw std::runtime_error("plumb daemon did not listen on " + d.socket + " within 5 s: " + read_text(d.log));
  }
}

std::pair<int64_t, long> Bench::take_invocation_usage(PlumbDaemon& d) {
  std::lock_guard<std::mutex> l(mu_);
  const std::string all = read_text(d.usage);
  std::pair<int64_t, long> out{0, 0};
  size_t end = all.rfind('\n');
  if (end == std::string::npos || end < d.usage_read) return out;
  for (size_t pos = d.usage_read; pos <= end;) {
    const size_t nl = all.find('\n', pos);
    const std::string line = all.substr(pos, nl - pos);
    long long cpu = 0;
    long rss = 0;
    const char* c = std::strstr(line.c_str(), "cpu_us=");
    const char* m = std::strstr(line.c_str(), "maxrss_kib=");
    if (c == nullptr || m == nullptr || std::sscanf(c, "cpu_us=%lld", &cpu) != 1 || std::sscanf(m, "maxrss_kib=%ld", &rss) != 1) {
      throw std::runtime_error("plumb daemon's usage line unreadable: " + line);
    }
    out.first += cpu;
    out.second = std::max(out.second, rss);
    pos = nl + 1;
  }
  d.usage_read = end + 1;
  return out;
}

Proc Bench::run_plumb(const std::vector<std::string>& env, const std::string& config, Cost& c) {
  if (!o_.thick) {
    Proc r = spawn({o_.plumb}, env, config);
    c.add(r);
    return r;
  }
  return run_shim(daemon_, env, config, c);
}

Proc Bench::run_shim(PlumbDaemon& d, const std::vector<std::string>& env, const std::string& config, Cost& c) {
  const int64_t daemon0 = d.proc.cpu_ns();
  const bool alone = ++d.in_flight == 1;
  Proc r = spawn({o_.shim}, env, config);
  c.add(r);
  // The worker tells the daemon its Done before it answers the shim, but the daemon may log it
  // after the shim has exited: read too early, this invocation's CPU would be the next one's.
  // Untimed, and only when no other invocation of this daemon runs (the sequential phases).
  for (int i = 0; alone && r.ok() && i < 500; ++i) {
    std::error_code ec;
    const auto size = fs::file_size(d.usage, ec);
    std::unique_lock<std::mutex> l(mu_);
    if (!ec && size > d.usage_read) break;
    l.unlock();
    ::usleep(100);
  }
  --d.in_flight;
  if (!r.ok()) {
    const std::string log = read_text(d.log);
    r.err +=
        "\n  plumb daemon's log (" + d.log + ", its end): " + log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
  }
  const auto [worker_us, worker_rss] = take_invocation_usage(d);
  c.cpu_us += worker_us + (d.proc.cpu_ns() - daemon0) / 1000;
  c.rss_kib = std::max(c.rss_kib, worker_rss);
  return r;
}

Cost Bench::add_plumb(Pod& p) {
  Cost c;
  Proc r = run_plumb(cni_env("ADD", p, "eth0"), plumb_config(p, ""), c);
  if (!r.ok()) throw std::runtime_error("plumb ADD of " + p.cid + " (scenario " + p.scenario + ") failed: " + r.describe());
  p.plumb_result = r.out;
  // What to verify: every attachment's addresses from the network-status plumb wrote.
  expect_from_network_status(read_text(plumb_.dir + "/store/status/default/" + p.name + ".json"), p.name, p);
  check_result_eth0(p, r.out);
  return c;
}

Cost Bench::del_plumb(Pod& p) {
  Cost c;
  Proc r = run_plumb(cni_env("DEL", p, "eth0"), plumb_config(p, p.plumb_result), c);
  if (!r.ok()) throw std::runtime_error("plumb DEL of " + p.cid + " failed: " + r.describe());
  return c;
}

namespace {

/// One attachment of the reference way: its network (a conflist) and interface.
struct RefAttachment {
  std::string ifname;
  std::string conflist;  // {"cniVersion","name","plugins":[...]} or a single plugin config
};

std::vector<RefAttachment> ref_attachments(const std::string& ipam_dir, char scenario, const std::string& default_net) {
  std::vector<RefAttachment> a;
  a.push_back({"eth0", default_net});
  if (has_secondaries(scenario)) {
    a.push_back({"net1", sec_bridge_json(ipam_dir)});
    a.push_back({"net2", sec_macvlan_json(ipam_dir)});
  }
  return a;
}

/// A network of the reference way as libcni sees it: a conflist, or a single plugin config
/// (a list of one).
class RefNet {
 public:
  explicit RefNet(const std::string& network) {
    net_.Parse(network.c_str());
    if (net_.HasParseError()) throw std::runtime_error("bench network config is not JSON: " + network);
    if (net_.HasMember("plugins")) {
      for (const auto& p : net_["plugins"].GetArray()) plugins_.push_back(&p);
    } else {
      plugins_.push_back(&net_);
    }
  }
  size_t size() const { return plugins_.size(); }
  std::string type(size_t i) const { return (*plugins_[i])["type"].GetString(); }

  /// The config plugin i is executed with: cniVersion and name of the list injected, the
  /// runtime's runtimeConfig keys this plugin declares in "capabilities", prevResult if any.
  std::string config(size_t i, const rapidjson::Value& runtime, const std::string& prev_result) const {
    rapidjson::Document c;
    auto& a = c.GetAllocator();
    c.CopyFrom(*plugins_[i], a);
    c.RemoveMember("cniVersion");
    c.RemoveMember("name");
    c.AddMember("cniVersion", rapidjson::Value(net_["cniVersion"], a), a);
    c.AddMember("name", rapidjson::Value(net_["name"], a), a);
    if (c.HasMember("capabilities") && runtime.IsObject()) {
      rapidjson::Value rc(rapidjson::kObjectType);
      for (auto it = c["capabilities"].MemberBegin(); it != c["capabilities"].MemberEnd(); ++it) {
        if (!it->value.IsBool() || !it->value.GetBool()) continue;
        auto rv = runtime.FindMember(it->name.GetString());
        if (rv != runtime.MemberEnd()) rc.AddMember(rapidjson::Value(it->name, a), rapidjson::Value(rv->value, a), a);
      }
      if (rc.MemberCount() > 0) c.AddMember("runtimeConfig", rc, a);
    }
    if (!prev_result.empty()) {
      rapidjson::Document prev;
      prev.Parse(prev_result.c_str());
      if (prev.HasParseError()) throw std::runtime_error("prevResult is not JSON: " + prev_result);
      c.AddMember("prevResult", rapidjson::Value(prev, a), a);
    }
    return json_dump(c);
  }

 private:
  rapidjson::Document net_;
  std::vector<const rapidjson::Value*> plugins_;
};

}  // namespace

std::string Bench::reference_default_conflist(char scenario) const {
  if (is_user_scenario(scenario)) return user_conflist_.at(scenario);
  return default_conflist(ref_.dir + "/ipam", scenario == 'b' ? 'a' : scenario);
}

Cost Bench::add_reference(Pod& p) {
  Cost c;
  int64_t t0 = now_ns();
  rapidjson::Document runtime;
  runtime.Parse(has_runtime_config(p.scenario) ? runtime_config(p).c_str() : "{}");
  c.ns += now_ns() - t0;  // the delegating runtime's own work is part of the way's time
  for (const auto& att : ref_attachments(ref_.dir + "/ipam", p.scenario, reference_default_conflist(p.scenario))) {
    // ADD runs the list in order, each plugin getting the previous one's result.
    t0 = now_ns();
    RefNet net(att.conflist);
    c.ns += now_ns() - t0;
    std::string prev;
    for (size_t i = 0; i < net.size(); ++i) {
      t0 = now_ns();
      const std::string conf = net.config(i, runtime, prev);
      c.ns += now_ns() - t0;
      Proc r = spawn({o_.cni_path + "/" + net.type(i)}, cni_env("ADD", p, att.ifname), conf);
      c.add(r);
      if (!r.ok()) {
        throw std::runtime_error("reference " + net.type(i) + " ADD of " + p.cid + " (" + att.ifname + ", scenario " +
                                 p.scenario + ") failed: " + r.describe());
      }
      prev = r.out;
    }
    rapidjson::Document res;
    res.Parse(prev.c_str());
    if (res.HasParseError()) throw std::runtime_error("reference chain printed no JSON result: " + prev);
    expect_from_result(res, p.expect, "reference ADD " + att.ifname, !is_user_scenario(p.scenario));
    p.ref_results.push_back(prev);
  }
  return c;
}

Cost Bench::del_reference(Pod& p) {
  Cost c;
  int64_t t0 = now_ns();
  rapidjson::Document runtime;
  runtime.Parse(has_runtime_config(p.scenario) ? runtime_config(p).c_str() : "{}");
  auto atts = ref_attachments(ref_.dir + "/ipam", p.scenario, reference_default_conflist(p.scenario));
  c.ns += now_ns() - t0;
  // Multus deletes the attachments in reverse order; libcni runs each list in reverse order,
  // every plugin with the attachment's cached result as prevResult.
  for (size_t k = atts.size(); k-- > 0;) {
    t0 = now_ns();
    RefNet net(atts[k].conflist);
    c.ns += now_ns() - t0;
    for (size_t i = net.size(); i-- > 0;) {
      t0 = now_ns();
      const std::string conf = net.config(i, runtime, p.ref_results.at(k));
      c.ns += now_ns() - t0;
      Proc r = spawn({o_.cni_path + "/" + net.type(i)}, cni_env("DEL", p, atts[k].ifname), conf);
      c.add(r);
      if (!r.ok()) throw std::runtime_error("reference " + net.type(i) + " DEL of " + p.cid + " failed: " + r.describe());
    }
  }
  return c;
}

namespace {

std::vector<std::string> floor_argv(const Options& o, const std::string& verb, const Pod& p, const std::string& bpffs) {
  return {o.floor, verb, std::string(1, floor_scenario(p.scenario)), "/run/netns/" + p.netns, std::to_string(p.slot),
          std::to_string(p.host_port), bpffs};
}

}  // namespace

void Bench::start_floor_server() {
  floor_socket_ = plumb_.dir + "/floor/floor.sock";
  fs::create_directories(plumb_.dir + "/floor");
  {
    InNetns in(*plumb_.ns);
    floor_server_.start({o_.floor, "serve", floor_socket_, bpffs_}, {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
                        plumb_.dir + "/floor/log");
  }
  for (int i = 0; i < 500 && !fs::exists(floor_socket_); ++i) ::usleep(10'000);
  if (!fs::exists(floor_socket_)) {
    throw std::runtime_error(o_.floor + " serve did not listen on " + floor_socket_ +
                             " within 5 s: " + read_text(plumb_.dir + "/floor/log"));
  }
}

Proc Bench::run_floor(const std::string& verb, const Pod& p, Cost& c) {
  Proc r;
  if (p.way == Way::FloorWarm) {
    const int64_t server0 = floor_server_.cpu_ns(true);
    r = spawn({o_.shim},
              {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "PLUMB_DAEMON_SOCKET=" + floor_socket_, "CNI_COMMAND=" + verb,
               "CNI_CONTAINERID=" + p.cid, "CNI_NETNS=/run/netns/" + p.netns, "CNI_IFNAME=eth0",
               "CNI_ARGS=FLOOR_SCENARIO=" + std::string(1, floor_scenario(p.scenario)) +
                   ";FLOOR_SLOT=" + std::to_string(p.slot) + ";FLOOR_PORT=" + std::to_string(p.host_port)},
              "");
    c.add(r);
    c.cpu_us += (floor_server_.cpu_ns(true) - server0) / 1000;  // the server's threads (sequential phases: this one's)
  } else {
    r = spawn(floor_argv(o_, verb, p, bpffs_), {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, "");
    c.add(r);
  }
  if (!r.ok()) {
    const std::string cmd = p.way == Way::FloorWarm ? o_.shim + " (CNI_COMMAND=" + verb + ", to " + o_.floor + " serve)"
                                                    : o_.floor + " " + verb;
    throw std::runtime_error(std::string(way_name(p.way)) + " " + verb + " of " + p.cid + " (scenario " + p.scenario +
                             ") failed: " + cmd + ": " + r.describe());
  }
  return r;
}

Cost Bench::add_floor(Pod& p) {
  Cost c;
  run_floor("ADD", p, c);
  for (int net = 1; net <= (has_secondaries(p.scenario) ? 3 : 1); ++net) {
    IpAddr a = must(plumb::IpPrefix::parse(kSubnet[net]), "subnet").addr.plus(0x10000 + p.slot);
    p.expect[net == 1 ? "eth0" : net == 2 ? "net1" : "net2"].push_back(a);
  }
  return c;
}

Cost Bench::del_floor(Pod& p) {
  Cost c;
  // floor: the pod's devices in one RTM_DELLINK (as plumb); floor-naive: one per device.
  run_floor(p.way == Way::FloorNaive ? "DEL-NAIVE" : "DEL", p, c);
  return c;
}

/// Every expected interface exists in the pod, is up and holds each of its addresses; the
/// scenario's interfaces are all there.
void Bench::verify_added(const Pod& p) {
  auto ns = must(plumb::netns::Netns::open("/run/netns/" + p.netns), "open pod netns");
  auto nl = must(plumb::netlink::Socket::open_in(ns.fd()), "open rtnetlink in pod");
  auto links = must(plumb::link::list(nl), "list pod links");
  auto addrs = must(plumb::addr::list(nl), "list pod addresses");
  const std::string who = std::string(way_name(p.way)) + " ADD of " + p.cid + " (scenario " + p.scenario + ")";
  std::vector<std::string> want = {"eth0"};
  if (has_secondaries(p.scenario)) want = {"eth0", "net1", "net2"};
  auto expect = p.expect;
  for (auto& w : want) {
    // A user's conflist (scenario x) may give eth0 no address (no IPAM): then only its presence is checked.
    if (is_user_scenario(p.scenario) && expect.count(w) == 0) expect[w] = {};
    if (!is_user_scenario(p.scenario) && (expect.count(w) == 0 || expect.at(w).empty()))
      throw std::runtime_error(who + ": no address reported for " + w);
  }
  for (auto& [ifname, ips] : expect) {
    auto l = std::find_if(links.begin(), links.end(), [&](const plumb::link::LinkInfo& li) { return li.name == ifname; });
    if (l == links.end()) throw std::runtime_error(who + ": interface " + ifname + " is not in the pod");
    if (!(l->flags & IFF_UP)) throw std::runtime_error(who + ": interface " + ifname + " is down");
    for (auto& ip : ips) {
      bool found = std::any_of(addrs.begin(), addrs.end(),
                               [&](const plumb::addr::AddrInfo& a) { return a.index == l->index && a.prefix.addr == ip; });
      if (!found) throw std::runtime_error(who + ": interface " + ifname + " lacks address " + ip.str());
    }
  }
}

void Bench::verify_deleted(const Pod& p) {
  auto ns = must(plumb::netns::Netns::open("/run/netns/" + p.netns), "open pod netns");
  auto nl = must(plumb::netlink::Socket::open_in(ns.fd()), "open rtnetlink in pod");
  for (auto& l : must(plumb::link::list(nl), "list pod links")) {
    if (l.name != "lo") throw std::runtime_error(std::string(way_name(p.way)) + " DEL of " + p.cid + " left interface " + l.name + " in the pod");
  }
}

}  // namespace bench
