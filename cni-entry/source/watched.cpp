// The cache process's reflectors and the frames they send (see watched.hpp).
#include "cni-entry/source/watched.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/k8s/reflector.hpp"

namespace plumb::source {
namespace {

WatchedObjects* installed = nullptr;

/// Frames at most this long (a pod or NAD is far smaller; the API server limits objects to 1.5 MiB).
constexpr uint32_t kMaxFrame = uint32_t{16} << 20;

/// Writes the frames of one collection to the daemon; every reflector of the process shares the
/// descriptor, so each frame is written whole under one lock.
class FrameSink final : public k8s::ReflectorSink {
 public:
  FrameSink(Watched kind, int fd, std::mutex& lock) : kind_(kind), fd_(fd), lock_(lock) {}

  void replace(std::vector<json::Document> items) override {
    send({WatchFrame::Op::kListed, kind_, {}, {}});
    for (const auto& item : items) send({WatchFrame::Op::kPut, kind_, key_of(item), json::dump(item)});
    send({WatchFrame::Op::kSynced, kind_, {}, {}});
  }
  void apply(bool deleted, const json::Value& object) override {
    send({deleted ? WatchFrame::Op::kDeleted : WatchFrame::Op::kPut, kind_, key_of(object), json::dump(object)});
  }
  void failed(const Error& e) override { send({WatchFrame::Op::kFailed, kind_, {}, e.text()}); }
  void requested(std::string_view verb, std::string_view outcome, std::chrono::duration<double> took) override {
    send({WatchFrame::Op::kRequest, kind_, std::string(verb) + " " + std::string(outcome),
          std::to_string(took.count())});
  }

 private:
  static std::string key_of(const json::Value& obj) {
    return k8s::meta_string(obj, "namespace") + "/" + k8s::meta_string(obj, "name");
  }
  void send(const WatchFrame& f) {
    const std::string bytes = encode_frame(f);
    std::lock_guard hold(lock_);
    for (size_t off = 0; off < bytes.size();) {
      const ssize_t n = ::write(fd_, bytes.data() + off, bytes.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) ::_exit(0);  // the daemon is gone: so is its cache
      off += static_cast<size_t>(n);
    }
  }

  Watched kind_;
  int fd_;
  std::mutex& lock_;
};

}  // namespace

void set_watched_objects(WatchedObjects* cache) { installed = cache; }
WatchedObjects* watched_objects() { return installed; }

std::string encode_frame(const WatchFrame& f) {
  const auto len = static_cast<uint32_t>(2 + f.key.size() + 1 + f.json.size());
  std::string out(sizeof len, '\0');
  std::memcpy(out.data(), &len, sizeof len);
  out += static_cast<char>(f.op);
  out += static_cast<char>(f.kind);
  out += f.key;
  out += '\0';
  out += f.json;
  return out;
}

Result<std::optional<WatchFrame>> take_frame(std::string& buffer) {
  uint32_t len = 0;
  if (buffer.size() < sizeof len) return std::optional<WatchFrame>{};
  std::memcpy(&len, buffer.data(), sizeof len);
  if (len < 3 || len > kMaxFrame)
    return fail(cni_code::kDecode, "cache process: a frame of " + std::to_string(len) + " bytes");
  if (buffer.size() < sizeof len + len) return std::optional<WatchFrame>{};
  const std::string_view body(buffer.data() + sizeof len, len);
  const size_t nul = body.find('\0', 2);
  if (nul == std::string_view::npos) return fail(cni_code::kDecode, "cache process: a frame without its key's end");
  WatchFrame f{static_cast<WatchFrame::Op>(body[0]), static_cast<Watched>(body[1]),
               std::string(body.substr(2, nul - 2)), std::string(body.substr(nul + 1))};
  buffer.erase(0, sizeof len + len);
  return std::optional<WatchFrame>(std::move(f));
}

void run_watches(const WatchSetup& setup, int fd) {
  struct Collection {
    Watched kind;
    std::string path, selector;
  };
  const std::vector<Collection> collections = {
      {Watched::kPod, "/api/v1/pods", "spec.nodeName=" + setup.node},
      {Watched::kNad, "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions", ""},
      {Watched::kClaim, "/apis/k8s.cni.cncf.io/v1alpha1/ipamclaims", ""},
  };
  std::mutex lock;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  threads.reserve(collections.size());
  for (const auto& c : collections) {
    threads.emplace_back([&setup, &lock, &stop, fd, c] {
      k8s::Options opts;
      opts.timeout = setup.watch_timeout + std::chrono::seconds(30);  // one watch is one request
      opts.retries = 0;                                               // the reflector backs off itself
      k8s::Client client(setup.creds, opts);
      FrameSink sink(c.kind, fd, lock);
      k8s::ReflectorOptions ro;
      ro.watch_timeout = setup.watch_timeout;
      k8s::Reflector(client, c.path, c.selector, sink, ro).run(stop);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace plumb::source
