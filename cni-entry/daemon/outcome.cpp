// The line a `plumb daemon` worker writes on the daemon's stderr per invocation (daemon.hpp
// Outcome, outcome_line): what `kubectl logs` of the daemon shows of each pod's verbs.
#include <time.h>

#include <charconv>
#include <cstdio>
#include <ctime>
#include <optional>
#include <string>
#include <utility>

#include "cni-entry/daemon/daemon.hpp"
#include "engine/base/json.hpp"

namespace plumb::daemon {
namespace {

/// The outcome the current invocation noted (cleared by the worker before each one).
std::optional<Outcome>& noted() {
  static std::optional<Outcome> o;
  return o;
}

/// Now, RFC 3339 UTC with milliseconds.
std::string now_rfc3339() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  std::tm tm{};
  gmtime_r(&ts.tv_sec, &tm);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03ldZ", ts.tv_nsec / 1'000'000);
  return buf;
}

}  // namespace

void note_outcome(Outcome o) { noted() = std::move(o); }

namespace detail {

/// Takes the outcome the invocation noted (nullopt: none, e.g. a request that was not one).
std::optional<Outcome> take_outcome() { return std::exchange(noted(), std::nullopt); }

std::string outcome_line(const Outcome& o, double ms, bool json) {
  if (!json) {
    // Appended piece by piece, the duration as printf's "%.3f" gives it (std::to_chars, no printf).
    char duration[48];
    const auto duration_len = static_cast<size_t>(
        std::to_chars(duration, duration + sizeof duration, ms, std::chars_format::fixed, 3).ptr - duration);
    std::string line = "plumb daemon: ";
    line += o.verb;
    line += ' ';
    line += o.pod.empty() ? "-" : o.pod;
    line += " container=";
    line += o.container;
    line += " ifname=";
    line += o.ifname;
    line += " networks=";
    const size_t networks_at = line.size();
    for (size_t i = 0; i < o.networks.size(); ++i) (line += i == 0 ? "" : ",") += o.networks[i];
    if (line.size() == networks_at) line += '-';
    line += " code=";
    line += std::to_string(o.code);
    line += " duration_ms=";
    line.append(duration, duration_len);
    if (!o.error.empty())
      line += " error=" + json::dump(json::Value(rapidjson::StringRef(o.error.data(), o.error.size())));
    line += '\n';
    return line;
  }
  json::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  json::set_string(d, "time", now_rfc3339(), a);
  json::set_string(d, "level", o.code == 0 ? "info" : "error", a);
  json::set_string(d, "msg", "invocation", a);
  json::set_string(d, "verb", o.verb, a);
  json::set_string(d, "pod", o.pod, a);
  json::set_string(d, "containerID", o.container, a);
  json::set_string(d, "ifname", o.ifname, a);
  json::Value networks(rapidjson::kArrayType);
  for (const auto& n : o.networks) networks.PushBack(json::Value(n.c_str(), a), a);
  json::set(d, "networks", std::move(networks), a);
  d.AddMember("code", o.code, a);
  if (!o.error.empty()) json::set_string(d, "error", o.error, a);
  d.AddMember("durationMs", static_cast<double>(static_cast<int64_t>(ms * 1000.0)) / 1000.0, a);
  return json::dump(d) + "\n";
}

}  // namespace detail
}  // namespace plumb::daemon
