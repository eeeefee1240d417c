// client-go's list-and-watch (see reflector.hpp).
#include "engine/k8s/reflector.hpp"

#include <algorithm>
#include <thread>

namespace plumb::k8s {

Reflector::Reflector(Client& client, std::string path, std::string field_selector, ReflectorSink& sink,
                     ReflectorOptions o)
    : client_(client), path_(std::move(path)), selector_(std::move(field_selector)), sink_(sink), o_(o) {}

Status Reflector::list() {
  const std::string path = selector_.empty() ? path_ : path_ + "?fieldSelector=" + query_escape(selector_);
  auto listed = client_.list_versioned(path, "list " + path_);
  if (!listed && listed.error().cni_code == cni_code::kNotFound) {
    // The resource is not served (an optional CRD, IPAMClaims, not installed): an empty
    // collection, listed again after the back-off instead of watched.
    absent_ = true;
    sink_.replace({});
    return {};
  }
  auto l = PLUMB_TRY(std::move(listed));
  absent_ = false;
  rv_ = std::move(l.resource_version);
  sink_.replace(std::move(l.items));
  return {};
}

/// One line of a watch: {"type": "ADDED|MODIFIED|DELETED|BOOKMARK|ERROR", "object": {...}}.
/// False stops the watch (an ERROR event, a line that is not an event: `relist` or `bad` say which).
bool Reflector::on_event(std::string_view line, bool& relist, Status& bad) {
  auto d = json::parse(line, "watch event of " + path_);
  const json::Value* type = d && d->IsObject() ? json::find(*d, "type") : nullptr;
  const json::Value* object = d && d->IsObject() ? json::find(*d, "object") : nullptr;
  if (type == nullptr || !type->IsString() || object == nullptr || !object->IsObject()) {
    bad = fail(cni_code::kDecode, "watch of " + path_ + ": an event that is not {type, object}",
               std::string(line.substr(0, 200)));
    return false;
  }
  const std::string_view t = type->GetString();
  if (t == "ERROR") {  // a Status: 410 Expired/Gone (the version was compacted) or another failure
    relist = true;
    return false;
  }
  if (t == "ADDED" || t == "MODIFIED" || t == "DELETED") sink_.apply(t == "DELETED", *object);
  if (std::string rv = meta_string(*object, "resourceVersion"); !rv.empty()) rv_ = std::move(rv);
  return true;
}

Result<bool> Reflector::watch(const std::atomic<bool>& stop) {
  std::string path = path_ + "?watch=1&allowWatchBookmarks=true&resourceVersion=" + query_escape(rv_) +
                     "&timeoutSeconds=" + std::to_string(o_.watch_timeout.count());
  if (!selector_.empty()) path += "&fieldSelector=" + query_escape(selector_);
  bool relist = false;
  Status bad;
  std::string error_body;
  const long status = PLUMB_TRY(client_.stream_lines(
      path, [&](std::string_view line) { return !stop.load() && on_event(line, relist, bad); }, &error_body));
  if (status == 410) return true;
  if (status != 200) {
    http::Response resp{status, std::move(error_body), {}};
    return std::unexpected(client_.http_error("watch " + path_, "GET", path, resp));
  }
  if (!bad) return std::unexpected(bad.error());
  return relist;
}

void Reflector::run(const std::atomic<bool>& stop) {
  auto wait = o_.backoff;
  const auto back_off = [&](const Error& e) {
    sink_.failed(e);
    for (auto slept = std::chrono::milliseconds(0); slept < wait && !stop.load();
         slept += std::chrono::milliseconds(50))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    wait = std::min(wait * 2, o_.backoff_max);
  };
  bool must_list = true;
  while (!stop.load()) {
    if (must_list) {
      const auto listing = std::chrono::steady_clock::now();
      auto l = list();
      sink_.requested("list", l ? "ok" : "error", std::chrono::steady_clock::now() - listing);
      if (!l) {
        back_off(l.error());
        continue;
      }
      must_list = false;
      if (absent_) {
        back_off(Error{cni_code::kNotFound, 0, path_ + " is not served by the API server (listed again later)", ""});
        must_list = true;
        continue;
      }
    }
    const auto began = std::chrono::steady_clock::now();
    auto w = watch(stop);
    sink_.requested("watch", !w ? "error" : *w ? "expired" : "ok", std::chrono::steady_clock::now() - began);
    if (!w) {
      // Unreachable or overloaded (kTryAgainLater): a watch from the same version, as client-go;
      // refused otherwise: a list again.
      must_list = w.error().cni_code != cni_code::kTryAgainLater;
      back_off(w.error());
      continue;
    }
    must_list = *w;
    // A server (or a proxy) ending every watch at once must not make this a busy loop.
    if (std::chrono::steady_clock::now() - began < std::chrono::seconds(1))
      back_off(Error{cni_code::kTryAgainLater, 0, "watch of " + path_ + " ended at once", ""});
    else
      wait = o_.backoff;
  }
}

}  // namespace plumb::k8s
