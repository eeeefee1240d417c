// The API phase's tables (bench.hpp api_report): per API server latency, each way's ADD and DEL,
// what the server saw per ADD, the ratios to plumb on the embedded store and to the floor, and
// the cost of the network-status write and of the Events on their own.
#include <rapidjson/document.h>

#include <cmath>
#include <map>
#include <ostream>

#include "bench/bench.hpp"
#include "bench/stats.hpp"

namespace bench {
namespace {

namespace rj = rapidjson;

/// The API phase's measured samples of one latency and way, by iteration.
std::map<int, const Sample*> of(const Results& r, int latency, Way w) {
  std::map<int, const Sample*> out;
  for (const auto& s : r.samples) {
    if (s.phase == "api" && !s.warmup && s.api_latency_ms == latency && s.way == w) out[s.iter] = &s;
  }
  return out;
}

/// f(numerator's sample, denominator's sample) for each iteration both ways measured.
template <class F>
std::vector<double> pairs(const Results& r, int latency, Way num, Way den, F f) {
  const auto a = of(r, latency, num), b = of(r, latency, den);
  std::vector<double> out;
  for (const auto& [it, x] : a) {
    if (auto y = b.find(it); y != b.end() && y->second->add.ns > 0) out.push_back(f(*x, *y->second));
  }
  return out;
}

double add_ratio(const Sample& a, const Sample& b) {
  return static_cast<double>(a.add.ns) / static_cast<double>(b.add.ns);
}
double add_diff_ms(const Sample& a, const Sample& b) { return static_cast<double>(a.add.ns - b.add.ns) / 1e6; }

/// "1.05× [0.98×, 1.20×]" of pair ratios.
std::string ratio_span(const std::vector<double>& v) {
  return ratio(pct(v, 0.5)) + " [" + ratio(pct(v, 0.1)) + ", " + ratio(pct(v, 0.9)) + "]";
}

/// The floor a way is measured against: floor-warm for what runs in a daemon, floor for what is
/// executed per verb.
Way floor_of(Way w, bool thick) {
  if (w == Way::ApiThin || (w == Way::Plumb && !thick)) return Way::Floor;
  return Way::FloorWarm;
}

}  // namespace

rj::Value api_report(const Results& r, std::ostream& md, rj::Document::AllocatorType& al, std::map<int, double>& goal) {
  const Options& o = *r.options;
  rj::Value out(rj::kArrayType);
  md << "\n## Pods and NADs from a Kubernetes API server (scenario b; issue 32)\n\n"
     << "The pod (default network + net1 on `br1` + net2 a macvlan, from its `k8s.v1.cni.cncf.io/networks`) and its "
        "two NADs served by the Kubernetes API test server (`tests/support/kube_api_test_server.py`, TLS, a bearer "
        "token), every request held the given latency before it is answered. **plumb** is the same ADD from the "
        "embedded "
        "store (no API server: the reference); **api-thick**: `plumb daemon --kubeconfig --node-name` watching the "
        "server's pods and NADs, the shim per verb (no GET when cached); **api-thick-no-status**: the same with the "
        "pod's namespace in `systemNamespaces` (no network-status write); **api-thick-status-after**: api-thick with "
        "`statusAfterAnswer` (the network-status write after the shim's answer, before the Events); **api-thin**: the "
        "plumb binary per verb, its "
        "pod and NADs read with GETs. Each ADD writes network-status (a PATCH of pods/status) and posts one Event per "
        "attachment (thin: before it exits; thick: after the shim has its answer, the worker still busy). Requests "
        "and TLS connections (each a handshake) counted from the server's logs; the Events' time is from the shim's "
        "answer to the server's log of the last "
        "one. "
     << o.api_samples << " interleaved samples per way and latency.\n\n"
     << "| API latency | way | ADD p50 | ADD p90 | DEL p50 | ADD CPU p50 | GETs per ADD | status writes per ADD | "
        "Events per "
        "ADD | TLS connections per ADD | ADD / plumb (embedded) | ADD / its floor "
        "|\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (int latency : o.api_latencies) {
    rj::Value lv(rj::kObjectType);
    lv.AddMember("latency_ms", latency, al);
    rj::Value ways(rj::kArrayType);
    for (Way w : kApiWays) {
      std::vector<double> add, del, cpu, gets, status, events, conns;
      for (const auto& [it, s] : of(r, latency, w)) {
        add.push_back(static_cast<double>(s->add.ns) / 1e6);
        del.push_back(static_cast<double>(s->del.ns) / 1e6);
        cpu.push_back(static_cast<double>(s->add.cpu_us) / 1e3);
        gets.push_back(s->api.gets);
        status.push_back(s->api.status);
        events.push_back(s->api.events);
        conns.push_back(s->api.connections);
      }
      const Dist a = dist(add), d = dist(del), c = dist(cpu);
      const auto over_embedded = pairs(r, latency, w, Way::Plumb, add_ratio);
      const Way fl = floor_of(w, o.thick);
      const auto over_floor = pairs(r, latency, w, fl, add_ratio);
      const bool counted = is_api(w);
      md << "| " << latency << " ms | " << way_name(w) << " | " << ms(a.p50) << " | " << ms(a.p90) << " | " << ms(d.p50)
         << " | " << ms(c.p50) << " | " << (counted ? fmt(1, dist(gets).mean) : "-") << " | "
         << (counted ? fmt(1, dist(status).mean) : "-") << " | " << (counted ? fmt(1, dist(events).mean) : "-") << " | "
         << (counted ? fmt(1, dist(conns).mean) : "-") << " | " << (w == Way::Plumb ? "1" : ratio_span(over_embedded))
         << " | " << (is_floor(w) ? "-" : ratio_span(over_floor) + " (" + way_name(fl) + ")") << " |\n";
      rj::Value wv(rj::kObjectType);
      wv.AddMember("way", rj::Value(way_name(w), al), al);
      wv.AddMember("add_ms", dist_json(a, al), al);
      wv.AddMember("del_ms", dist_json(d, al), al);
      wv.AddMember("add_cpu_ms", dist_json(c, al), al);
      if (counted) {
        wv.AddMember("gets_per_add", dist_json(dist(gets), al), al);
        wv.AddMember("status_writes_per_add", dist_json(dist(status), al), al);
        wv.AddMember("events_per_add", dist_json(dist(events), al), al);
        wv.AddMember("tls_connections_per_add", dist_json(dist(conns), al), al);
      }
      wv.AddMember("add_over_embedded", dist_json(dist(over_embedded), al), al);
      if (!is_floor(w)) wv.AddMember("add_over_floor", dist_json(dist(over_floor), al), al);
      ways.PushBack(wv, al);
    }
    lv.AddMember("ways", ways, al);
    // The goal compares thick with thick: with --thin the embedded store's plumb is thin.
    if (o.thick) goal[latency] = pct(pairs(r, latency, Way::ApiThick, Way::Plumb, add_ratio), 0.5);
    out.PushBack(lv, al);
  }
  md << "\nThe API server's writes on their own, pair by pair (the samples of one iteration):\n\n"
     << "| API latency | network-status write: ADD api-thick − api-thick-no-status, ms p50 [p10, p90] | ADD "
        "api-thick / api-thick-no-status | ADD / plumb (embedded), p50: api-thick, api-thick-no-status, "
        "api-thick-status-after | Events after the answer (api-thick), ms p50 / p90 | network-status write and Events "
        "after the answer (api-thick-status-after), ms p50 / p90 | ADD api-thin − plumb (embedded), ms p50 "
        "|\n|---|---|---|---|---|---|---|\n";
  for (rj::SizeType i = 0; i < out.Size(); ++i) {
    const int latency = o.api_latencies[i];
    const auto status_ms = pairs(r, latency, Way::ApiThick, Way::ApiThickNoStatus, add_diff_ms);
    const auto status_ratio = pairs(r, latency, Way::ApiThick, Way::ApiThickNoStatus, add_ratio);
    const auto after_answer = [&](Way w) {
      std::vector<double> v;
      for (const auto& [it, s] : of(r, latency, w)) v.push_back(static_cast<double>(s->api.events_ns) / 1e6);
      return dist(v);
    };
    const Dist ev = after_answer(Way::ApiThick), later = after_answer(Way::ApiThickStatusAfter);
    const auto thin_extra = pairs(r, latency, Way::ApiThin, Way::Plumb, add_diff_ms);
    const auto over_embedded = [&](Way w) { return ratio(pct(pairs(r, latency, w, Way::Plumb, add_ratio), 0.5)); };
    md << "| " << latency << " ms | " << ms(pct(status_ms, 0.5)) << " [" << ms(pct(status_ms, 0.1)) << ", "
       << ms(pct(status_ms, 0.9)) << "] | " << ratio_span(status_ratio) << " | " << over_embedded(Way::ApiThick) << ", "
       << over_embedded(Way::ApiThickNoStatus) << ", " << over_embedded(Way::ApiThickStatusAfter) << " | " << ms(ev.p50)
       << " / " << ms(ev.p90) << " | " << ms(later.p50) << " / " << ms(later.p90) << " | " << ms(pct(thin_extra, 0.5))
       << " |\n";
    out[i].AddMember("status_write_ms", dist_json(dist(status_ms), al), al);
    out[i].AddMember("add_thick_over_no_status", dist_json(dist(status_ratio), al), al);
    out[i].AddMember("events_after_answer_ms", dist_json(ev, al), al);
    out[i].AddMember("status_and_events_after_answer_ms", dist_json(later, al), al);
    out[i].AddMember("thin_minus_embedded_ms", dist_json(dist(thin_extra), al), al);
  }
  return out;
}

}  // namespace bench
