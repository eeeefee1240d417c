// client-go's Reflector on engine/k8s's Client: lists a collection, then watches it from the
// list's resourceVersion (bookmarks asked for and followed), watches again from the last
// resourceVersion seen when the server ends a watch, lists again when the server says that
// version is gone (410 Gone / Expired) or sends any other ERROR event, and backs off (doubling,
// capped) while the server cannot be reached or refuses. Blocking: run it on a thread of its own
// (plumb daemon's cache process, cni-entry/source/watched.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/json.hpp"
#include "engine/base/result.hpp"
#include "engine/k8s/client.hpp"

namespace plumb::k8s {

/// Where a Reflector delivers what it learns; called on the reflector's thread.
class ReflectorSink {
 public:
  virtual ~ReflectorSink() = default;
  /// A (re)list: the collection holds exactly `items` now.
  virtual void replace(std::vector<json::Document> items) = 0;
  /// A watch event: an object ADDED or MODIFIED (`deleted` false), or DELETED (its last state).
  virtual void apply(bool deleted, const json::Value& object) = 0;
  /// A list or watch failed (the reflector backs off and tries again); `e` says why.
  virtual void failed(const Error& e) { (void)e; }
  /// One request made: `verb` "list" or "watch"; `outcome` "ok", "expired" (a watch that ended
  /// in 410 Gone or an ERROR event: a list follows) or "error" (failed: backed off); `took` from
  /// the request to its answer (a watch: to its end).
  virtual void requested(std::string_view verb, std::string_view outcome, std::chrono::duration<double> took) {
    (void)verb, (void)outcome, (void)took;
  }
};

/// The timing of a Reflector.
struct ReflectorOptions {
  std::chrono::seconds watch_timeout{300};  ///< timeoutSeconds asked of the server for each watch
  std::chrono::milliseconds backoff{500};   ///< wait after the first failure, doubled after each
  std::chrono::milliseconds backoff_max{30000};
};

/// Lists and watches the collection `path` (e.g. "/api/v1/pods") of `client`, filtered by
/// `field_selector` ("spec.nodeName=node-1"; "" = none), into `sink`.
class Reflector {
 public:
  /// `client` must use a timeout longer than `o.watch_timeout` (a watch is one request).
  Reflector(Client& client, std::string path, std::string field_selector, ReflectorSink& sink, ReflectorOptions o = {});

  /// Lists and watches until `stop` is set (checked at every event and between attempts; a
  /// watch with no event ends at the latest after the server's timeoutSeconds).
  void run(const std::atomic<bool>& stop);

  /// One list: the sink's replace() with the items (none when the server answers 404: the
  /// resource, an optional CRD, is not installed). Errors: Client::list_versioned's.
  [[nodiscard]] Status list();
  /// One watch from the last resourceVersion, until the server ends it or `stop` is set.
  /// Returns true when the reflector must list again (410 Gone, an ERROR event). Errors: the
  /// transport's; an HTTP status other than 200 and 410 (kIo naming it, the Status message in
  /// details); kDecode for an event that is not JSON.
  [[nodiscard]] Result<bool> watch(const std::atomic<bool>& stop);

  /// The resourceVersion a watch starts from ("" before the first list).
  [[nodiscard]] const std::string& resource_version() const { return rv_; }

 private:
  bool on_event(std::string_view line, bool& relist, Status& bad);

  Client& client_;
  std::string path_, selector_;
  ReflectorSink& sink_;
  ReflectorOptions o_;
  std::string rv_;
  bool absent_ = false;  ///< the last list answered 404: the resource is not served
};

}  // namespace plumb::k8s
