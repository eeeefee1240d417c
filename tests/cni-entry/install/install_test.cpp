// cni-entry/install: `plumb install` on a node (the test's private node namespace and scratch
// directories) whose default network is a foreign plugin (tests/support/fake_cni_plugin.py):
// the binary is copied, 00-plumb.conflist wraps the primary config with a kubeconfig made from a
// service account, and a pod ADD run as a runtime runs it (the installed binary, the generated
// conflist) delegates the default network to the foreign plugin and attaches the annotated
// network natively, reading the pod and NAD from the Kubernetes API test server with the
// service account's token. The watch mode (started with the DaemonSet's own command line from
// deploy/thin/daemonset.yaml) follows a new primary config and a rotated token, and keeps the config
// on SIGTERM (Multus's cleanup-config-on-exit: false: a rollout never leaves the node without
// it); --cleanup-config-on-exit removes it then, uninstall removes it. The thick DaemonSet's two
// containers (their command lines from deploy/thick/daemonset.yaml) install plumb-shim and serve a
// runtime's ADD and DEL through it. Multus's installer options (its thin entrypoint's) keep their
// meaning: the primary by name, a required cniVersion, the primary renamed NAME.old, the
// kubeconfig path the conflist names.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "cni-entry/install/install.hpp"
#include "engine/base/yaml.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/foreign_plugin.hpp"
#include "tests/support/kube_cluster.hpp"
#include "tests/support/temp_dir.hpp"

using plumb::test::eventually;
using plumb::test::ForeignBin;
using plumb::test::KubeApiServer;
using plumb::test::Node;
using plumb::test::Proc;
using plumb::test::read_file;
using plumb::test::write_file;

namespace {

rapidjson::Document parse(const std::string& s) {
  rapidjson::Document d;
  d.Parse(s.c_str());
  return d;
}


/// The node's directories: CNI bin dir (the foreign plugin installed as "fake-cni"), conf dir
/// with the foreign default network, a service account for the API test server (cluster.api).
struct InstallNode {
  explicit InstallNode(Node& n) : node(n), bin(n), cluster(n) {
    bin.install_fake();
    conf_dir = n.dir() + "/net.d";
    sa_dir = n.dir() + "/serviceaccount";
    write_file(sa_dir + "/token", "sa-token-1\n");
    std::filesystem::copy_file(cluster.api.tls("ca.crt"), sa_dir + "/ca.crt");
    cluster.api.set_tokens({"sa-token-1"});
    write_file(conf_dir + "/10-fake.conflist",
               R"({"cniVersion": "1.0.0", "name": "fake-default", "plugins": [)" +
                   bin.fake_plugin(R"("capabilities": {"portMappings": true})") + "]}");
    write_file(conf_dir + "/README", "not a config");
  }

  std::map<std::string, std::string> env() const {
    return {{"KUBERNETES_SERVICE_HOST", "127.0.0.1"}, {"KUBERNETES_SERVICE_PORT", std::to_string(cluster.api.port())}};
  }
  /// plumb's own keys for this private node (its state in the scratch directory).
  std::string plugin_config() const {
    return R"({"stateDir": ")" + cluster.fx.state() + R"(", "storeDir": ")" + cluster.fx.store() +
           R"(", "logLevel": "debug", "apiTimeoutSeconds": 5, "apiRetries": 1})";
  }
  std::string conflist() const { return read_file(conf_dir + "/00-plumb.conflist"); }
  std::string kubeconfig() const { return read_file(conf_dir + "/plumb.d/plumb.kubeconfig"); }

  Node& node;
  ForeignBin bin;
  plumb::test::KubeCluster cluster;
  std::string conf_dir;
  std::string sa_dir;
};

/// Runs `verb` as libcni runs a conflist's plugin: the plugin entry with the list's name and
/// cniVersion injected, the installed binary its type names, CNI_PATH = the bin dir (`extra_env`:
/// what maps the node's paths into this test, e.g. the daemon's socket).
Proc run_as_runtime(const InstallNode& n, const std::string& verb, const std::string& cid, const std::string& netns,
                    const std::map<std::string, std::string>& extra_env = {}) {
  auto list = parse(n.conflist());
  REQUIRE(list.IsObject());
  rapidjson::Document conf;
  conf.CopyFrom(list["plugins"][0], conf.GetAllocator());
  conf.AddMember("name", rapidjson::Value(list["name"], conf.GetAllocator()), conf.GetAllocator());
  conf.AddMember("cniVersion", rapidjson::Value(list["cniVersion"], conf.GetAllocator()), conf.GetAllocator());
  rapidjson::StringBuffer b;
  rapidjson::Writer<rapidjson::StringBuffer> w(b);
  conf.Accept(w);
  std::map<std::string, std::string> env = {
      {"CNI_COMMAND", verb}, {"CNI_CONTAINERID", cid}, {"CNI_NETNS", netns}, {"CNI_IFNAME", "eth0"},
      {"CNI_PATH", n.bin.dir()},
      {"CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_UID=uid-1;K8S_POD_INFRA_CONTAINER_ID=" + cid}};
  env.insert(extra_env.begin(), extra_env.end());
  return plumb::test::run({n.bin.dir() + "/" + list["plugins"][0]["type"].GetString()}, env, b.GetString());
}

/// The command line of container `name` of deploy/`file`, the plumb binary the one under test and
/// the values `mapped` names (a flag value ending in a key) mapped into this node.
std::vector<std::string> container_command(const std::string& file, const std::string& name,
                                           const std::vector<std::pair<std::string, std::string>>& mapped) {
  const std::string path = std::string(PLUMB_FIXTURES) + "/../../deploy/" + file;
  auto ds = plumb::yaml::load(read_file(path), path);
  REQUIRE_MESSAGE(ds, (ds ? "" : ds.error().text()));
  std::vector<std::string> argv;
  for (const auto& c : (*ds)["spec"]["template"]["spec"]["containers"].GetArray()) {
    if (std::string(c["name"].GetString()) != name) continue;
    for (const auto& a : c["command"].GetArray()) argv.emplace_back(a.GetString());
    for (const auto& a : c["args"].GetArray()) argv.emplace_back(a.GetString());
  }
  REQUIRE_MESSAGE(argv.size() >= 2, "no container " << name << " in " << path);
  argv[0] = plumb::test::plumb_binary();
  for (auto& a : argv) {
    for (const auto& [from, to] : mapped) {
      if (a.size() >= from.size() && a.compare(a.size() - from.size(), from.size(), from) == 0) {
        a = a.substr(0, a.size() - from.size()) + to;
      }
    }
  }
  return argv;
}

/// The command line of deploy/thin/daemonset.yaml's container (or the install container of
/// `file`), its host paths mapped into this node.
std::vector<std::string> daemonset_command(const InstallNode& n, const std::string& file = "thin/daemonset.yaml") {
  auto argv = container_command(file, "install", {{"=/host/opt/cni/bin", "=" + n.bin.dir()},
                                                  {"=/host/etc/cni/net.d", "=" + n.conf_dir},
                                                  {"=/etc/cni/net.d", "=" + n.conf_dir}});
  argv.push_back("--service-account-dir=" + n.sa_dir);
  argv.push_back("--plugin-config=" + n.plugin_config());
  argv.push_back("--interval-seconds=0.1");
  return argv;
}

std::string cluster_network(const std::string& conflist) {
  auto d = parse(conflist);
  return d.IsObject() ? d["plugins"][0]["clusterNetwork"].GetString() : "";
}

/// The conflist's cniVersion, or its plugin's `key` ("" when there is no conflist).
std::string conflist_value(const std::string& conflist, const char* key = nullptr) {
  auto d = parse(conflist);
  if (!d.IsObject()) return "";
  const auto& v = key == nullptr ? d["cniVersion"] : d["plugins"][0][key];
  return v.IsString() ? v.GetString() : "";
}

/// A node's directories without a cluster, for install's options: a bin dir, a conf dir whose
/// primary config is 10-fake.conflist (cniVersion 1.0.0), a service account whose files install
/// reads (not a real API server's).
struct ConfDir {
  ConfDir() {
    std::filesystem::create_directories(bin);
    write_file(conf + "/10-fake.conflist", kPrimary);
    write_file(sa + "/token", "sa-token\n");
    write_file(sa + "/ca.crt", "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n");
  }
  /// `plumb install` with the directories and `flags`, as in a pod (the service host set).
  Proc install(const std::vector<std::string>& flags) const {
    std::vector<std::string> argv = {plumb::test::plumb_binary(), "install", "--cni-bin-dir=" + bin, "--cni-conf-dir=" + conf,
                                     "--service-account-dir=" + sa};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return plumb::test::run(argv, {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
  }
  std::string conflist() const { return read_file(conf + "/00-plumb.conflist"); }
  bool has(const std::string& name) const { return std::filesystem::exists(conf + "/" + name); }

  static constexpr const char* kPrimary = R"({"cniVersion": "1.0.0", "name": "fake-default", "plugins": [{"type": "fake-cni"}]})";
  plumb::test::TempDir dir;
  std::string bin = dir.path + "/bin";
  std::string conf = dir.path + "/net.d";
  std::string sa = dir.path + "/serviceaccount";
};

}  // namespace


TEST_CASE("install on a node whose default network is a foreign plugin: ADD through the generated conflist delegates it and attaches the annotated network natively") {
  Node node;
  InstallNode n(node);
  n.cluster.add_nad("default", "blue", plumb::test::bridge_net("br-blue", "198.51.100.0/24", n.cluster.fx.ipam_dir()));
  n.cluster.add_pod("default", "web", "uid-1", {{"k8s.v1.cni.cncf.io/networks", "blue"}});
  const std::vector<std::string> install = {plumb::test::plumb_binary(), "install", "--cni-bin-dir", n.bin.dir(),
                                            "--cni-conf-dir=" + n.conf_dir, "--service-account-dir=" + n.sa_dir,
                                            "--plugin-config=" + n.plugin_config()};
  // The DaemonSet gives the install container NODE_NAME (downward API); a runtime does not.
  auto install_env = n.env();
  install_env["NODE_NAME"] = "node-7";
  Proc inst = plumb::test::run(install, install_env);
  INFO("install: ", inst.err);
  REQUIRE(inst.exit_code == 0);

  // The binary, byte for byte, executable; the conflist around the primary config; the kubeconfig.
  const std::string installed = n.bin.dir() + "/plumb";
  CHECK(std::filesystem::file_size(installed) == std::filesystem::file_size(plumb::test::plumb_binary()));
  CHECK(read_file(installed) == read_file(plumb::test::plumb_binary()));
  struct stat st {};
  REQUIRE(::stat(installed.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0755);
  auto list = parse(n.conflist());
  REQUIRE(list.IsObject());
  CHECK(std::string(list["cniVersion"].GetString()) == "1.0.0");
  const auto& entry = list["plugins"][0];
  CHECK(std::string(entry["type"].GetString()) == "plumb");
  CHECK(std::string(entry["clusterNetwork"].GetString()) == n.conf_dir + "/10-fake.conflist");
  CHECK(std::string(entry["kubeconfig"].GetString()) == n.conf_dir + "/plumb.d/plumb.kubeconfig");
  CHECK(entry["capabilities"]["portMappings"].GetBool());
  CHECK(entry["capabilities"]["io.kubernetes.cri.pod-annotations"].GetBool());
  CHECK(std::string(entry["nodeName"].GetString()) == "node-7");
  REQUIRE(::stat((n.conf_dir + "/plumb.d/plumb.kubeconfig").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);

  // A pod ADD as the runtime runs the conflist: eth0 from the foreign plugin, net1 native.
  std::string ns = node.add_netns("web");
  Proc add = run_as_runtime(n, "ADD", "ctr-1", ns);
  INFO("ADD: ", add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(plumb::test::link_names("web") == std::set<std::string>{"lo", "eth0", "net1"});
  CHECK(plumb::test::ipv4_of("web", "net1").rfind("198.51.100.", 0) == 0);
  auto adds = n.bin.calls("ADD");
  REQUIRE(adds.size() == 1);
  CHECK(std::string(adds[0].env["CNI_IFNAME"].GetString()) == "eth0");
  CHECK(std::string(adds[0].stdin["name"].GetString()) == "fake-default");
  // The pod and the NAD were read, and network-status written, with the service account's token.
  CHECK(n.cluster.api.count("GET", "/api/v1/namespaces/default/pods/web", "200") == 1);
  CHECK(n.cluster.api.count("GET", "/apis/k8s.cni.cncf.io/v1/namespaces/default/network-attachment-definitions/blue", "200") == 1);
  CHECK(n.cluster.api.count("PATCH", "/api/v1/namespaces/default/pods/web/status", "200") == 1);
  auto status = parse(n.cluster.network_status("default", "web"));
  REQUIRE(status.IsArray());
  REQUIRE(status.Size() == 2);
  CHECK(std::string(status[0]["name"].GetString()) == "fake-default");
  CHECK(std::string(status[1]["name"].GetString()) == "default/blue");

  Proc del = run_as_runtime(n, "DEL", "ctr-1", ns);
  INFO("DEL: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(n.bin.calls("DEL").size() == 1);
  CHECK(plumb::test::link_names("web") == std::set<std::string>{"lo"});
  CHECK(plumb::test::ip_json("link show type veth").Size() == 0);

  // Installing again rewrites nothing that is unchanged.
  REQUIRE(::stat((n.conf_dir + "/00-plumb.conflist").c_str(), &st) == 0);
  const ino_t before = st.st_ino;
  REQUIRE(plumb::test::run(install, install_env).exit_code == 0);
  REQUIRE(::stat((n.conf_dir + "/00-plumb.conflist").c_str(), &st) == 0);
  CHECK(st.st_ino == before);

  Proc un = plumb::test::run({plumb::test::plumb_binary(), "uninstall", "--cni-conf-dir=" + n.conf_dir});
  INFO("uninstall: ", un.err);
  CHECK(un.exit_code == 0);
  CHECK_FALSE(std::filesystem::exists(n.conf_dir + "/00-plumb.conflist"));
  CHECK_FALSE(std::filesystem::exists(n.conf_dir + "/plumb.d"));
  CHECK(std::filesystem::exists(n.conf_dir + "/10-fake.conflist"));
  CHECK(std::filesystem::exists(installed));
}

TEST_CASE("the DaemonSet's install --watch follows the primary config and the token, and keeps the config on SIGTERM") {
  Node node;
  InstallNode n(node);
  const std::string log = node.dir() + "/install.log";
  pid_t pid = plumb::test::start_child(daemonset_command(n), n.env(), log);
  REQUIRE(pid > 0);
  plumb::test::StopOnExit reaper{{&pid}};  // a failed REQUIRE must not leave the watcher running
  INFO("install log: ", read_file(log));
  const std::string fake = n.conf_dir + "/10-fake.conflist";
  const std::string fake_text = read_file(fake);
  CHECK(eventually([&] { return cluster_network(n.conflist()) == fake; }));
  CHECK(std::filesystem::exists(n.bin.dir() + "/plumb"));
  CHECK(n.kubeconfig().find("sa-token-1") != std::string::npos);

  // A config that sorts first becomes the primary (and its cniVersion plumb's).
  write_file(n.conf_dir + "/05-early.conf", R"({"cniVersion": "0.4.0", "name": "early", "type": "fake-cni"})");
  CHECK(eventually([&] { return cluster_network(n.conflist()) == n.conf_dir + "/05-early.conf"; }));
  CHECK(std::string(parse(n.conflist())["cniVersion"].GetString()) == "0.4.0");
  // A rotated service-account token reaches the kubeconfig.
  write_file(n.sa_dir + "/token", "sa-token-2\n");
  CHECK(eventually([&] { return n.kubeconfig().find("sa-token-2") != std::string::npos; }));
  // No primary config left: plumb's conflist goes too; one back: it is written again.
  std::filesystem::remove(n.conf_dir + "/05-early.conf");
  std::filesystem::remove(fake);
  CHECK(eventually([&] { return !std::filesystem::exists(n.conf_dir + "/00-plumb.conflist"); }));
  write_file(fake, fake_text);
  CHECK(eventually([&] { return cluster_network(n.conflist()) == fake; }));

  // SIGTERM (a rollout, or the DaemonSet deleted): exit 0, the config and the binary kept.
  const std::string conflist = n.conflist();
  REQUIRE(::kill(pid, SIGTERM) == 0);
  int status = -1;
  const bool exited = eventually([&] { return ::waitpid(pid, &status, WNOHANG) == pid; });
  REQUIRE(exited);
  pid = -1;
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(n.conflist() == conflist);
  CHECK(n.kubeconfig().find("sa-token-2") != std::string::npos);
  CHECK(std::filesystem::exists(n.bin.dir() + "/plumb"));
  CHECK(read_file(log).find("kept " + n.conf_dir + "/00-plumb.conflist on exit") != std::string::npos);
}

TEST_CASE("install --cleanup-config-on-exit (Multus's) watches without --watch and removes the config on SIGTERM") {
  Node node;
  InstallNode n(node);
  const std::string log = node.dir() + "/install.log";
  pid_t pid = plumb::test::start_child({plumb::test::plumb_binary(), "install", "--cni-bin-dir=" + n.bin.dir(),
                                        "--cni-conf-dir=" + n.conf_dir, "--service-account-dir=" + n.sa_dir,
                                        "--cleanup-config-on-exit", "--interval-seconds=0.1"},
                                       n.env(), log);
  REQUIRE(pid > 0);
  plumb::test::StopOnExit reaper{{&pid}};
  INFO("install log: ", read_file(log));
  CHECK(eventually([&] { return cluster_network(n.conflist()) == n.conf_dir + "/10-fake.conflist"; }));
  // It watches: a config that sorts first becomes the primary.
  write_file(n.conf_dir + "/05-early.conf", R"({"cniVersion": "0.4.0", "name": "early", "type": "fake-cni"})");
  CHECK(eventually([&] { return cluster_network(n.conflist()) == n.conf_dir + "/05-early.conf"; }));
  CHECK(std::filesystem::exists(n.conf_dir + "/plumb.d/plumb.kubeconfig"));

  REQUIRE(::kill(pid, SIGTERM) == 0);
  int status = -1;
  REQUIRE(eventually([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }));
  pid = -1;
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_FALSE(std::filesystem::exists(n.conf_dir + "/00-plumb.conflist"));
  CHECK_FALSE(std::filesystem::exists(n.conf_dir + "/plumb.d"));
  CHECK(std::filesystem::exists(n.conf_dir + "/05-early.conf"));
  CHECK(std::filesystem::exists(n.bin.dir() + "/plumb"));
}

TEST_CASE("the thick DaemonSet: install --thick installs plumb-shim and names it in the conflist; its daemon container serves a runtime's ADD and DEL through the shim") {
  Node node;
  InstallNode n(node);
  n.cluster.add_nad("default", "blue", plumb::test::bridge_net("br-blue", "198.51.100.0/24", n.cluster.fx.ipam_dir()));
  n.cluster.add_pod("default", "web", "uid-1", {{"k8s.v1.cni.cncf.io/networks", "blue"}});
  const std::string run_dir = node.dir() + "/run-plumb";  // the node's /run/plumb
  std::filesystem::create_directories(run_dir);
  const std::string usage = node.dir() + "/daemon-usage";
  auto daemon_argv = container_command("thick/daemonset.yaml", "daemon", {{"=/run/plumb/plumb.sock", "=" + run_dir + "/plumb.sock"}});
  REQUIRE(std::find(daemon_argv.begin(), daemon_argv.end(), "--socket=" + run_dir + "/plumb.sock") != daemon_argv.end());
  daemon_argv.push_back("--usage-log=" + usage);
  pid_t install = plumb::test::start_child(daemonset_command(n, "thick/daemonset.yaml"), n.env(), node.dir() + "/install.log");
  pid_t daemon = plumb::test::start_child(daemon_argv, {}, node.dir() + "/daemon.log");
  plumb::test::StopOnExit reaper{{&install, &daemon}};  // neither container outlives a failed REQUIRE
  INFO("install log: ", read_file(node.dir() + "/install.log"), "\ndaemon log: ", read_file(node.dir() + "/daemon.log"));
  REQUIRE(eventually([&] { return !n.conflist().empty() && std::filesystem::exists(run_dir + "/plumb.sock"); }));

  // Both binaries, byte for byte, executable; the conflist's plugin is the shim.
  for (const auto& [installed, built] : {std::pair{n.bin.dir() + "/plumb", plumb::test::plumb_binary()},
                                         std::pair{n.bin.dir() + "/plumb-shim", plumb::test::plumb_shim_binary()}}) {
    CAPTURE(installed);
    CHECK(read_file(installed) == read_file(built));
    struct stat st {};
    REQUIRE(::stat(installed.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0755);
  }
  auto list = parse(n.conflist());
  REQUIRE(list.IsObject());
  CHECK(std::string(list["plugins"][0]["type"].GetString()) == "plumb-shim");
  CHECK(std::string(list["plugins"][0]["clusterNetwork"].GetString()) == n.conf_dir + "/10-fake.conflist");

  // The runtime executes the installed plumb-shim; the daemon's worker serves it.
  const std::map<std::string, std::string> socket = {{"PLUMB_DAEMON_SOCKET", run_dir + "/plumb.sock"}};
  std::string ns = node.add_netns("web");
  Proc add = run_as_runtime(n, "ADD", "ctr-1", ns, socket);
  INFO("ADD: ", add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(plumb::test::link_names("web") == std::set<std::string>{"lo", "eth0", "net1"});
  CHECK(plumb::test::ipv4_of("web", "net1").rfind("198.51.100.", 0) == 0);
  CHECK(n.bin.calls("ADD").size() == 1);
  CHECK(n.cluster.api.count("PATCH", "/api/v1/namespaces/default/pods/web/status", "200") == 1);
  Proc del = run_as_runtime(n, "DEL", "ctr-1", ns, socket);
  INFO("DEL: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(n.bin.calls("DEL").size() == 1);
  CHECK(plumb::test::link_names("web") == std::set<std::string>{"lo"});
  CHECK(plumb::test::lines_of(read_file(usage)).size() == 2);  // both through the daemon, not the fallback

  // The install container ends (a rollout): the conflist naming the shim and both binaries stay.
  REQUIRE(::kill(install, SIGTERM) == 0);
  int status = -1;
  REQUIRE(eventually([&] { return ::waitpid(install, &status, WNOHANG) == install; }));
  install = -1;
  CHECK(WIFEXITED(status));
  CHECK(conflist_value(n.conflist(), "type") == "plumb-shim");
  CHECK(std::filesystem::exists(n.bin.dir() + "/plumb-shim"));
}

TEST_CASE("install without a primary CNI config fails and writes no config; a bad --plugin-config fails naming its key") {
  Node node;
  InstallNode n(node);
  std::filesystem::remove(n.conf_dir + "/10-fake.conflist");
  Proc p = plumb::test::run({plumb::test::plumb_binary(), "install", "--cni-bin-dir=" + n.bin.dir(),
                             "--cni-conf-dir=" + n.conf_dir});
  CHECK(p.exit_code == 1);
  CHECK(p.err.find("no primary CNI config in " + n.conf_dir) != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(n.conf_dir + "/00-plumb.conflist"));

  write_file(n.conf_dir + "/10-x.conf", R"({"cniVersion": "1.0.0", "name": "x", "type": "fake-cni"})");
  p = plumb::test::run({plumb::test::plumb_binary(), "install", "--cni-bin-dir=" + n.bin.dir(), "--cni-conf-dir=" + n.conf_dir,
                        R"(--plugin-config={"kubeconfig": "/elsewhere"})"});
  CHECK(p.exit_code == 1);
  CHECK(p.err.find("--plugin-config sets \"kubeconfig\"") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(n.conf_dir + "/00-plumb.conflist"));
  p = plumb::test::run({plumb::test::plumb_binary(), "install", "--cni-conf-dir=" + n.conf_dir});
  CHECK(p.exit_code == 2);
  CHECK(p.err.find("--cni-bin-dir is required") != std::string::npos);
}


TEST_CASE("install --multus-master-cni-file-name (Multus's): the primary config by its name, not the lexically first") {
  ConfDir d;
  write_file(d.conf + "/05-early.conf", R"({"cniVersion": "0.4.0", "name": "early", "type": "fake-cni"})");
  Proc p = d.install({"--multus-master-cni-file-name=10-fake.conflist"});
  INFO(p.err);
  REQUIRE(p.exit_code == 0);
  CHECK(cluster_network(d.conflist()) == d.conf + "/10-fake.conflist");
  CHECK(conflist_value(d.conflist()) == "1.0.0");
  p = d.install({});
  REQUIRE(p.exit_code == 0);
  CHECK(cluster_network(d.conflist()) == d.conf + "/05-early.conf");
  // A name that is not there: no primary config yet (the conflist goes, as when the primary goes).
  p = d.install({"--multus-master-cni-file-name", "99-missing.conf"});
  CHECK(p.exit_code == 1);
  CHECK(p.err.find("no primary CNI config in " + d.conf) != std::string::npos);
  CHECK_FALSE(d.has("00-plumb.conflist"));
}

TEST_CASE("install --cni-version (Multus's): a primary config of another cniVersion fails naming both; the same one passes") {
  ConfDir d;
  Proc p = d.install({"--cni-version=0.4.0"});
  CHECK(p.exit_code == 1);
  CHECK(p.err.find("--cni-version \"0.4.0\" differs from primary CNI config " + d.conf + "/10-fake.conflist's cniVersion \"1.0.0\"") !=
        std::string::npos);
  CHECK_FALSE(d.has("00-plumb.conflist"));
  CHECK_FALSE(d.has("plumb.d"));
  p = d.install({"--cni-version", "1.0.0"});
  INFO(p.err);
  REQUIRE(p.exit_code == 0);
  CHECK(conflist_value(d.conflist()) == "1.0.0");
}

TEST_CASE("install --multus-kubeconfig-file-host (Multus's): the kubeconfig path the conflist names; the file is still written") {
  ConfDir d;
  Proc p = d.install({"--host-cni-conf-dir=/etc/cni/net.d", "--multus-kubeconfig-file-host=/etc/cni/net.d/multus.d/multus.kubeconfig"});
  INFO(p.err);
  REQUIRE(p.exit_code == 0);
  CHECK(conflist_value(d.conflist(), "kubeconfig") == "/etc/cni/net.d/multus.d/multus.kubeconfig");
  CHECK(conflist_value(d.conflist(), "clusterNetwork") == "/etc/cni/net.d/10-fake.conflist");
  CHECK(read_file(d.conf + "/plumb.d/plumb.kubeconfig").find("sa-token") != std::string::npos);
  // Without it: the kubeconfig written, as the node names it.
  REQUIRE(d.install({"--host-cni-conf-dir=/etc/cni/net.d"}).exit_code == 0);
  CHECK(conflist_value(d.conflist(), "kubeconfig") == "/etc/cni/net.d/plumb.d/plumb.kubeconfig");
}

TEST_CASE("install --rename-conf-file (Multus's): the primary NAME becomes NAME.old, which the conflist names and a pod's ADD uses; uninstall gives the name back") {
  Node node;
  InstallNode n(node);
  n.cluster.add_pod("default", "web", "uid-1", {});
  const std::string fake = n.conf_dir + "/10-fake.conflist";
  const std::string fake_text = read_file(fake);
  const std::string log = node.dir() + "/install.log";
  pid_t pid = plumb::test::start_child({plumb::test::plumb_binary(), "install", "--cni-bin-dir=" + n.bin.dir(),
                                        "--cni-conf-dir=" + n.conf_dir, "--service-account-dir=" + n.sa_dir,
                                        "--plugin-config=" + n.plugin_config(), "--rename-conf-file", "--watch",
                                        "--interval-seconds=0.1"},
                                       n.env(), log);
  REQUIRE(pid > 0);
  plumb::test::StopOnExit reaper{{&pid}};
  INFO("install log: ", read_file(log));
  REQUIRE(eventually([&] { return cluster_network(n.conflist()) == fake + ".old"; }));
  CHECK_FALSE(std::filesystem::exists(fake));
  CHECK(read_file(fake + ".old") == fake_text);

  // A runtime's ADD and DEL through the conflist: the renamed primary is the default network.
  std::string ns = node.add_netns("web");
  Proc add = run_as_runtime(n, "ADD", "ctr-1", ns);
  INFO("ADD: ", add.out, add.err);
  CHECK(add.exit_code == 0);
  CHECK(n.bin.calls("ADD").size() == 1);

  // The primary's own plugin writes its config again (a new version): taken, and renamed again.
  const std::string newer = R"({"cniVersion": "0.4.0", "name": "fake-default", "plugins": [{"type": "fake-cni"}]})";
  write_file(fake, newer);
  CHECK(eventually([&] { return !std::filesystem::exists(fake) && read_file(fake + ".old") == newer; }));
  CHECK(eventually([&] { return conflist_value(n.conflist()) == "0.4.0"; }));
  CHECK(cluster_network(n.conflist()) == fake + ".old");

  // Ended: the renamed primary and the conflist stay.
  REQUIRE(::kill(pid, SIGTERM) == 0);
  int status = -1;
  REQUIRE(eventually([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }));
  pid = -1;
  CHECK(cluster_network(n.conflist()) == fake + ".old");
  Proc del = run_as_runtime(n, "DEL", "ctr-1", ns);
  INFO("DEL: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(n.bin.calls("DEL").size() == 1);

  // uninstall: the primary has its name back, plumb's files are gone.
  Proc un = plumb::test::run({plumb::test::plumb_binary(), "uninstall", "--cni-conf-dir", n.conf_dir});
  INFO("uninstall: ", un.err);
  CHECK(un.exit_code == 0);
  CHECK(read_file(fake) == newer);
  CHECK_FALSE(std::filesystem::exists(fake + ".old"));
  CHECK_FALSE(std::filesystem::exists(n.conf_dir + "/00-plumb.conflist"));
}

TEST_CASE("install --rename-conf-file once, then again: the renamed primary stays the primary; --cleanup-config-on-exit gives its name back") {
  ConfDir d;
  REQUIRE(d.install({"--rename-conf-file"}).exit_code == 0);
  CHECK(cluster_network(d.conflist()) == d.conf + "/10-fake.conflist.old");
  // A later install (the next pod of the DaemonSet) finds the primary under its new name, even
  // with a config sorting after it.
  write_file(d.conf + "/20-other.conf", R"({"cniVersion": "1.0.0", "name": "other", "type": "fake-cni"})");
  Proc p = d.install({"--rename-conf-file=true"});
  INFO(p.err);
  REQUIRE(p.exit_code == 0);
  CHECK(cluster_network(d.conflist()) == d.conf + "/10-fake.conflist.old");
  CHECK(d.has("20-other.conf"));
  CHECK_FALSE(d.has("20-other.conf.old"));

  pid_t pid = plumb::test::start_child({plumb::test::plumb_binary(), "install", "--cni-bin-dir=" + d.bin, "--cni-conf-dir=" + d.conf,
                                        "--rename-conf-file", "--cleanup-config-on-exit", "--interval-seconds=0.1"},
                                       {}, d.dir.path + "/install.log");
  plumb::test::StopOnExit reaper{{&pid}};
  INFO("install log: ", read_file(d.dir.path + "/install.log"));
  REQUIRE(eventually([&] { return read_file(d.dir.path + "/install.log").find("watching") != std::string::npos; }));
  REQUIRE(::kill(pid, SIGTERM) == 0);
  int status = -1;
  REQUIRE(eventually([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }));
  pid = -1;
  CHECK(WIFEXITED(status));
  CHECK(read_file(d.conf + "/10-fake.conflist") == ConfDir::kPrimary);
  CHECK_FALSE(d.has("10-fake.conflist.old"));
  CHECK_FALSE(d.has("00-plumb.conflist"));
}

TEST_CASE("the DaemonSet's NODE_NAME reaches the cluster IPAM of a plumb the runtime executes: a node slice is taken for that node") {
  Node node;
  InstallNode n(node);
  n.cluster.add_nad("default", "wb", R"({"cniVersion": "0.4.0", "type": "bridge", "bridge": "br-wb", "ipam": {"type": "whereabouts",
      "range": "198.51.100.0/24", "node_slice_size": "/28", "network_name": "wb"}})");
  n.cluster.add_pod("default", "web", "uid-1", {{"k8s.v1.cni.cncf.io/networks", "wb"}});
  auto env = n.env();
  env["NODE_NAME"] = "node-7";  // the DaemonSet's downward API; the runtime gives plumb none
  Proc inst = plumb::test::run({plumb::test::plumb_binary(), "install", "--cni-bin-dir=" + n.bin.dir(), "--cni-conf-dir=" + n.conf_dir,
                                "--service-account-dir=" + n.sa_dir, "--plugin-config=" + n.plugin_config()},
                               env);
  REQUIRE_MESSAGE(inst.exit_code == 0, inst.err);
  CHECK(std::string(parse(n.conflist())["plugins"][0]["nodeName"].GetString()) == "node-7");

  std::string ns = node.add_netns("web");
  Proc add = run_as_runtime(n, "ADD", "ctr-1", ns);
  REQUIRE_MESSAGE(add.exit_code == 0, add.out << add.err);
  auto slices = parse(n.cluster.api.get("nodeslicepools", "kube-system", "wb"));
  REQUIRE(slices.IsObject());
  std::vector<std::string> nodes;
  for (const auto& a : slices["status"]["allocations"].GetArray()) {
    if (!std::string(a["nodeName"].GetString()).empty()) nodes.emplace_back(a["nodeName"].GetString());
  }
  CHECK(nodes == std::vector<std::string>{"node-7"});
  Proc del = run_as_runtime(n, "DEL", "ctr-1", ns);
  CHECK_MESSAGE(del.exit_code == 0, del.out << del.err);
}
