#include "tests/support/pod_fixture.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace plumb::test {

void write_file(const std::string& path, const std::string& content) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, std::ios::trunc);
  f << content;
}

std::set<std::string> link_names(const std::string& ns) {
  auto d = ip_json((ns.empty() ? std::string() : "-n " + ns + " ") + "link show");
  std::set<std::string> out;
  for (auto& l : d.GetArray()) out.insert(l["ifname"].GetString());
  return out;
}

std::vector<std::string> address_files(const std::string& dir) {
  std::vector<std::string> out;
  for (auto& f : PodFixture::files_under(dir)) {
    auto base = std::filesystem::path(f).filename().string();
    if (base != "lock" && !base.starts_with("last_reserved_ip")) out.push_back(f);
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return {};
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

PodFixture::PodFixture(Node& node) : node_(node) {
  // The cluster-wide default network: a bridge with a gateway, masquerade, dual stack.
  write_file(default_conflist(), R"({
  "cniVersion": "1.0.0", "name": "default-net",
  "plugins": [
    {"type": "bridge", "bridge": "plumb0", "isGateway": true, "isDefaultGateway": true, "ipMasq": true,
     "capabilities": {"ips": true, "mac": true},
     "ipam": {"type": "host-local", "dataDir": ")" + ipam_dir() + R"(",
              "ranges": [[{"subnet": "203.0.113.0/24"}], [{"subnet": "2001:db8:0:1::/64"}]]}},
    {"type": "loopback"}
  ]})");
  std::filesystem::create_directories(store() + "/nads");
}

std::string PodFixture::config(const std::string& extra, const std::string& cni_version) const {
  std::string c = R"({"cniVersion": ")" + cni_version + R"(", "name": "plumb", "type": "plumb", "clusterNetwork": ")" +
                  default_conflist() + R"(", "storeDir": ")" + store() + R"(", "stateDir": ")" + state() +
                  R"(", "confDir": ")" + node_.dir() + R"(/net.d", "logLevel": "debug")";
  if (!extra.empty()) c += ", " + extra;
  return c + "}";
}

void PodFixture::write_nad_file(const std::string& file, const std::string& yaml) const {
  write_file(store() + "/nads/" + file + ".yaml", yaml);
}

void PodFixture::add_nad(const std::string& ns, const std::string& name, const std::string& config_json) const {
  write_nad_file(ns + "-" + name,
                 "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: " + name +
                     "\n  namespace: " + ns + "\nspec:\n  config: '" + config_json + "'\n");
}

void PodFixture::add_pod(const std::string& ns, const std::string& name, const std::string& networks) const {
  std::string yaml = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\n";
  if (!networks.empty()) yaml += "  annotations:\n    k8s.v1.cni.cncf.io/networks: '" + networks + "'\n";
  write_file(store() + "/pods/" + ns + "/" + name + ".yaml", yaml);
}

std::string PodFixture::status_of(const std::string& ns, const std::string& name) const {
  return read_file(store() + "/status/" + ns + "/" + name + ".json");
}

Proc PodFixture::run(const std::string& command, const std::string& container_id, const std::string& netns,
                     const std::string& pod_ns, const std::string& pod_name, const std::string& conf,
                     const std::string& ifname) const {
  std::map<std::string, std::string> env = {
      {"CNI_COMMAND", command},
      {"CNI_CONTAINERID", container_id},
      {"CNI_NETNS", netns},
      {"CNI_IFNAME", ifname},
      {"CNI_PATH", "/usr/lib/cni"},
      {"CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAMESPACE=" + pod_ns + ";K8S_POD_NAME=" + pod_name +
                       ";K8S_POD_INFRA_CONTAINER_ID=" + container_id},
  };
  return node_.plumb(env, conf);
}

Proc PodFixture::run_with(const std::string& binary, const std::map<std::string, std::string>& extra_env,
                          const std::string& command, const std::string& container_id, const std::string& netns,
                          const std::string& pod_ns, const std::string& pod_name, const std::string& conf,
                          const std::string& ifname) const {
  std::map<std::string, std::string> env = {
      {"CNI_COMMAND", command},
      {"CNI_CONTAINERID", container_id},
      {"CNI_NETNS", netns},
      {"CNI_IFNAME", ifname},
      {"CNI_PATH", "/usr/lib/cni"},
      {"CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAMESPACE=" + pod_ns + ";K8S_POD_NAME=" + pod_name},
  };
  for (auto& [k, v] : extra_env) env[k] = v;
  return plumb::test::run({binary}, env, conf);
}

std::string ipv4_of(const std::string& ns, const std::string& dev) {
  auto d = ip_json((ns.empty() ? std::string() : "-n " + ns + " ") + "addr show dev " + dev);
  for (auto& a : d[0]["addr_info"].GetArray()) {
    if (std::string(a["family"].GetString()) == "inet") return std::string(a["local"].GetString()) + "/" + std::to_string(a["prefixlen"].GetInt());
  }
  return {};
}

std::vector<std::string> PodFixture::files_under(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return out;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); !ec && it != std::filesystem::recursive_directory_iterator();
       it.increment(ec)) {
    if (is_recycled_dir(it->path()) && it->is_directory(ec)) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec)) out.push_back(it->path().string());
  }
  return out;
}

}  // namespace plumb::test
