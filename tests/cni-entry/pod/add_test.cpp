// ADD (cni-entry/pod/add.cpp) as a runtime drives it: the key's lock covers the kernel changes and
// the records only, never a request to the API server, so a DEL of the sandbox never waits behind
// an ADD stuck on an unresponsive API server (multus-cni #586's other half).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "tests/support/bounded_run.hpp"
#include "tests/support/kube_cluster.hpp"

using plumb::test::KubeCluster;
using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::read_file;
using plumb::test::write_file;
namespace fs = std::filesystem;

namespace {

/// Starts plumb in the background with `env` and stdin from `config_file`; returns its pid.
pid_t start_plumb(const std::map<std::string, std::string>& env, const std::string& config_file) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int in = ::open(config_file.c_str(), O_RDONLY);
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(in, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    plumb::test::exec_child({plumb::test::plumb_binary()}, env);
  }
  return pid;
}

}  // namespace

TEST_CASE("a DEL completes while the ADD of the same sandbox still waits for the API server's answer") {
  Node node;
  KubeCluster c(node);
  c.add_pod("default", "web", "uid-1", {});
  const std::string ns = node.add_netns("web");
  // The network-status PATCH is answered only after a long delay; the ADD waits for it.
  c.api.set_faults(R"([{"match": "^PATCH /api/v1/namespaces/default/pods/web/status", "action": "delay", "seconds": 300}])");
  const std::string conf = c.fx.config(R"("kubeconfig": ")" + c.kubeconfig + R"(", "apiTimeoutSeconds": 600, "apiRetries": 0)");
  write_file(node.dir() + "/conf.json", conf);
  std::map<std::string, std::string> env = {{"CNI_COMMAND", "ADD"},     {"CNI_CONTAINERID", "ctr-1"}, {"CNI_NETNS", ns},
                                            {"CNI_IFNAME", "eth0"},     {"CNI_PATH", "/usr/lib/cni"},
                                            {"CNI_ARGS", "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_UID=uid-1"}};
  pid_t add = start_plumb(env, node.dir() + "/conf.json");
  // The ADD has made and recorded everything once its record says "ready"; what is left is the
  // status PATCH the server holds.
  const std::string record = c.fx.state() + "/containers/ctr-1:eth0/0-eth0.json";
  bool ready = false;
  for (int i = 0; i < 600 && !ready; ++i) {  // polled, at most 60 s
    ready = read_file(record).find(R"("phase":"ready")") != std::string::npos;
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE(ready);

  env["CNI_COMMAND"] = "DEL";
  auto del = plumb::test::run_bounded({plumb::test::plumb_binary()}, env, conf, {.seconds = 120});
  INFO(del.out, del.err);
  // Still stuck on the API server while its sandbox's DEL has finished.
  const bool add_running = ::waitpid(add, nullptr, WNOHANG) == 0;
  CHECK(add_running);
  CHECK(del.exit_code == 0);
  CHECK(link_names("web") == std::set<std::string>{"lo"});
  CHECK(c.records().empty());

  c.api.stop();  // the held request fails at once: the ADD ends (its status write logged as failed)
  int status = 0;
  REQUIRE(::waitpid(add, &status, 0) == add);
  CHECK(WIFEXITED(status));
  CHECK(link_names("web") == std::set<std::string>{"lo"});
}
