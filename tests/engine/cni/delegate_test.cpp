// engine/cni/delegate: finding a delegated plugin by type (binDir first, then CNI_PATH), the
// environment it gets (the caller's, CNI_* replaced, as libcni passes it), its CNI error passed on with its code and
// its stderr, a failure without a CNI error, a plugin killed at the time limit, prevResult
// injection and result decoding in the version the plugin names. The plugins are small shell
// scripts written by each case.
#include "engine/cni/delegate.hpp"

#include <doctest/doctest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "tests/support/pod_fixture.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;
using namespace std::chrono_literals;

namespace {

std::string install(const std::string& dir, const std::string& type, const std::string& script) {
  std::string path = dir + "/" + type;
  plumb::test::write_file(path, "#!/bin/sh\n" + script);
  ::chmod(path.c_str(), 0755);
  return path;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

cni::Invocation add_inv() { return cni::Invocation{"ADD", "ctr-1", "/run/netns/pod", "net1", "K8S_POD_NAME=p;IgnoreUnknown=1"}; }

}  // namespace

TEST_CASE("make_search: binDir first, then CNI_PATH's entries, without duplicates or empties") {
  auto s = cni::make_search("/opt/cni/bin", "/usr/lib/cni::/opt/cni/bin:/x", 2s);
  CHECK(s.dirs == std::vector<std::string>{"/opt/cni/bin", "/usr/lib/cni", "/x"});
  CHECK(s.cni_path() == "/opt/cni/bin:/usr/lib/cni:/x");
  CHECK(s.timeout == 2s);
}

TEST_CASE("delegate_args: CNI_ARGS as Multus builds them for its delegates") {
  CHECK(cni::delegate_args({}) == "IgnoreUnknown=true;K8S_POD_NAMESPACE=;K8S_POD_NAME=;K8S_POD_INFRA_CONTAINER_ID=;K8S_POD_UID=");
  CHECK(cni::delegate_args({{"K8S_POD_NAME", "web"}, {"IgnoreUnknown", "1"}, {"MAC", "02:00:00:00:00:01"}, {"K8S_POD_NAMESPACE", "ns"},
                            {"K8S_POD_UID", "u-1"}}) ==
        "IgnoreUnknown=true;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=;K8S_POD_UID=u-1;MAC=02:00:00:00:00:01");
}

TEST_CASE("find_plugin: the first directory that has it; a missing type names itself and every directory") {
  plumb::test::Node node;
  std::string a = node.dir() + "/a", b = node.dir() + "/b";
  install(b, "foreign", "exit 0\n");
  plumb::test::write_file(a + "/not-exec", "x");  // not executable: skipped
  install(b, "not-exec", "exit 0\n");
  auto s = cni::make_search(a, b, 1s);
  CHECK(cni::find_plugin("foreign", s).value() == b + "/foreign");
  CHECK(cni::find_plugin("not-exec", s).value() == b + "/not-exec");
  auto missing = cni::find_plugin("calico", s);
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().cni_code == cni_code::kNotFound);
  CHECK(missing.error().msg == "CNI plugin type \"calico\" not found in " + a + ", " + b);
  for (const char* bad : {"../foreign", "a/b", "", ".."}) {
    auto r = cni::find_plugin(bad, s);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().cni_code == cni_code::kInvalidConfig);
  }
}

TEST_CASE("plugin_environment: libcni's AsEnv: the six CNI_* values first, the caller's other variables after, PATH defaulted") {
  const char* base[] = {"HTTPS_PROXY=http://proxy.example:3128", "CNI_COMMAND=DEL", "CNI_IFNAME=eth0", "KUBERNETES_SERVICE_HOST=10.96.0.1",
                        "CNI_NETNS_OVERRIDE=1", "PATH=/opt/bin", nullptr};
  auto env = cni::plugin_environment(add_inv(), "/opt/cni/bin", base);
  CHECK(env == std::vector<std::string>{"CNI_COMMAND=ADD", "CNI_CONTAINERID=ctr-1", "CNI_NETNS=/run/netns/pod",
                                        "CNI_ARGS=K8S_POD_NAME=p;IgnoreUnknown=1", "CNI_IFNAME=net1", "CNI_PATH=/opt/cni/bin",
                                        "HTTPS_PROXY=http://proxy.example:3128", "KUBERNETES_SERVICE_HOST=10.96.0.1",
                                        "CNI_NETNS_OVERRIDE=1", "PATH=/opt/bin"});
  const char* no_path[] = {"LANG=C", nullptr};
  CHECK(cni::plugin_environment(add_inv(), "", no_path).back() == "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  CHECK(cni::plugin_environment(add_inv(), "", nullptr).size() == 7);
}

TEST_CASE("exec_plugin: the caller's environment with CNI_* replaced, config on stdin, result on stdout") {
  plumb::test::Node node;
  // The shell's own initial environment (/proc/$$/environ), before sh adds anything.
  std::string bin = install(node.dir(), "envdump", "cat > " + node.dir() + "/stdin; tr '\\0' '\\n' < /proc/$$/environ | sort > " +
                                                       node.dir() + "/env; echo '{\"cniVersion\":\"1.0.0\",\"dns\":{}}'\n");
  auto s = cni::make_search(node.dir(), "/usr/lib/cni", 5s);
  ::setenv("HTTPS_PROXY", "http://proxy.example:3128", 1);  // a vendor plugin's setting (libcni passes it)
  ::setenv("CNI_IFNAME", "eth9", 1);                         // the caller's own: replaced
  auto out = cni::exec_plugin("envdump", bin, add_inv(), R"({"cniVersion":"1.0.0","name":"n","type":"envdump"})", s);
  ::unsetenv("HTTPS_PROXY");
  ::unsetenv("CNI_IFNAME");
  REQUIRE_MESSAGE(out.has_value(), out.error().text());
  CHECK(json::dump(*out) == R"({"cniVersion":"1.0.0","dns":{}})");
  CHECK(plumb::test::read_file(node.dir() + "/stdin") == R"({"cniVersion":"1.0.0","name":"n","type":"envdump"})");
  std::string env = plumb::test::read_file(node.dir() + "/env");
  CHECK(contains(env, "CNI_ARGS=K8S_POD_NAME=p;IgnoreUnknown=1\nCNI_COMMAND=ADD\nCNI_CONTAINERID=ctr-1\nCNI_IFNAME=net1\n"
                      "CNI_NETNS=/run/netns/pod\nCNI_PATH=" + node.dir() + ":/usr/lib/cni\n"));
  CHECK(contains(env, "\nHTTPS_PROXY=http://proxy.example:3128\n"));
  CHECK_FALSE(contains(env, "eth9"));
  CHECK(contains(env, "\nPATH="));
}

TEST_CASE("exec_plugin: the plugin's CNI error keeps its code, its stderr goes into the details") {
  plumb::test::Node node;
  std::string bin = install(node.dir(), "failing",
                            "echo 'calico datastore unreachable' >&2\n"
                            "echo '{\"cniVersion\":\"1.0.0\",\"code\":11,\"msg\":\"try later\",\"details\":\"etcd down\"}'; exit 1\n");
  auto out = cni::exec_plugin("failing", bin, add_inv(), "{}", cni::make_search(node.dir(), "", 5s));
  REQUIRE_FALSE(out.has_value());
  CHECK(out.error().cni_code == 11);
  CHECK(out.error().msg == "plugin failing (ADD): try later");
  CHECK(out.error().details == "etcd down; stderr: calico datastore unreachable");
}

TEST_CASE("exec_plugin: a failure without a CNI error is kDelegate with the plugin's stderr") {
  plumb::test::Node node;
  std::string bin = install(node.dir(), "crashing", "echo 'panic: nil pointer' >&2; exit 2\n");
  auto out = cni::exec_plugin("crashing", bin, add_inv(), "{}", cni::make_search(node.dir(), "", 5s));
  REQUIRE_FALSE(out.has_value());
  CHECK(out.error().cni_code == cni_code::kDelegate);
  CHECK(out.error().msg == "plugin crashing (ADD) exited with status 2 without a CNI error; stderr: panic: nil pointer");
}

TEST_CASE("exec_plugin: a plugin still running at the time limit is killed, its stderr in the error") {
  plumb::test::Node node;
  std::string bin = install(node.dir(), "hanging", "echo 'waiting for the datastore' >&2; exec sleep 60\n");
  auto start = std::chrono::steady_clock::now();
  auto out = cni::exec_plugin("hanging", bin, add_inv(), "{}", cni::make_search(node.dir(), "", 300ms));
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  REQUIRE_FALSE(out.has_value());
  CHECK(out.error().cni_code == cni_code::kDelegate);
  CHECK(out.error().msg ==
        "plugin hanging (ADD) did not finish within 0.3 s (delegateTimeoutSeconds) and was killed; stderr: waiting for the datastore");
}

TEST_CASE("with_prev_result and decode_plugin_result: prevResult in the config's version, results in theirs") {
  cni::CniResult prev;
  prev.ips.push_back({*IpPrefix::parse("192.0.2.5/24"), std::nullopt, std::nullopt});
  auto conf = json::parse(R"({"cniVersion":"0.4.0","name":"n","type":"t","prevResult":{"old":1}})", "t").value();
  auto sent = cni::with_prev_result(conf, &prev, "0.4.0");
  REQUIRE(sent.has_value());
  CHECK(json::dump(*sent) ==
        R"({"cniVersion":"0.4.0","name":"n","type":"t","prevResult":{"cniVersion":"0.4.0","ips":[{"version":"4","address":"192.0.2.5/24"}],"dns":{}}})");
  auto none = cni::with_prev_result(conf, nullptr, "0.4.0");
  CHECK(json::dump(*none) == R"({"cniVersion":"0.4.0","name":"n","type":"t"})");

  auto out = json::parse(R"({"cniVersion":"0.3.1","ips":[{"version":"6","address":"2001:db8::5/64"}]})", "t").value();
  auto r = cni::decode_plugin_result("t", out, "1.0.0");
  REQUIRE(r.has_value());
  CHECK(r->ips.at(0).address.str() == "2001:db8::5/64");
  auto bad = json::parse(R"({"ips":[{"address":"nonsense"}]})", "t").value();
  auto e = cni::decode_plugin_result("calico", bad, "1.0.0");
  REQUIRE_FALSE(e.has_value());
  CHECK(contains(e.error().msg, "result of plugin calico"));
}
