// A node with plumb configured on the embedded store: writes plumb's config, a default network
// conflist, NADs and pod manifests under the node's scratch directory, and runs CNI verbs.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/support/private_node.hpp"

namespace plumb::test {

class PodFixture {
 public:
  explicit PodFixture(Node& node);

  /// plumb's config as a runtime sends it (with `extra` JSON members appended, e.g.
  /// R"("strictAnnotations": true)").
  std::string config(const std::string& extra = {}, const std::string& cni_version = "1.0.0") const;
  /// Writes <store>/nads/<file>.yaml with `yaml`.
  void write_nad_file(const std::string& file, const std::string& yaml) const;
  /// Writes a NAD whose spec.config is `config_json`, in namespace `ns`.
  void add_nad(const std::string& ns, const std::string& name, const std::string& config_json) const;
  /// Writes <store>/pods/<ns>/<name>.yaml with the selection annotation `networks` ("" = none).
  void add_pod(const std::string& ns, const std::string& name, const std::string& networks) const;
  /// The network-status plumb wrote for a pod ("" if none).
  std::string status_of(const std::string& ns, const std::string& name) const;

  /// Runs a verb. pod_name gives K8S_POD_NAME/NAMESPACE in CNI_ARGS.
  Proc run(const std::string& command, const std::string& container_id, const std::string& netns,
           const std::string& pod_ns, const std::string& pod_name, const std::string& conf,
           const std::string& ifname = "eth0") const;

  /// Like run(), with another binary (e.g. plumb_faulty_binary()) and extra environment.
  Proc run_with(const std::string& binary, const std::map<std::string, std::string>& extra_env,
                const std::string& command, const std::string& container_id, const std::string& netns,
                const std::string& pod_ns, const std::string& pod_name, const std::string& conf,
                const std::string& ifname = "eth0") const;

  std::string store() const { return node_.dir() + "/store"; }
  std::string state() const { return node_.dir() + "/state"; }
  std::string ipam_dir() const { return node_.dir() + "/ipam"; }
  std::string default_conflist() const { return node_.dir() + "/default.conflist"; }

  /// Files left under a directory (recursive), for leak assertions; not the recycled files.
  static std::vector<std::string> files_under(const std::string& dir);
  /// True for a directory of recycled files: the state directory's "recycled", host-local's and
  /// the store's ".plumb-recycled" (files nobody reads, kept to be renamed into place instead of
  /// new inodes; tests/engine/base/recycler, engine/state/state and ipam/host_local test them).
  static bool is_recycled_dir(const std::filesystem::path& p) {
    return p.filename() == "recycled" || p.filename() == ".plumb-recycled";
  }

 private:
  Node& node_;
};

/// Interface names in network namespace `ns` ("" = the node), from `ip -j link show`.
std::set<std::string> link_names(const std::string& ns);
/// host-local's address files under `dir` (full paths, recursive): every file but its `lock` and
/// `last_reserved_ip.*` bookkeeping and the recycled files (PodFixture::files_under).
std::vector<std::string> address_files(const std::string& dir);
/// The first IPv4 address of `dev` in namespace `ns` as "a.b.c.d/len", "" when it has none.
std::string ipv4_of(const std::string& ns, const std::string& dev);

/// Writes a file, creating parent directories.
void write_file(const std::string& path, const std::string& content);
std::string read_file(const std::string& path);

}  // namespace plumb::test
