// Hostile input: stdin, environment, annotations, NAD configs and the runtime's pod annotations
// as an attacker writes them. Each case runs the real plumb binary with a time and memory bound
// in its own node namespace and asserts that plumb ended by exit code (never a signal or the
// time limit), answered a CNI error naming the offending field with the right code, and left the
// node exactly as it was (links, addresses, routes, nftables, files under the node directory:
// state records, locks, network-status, IPAM).
#include <doctest/doctest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "tests/support/bounded_run.hpp"
#include "tests/support/node_snapshot.hpp"
#include "tests/support/pod_fixture.hpp"

using plumb::test::BoundedProc;
using plumb::test::Node;
using plumb::test::NodeSnapshot;
using plumb::test::PodFixture;

namespace {

/// `depth` arrays nested, closed (or not).
std::string nested(size_t depth, bool closed = true) { return std::string(depth, '[') + (closed ? std::string(depth, ']') : ""); }

struct Hostile {
  Node node;
  PodFixture fx{node};
  std::string pod = node.add_netns("pod");

  std::map<std::string, std::string> env(const std::string& command, const std::string& cid = "ctr-1") const {
    return {{"CNI_COMMAND", command}, {"CNI_CONTAINERID", cid}, {"CNI_NETNS", pod}, {"CNI_IFNAME", "eth0"},
            {"CNI_PATH", "/usr/lib/cni"}, {"CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web"}};
  }
  BoundedProc run(const std::map<std::string, std::string>& e, const std::string& stdin_text) const {
    return plumb::test::run_bounded({plumb::test::plumb_binary()}, e, stdin_text);
  }
  NodeSnapshot snapshot() const { return NodeSnapshot::take(node.dir(), {"pod"}); }

  /// Runs one hostile invocation and checks the three promises.
  void refused(const std::map<std::string, std::string>& e, const std::string& stdin_text, int code, const std::string& field) const {
    const NodeSnapshot before = snapshot();
    BoundedProc p = run(e, stdin_text);
    INFO("stdout: ", p.out.substr(0, 600), "\nstderr: ", p.err.substr(0, 600));
    CHECK_MESSAGE(p.exited(), "ended by signal ", p.signal, std::string(p.timed_out ? " (time limit)" : ""));
    CHECK(p.exit_code == 1);
    auto [got, msg] = p.cni_error();
    CHECK(got == code);
    CHECK_MESSAGE(msg.find(field) != std::string::npos, "the error names ", field);
    CHECK(msg.size() < 4096);  // offending values are quoted bounded
    PLUMB_CHECK_UNCHANGED(before, snapshot());
  }
};

}  // namespace

TEST_CASE("the node snapshot sees a BPF pin left in the node's bpffs (where plumb's default bpffsDir lives)") {
  Hostile h;
  const NodeSnapshot before = h.snapshot();
  REQUIRE(std::filesystem::create_directory("/sys/fs/bpf/plumb"));  // each Node has its own bpffs there
  CHECK_FALSE(h.snapshot() == before);
  std::filesystem::remove("/sys/fs/bpf/plumb");
  CHECK(h.snapshot() == before);
}

TEST_CASE("stdin built to exhaust a parser: decode errors naming the limit, VERSION still answers") {
  Hostile h;
  const std::string brackets(1'000'000, '[');
  std::string objects;
  for (int i = 0; i < 100'000; ++i) objects += R"({"a":)";
  for (const char* verb : {"ADD", "DEL", "CHECK"}) {
    CAPTURE(verb);
    h.refused(h.env(verb), brackets, 6, "nested deeper than 64 levels");
    h.refused(h.env(verb), objects, 6, "nested deeper than 64 levels");
  }
  h.refused(h.env("ADD"), "", 6, "cannot decode");
  h.refused(h.env("ADD"), std::string("{\"cniVersion\":\"1.0.0\",\0\"name\":\"x\"}", 34), 6, "cannot decode");
  // VERSION needs no config: it answers, whatever stdin holds.
  BoundedProc v = h.run(h.env("VERSION"), brackets);
  CHECK(v.exited());
  CHECK(v.exit_code == 0);
  CHECK(v.out.find("supportedVersions") != std::string::npos);
  // stdin is read whole, across many reads: a cniVersion after 200 KiB of padding is answered.
  BoundedProc big = h.run(h.env("VERSION"), R"({"pad":")" + std::string(200'000, 'x') + R"(","cniVersion":"0.4.0"})");
  CHECK(big.exit_code == 0);
  CHECK(big.out.find(R"("cniVersion":"0.4.0")") != std::string::npos);
}

TEST_CASE("values nested 100,000 levels in annotations, NAD configs, cni-args and the runtime's pod annotations") {
  Hostile h;
  const std::string deep = nested(100'000);
  const std::string strict = R"("strictAnnotations": true)";
  // The pod's selection annotation in the store.
  h.fx.add_pod("default", "web", deep);
  h.refused(h.env("ADD"), h.fx.config(strict), 103, "k8s.v1.cni.cncf.io/networks");
  // cni-args of a selection element.
  h.fx.add_nad("default", "side", R"({"cniVersion":"1.0.0","name":"side","type":"loopback"})");
  h.fx.add_pod("default", "web", R"([{"name":"side","cni-args":)" + deep + "}]");
  h.refused(h.env("ADD"), h.fx.config(strict), 103, "nested deeper than 64");
  // A NAD's spec.config.
  h.fx.add_pod("default", "web", "deep");
  h.fx.add_nad("default", "deep", R"({"cniVersion":"1.0.0","name":"deep","type":"bridge","ipam":)" + deep + "}");
  h.refused(h.env("ADD"), h.fx.config(), 6, "NAD default/deep");
  // The runtime's io.kubernetes.cri.pod-annotations (containerd): the selection value, a JSON
  // string holding JSON, nested.
  h.refused(h.env("ADD"),
            h.fx.config(strict + R"(, "capabilities": {"io.kubernetes.cri.pod-annotations": true}, "runtimeConfig": {)"
                                 R"("io.kubernetes.cri.pod-annotations": {"k8s.v1.cni.cncf.io/networks": ")" +
                        deep + R"("}})"),
            103, "k8s.v1.cni.cncf.io/networks");
  // Nested within the bound but of the wrong type: the error quotes it, cut short.
  h.fx.add_nad("default", "deep", R"({"cniVersion":"1.0.0","name":"deep","type":"bridge","mtu":)" + nested(60) + "}");
  h.refused(h.env("ADD"), h.fx.config(), 7, "mtu");
}

TEST_CASE("CNI_NETNS naming the node's own namespace, by any path, is refused with code 4 before any change") {
  Hostile h;
  h.fx.add_pod("default", "web", "");
  // Paths to the node's namespace (this test's private one): plumb's own view, this process's,
  // and a bind mount under /run/netns that looks like any pod's.
  const std::string alias = "/run/netns/alias";
  { std::ofstream touch(alias); }
  REQUIRE(::mount("/proc/self/ns/net", alias.c_str(), nullptr, MS_BIND, nullptr) == 0);
  for (const std::string& path : {std::string("/proc/self/ns/net"), "/proc/" + std::to_string(::getpid()) + "/ns/net", alias}) {
    CAPTURE(path);
    auto e = h.env("ADD");
    e["CNI_NETNS"] = path;
    h.refused(e, h.fx.config(), 4, "CNI_NETNS \"" + path + "\" is the node's own network namespace");
    e["CNI_COMMAND"] = "CHECK";
    h.refused(e, h.fx.config(), 4, "CNI_NETNS");
  }
  // A DEL given the node's namespace removes the pod's node side and never touches the node's own
  // interface of the pod's name.
  REQUIRE(plumb::test::sh("ip link add eth0 type veth peer name eth0-peer").exit_code == 0);
  REQUIRE(h.run(h.env("ADD"), h.fx.config()).exit_code == 0);
  auto del = h.env("DEL");
  del["CNI_NETNS"] = alias;
  BoundedProc d = h.run(del, h.fx.config());
  INFO(d.out, d.err);
  CHECK(d.exit_code == 0);
  CHECK(plumb::test::link_names("").count("eth0") == 1);
  CHECK(PodFixture::files_under(h.fx.state() + "/containers").empty());
  ::umount2(alias.c_str(), MNT_DETACH);
}

TEST_CASE("identifiers that would become over-long or escaping paths are refused up front with code 4; a DEL of such an ID succeeds, touching nothing") {
  Hostile h;
  h.fx.add_pod("default", "web", "");
  for (const std::string& cid : {std::string(201, 'a'), std::string(300, 'b'), std::string(1024, 'c'), std::string("../../etc")}) {
    CAPTURE(cid.substr(0, 16));
    for (const char* verb : {"ADD", "CHECK"}) {
      CAPTURE(verb);
      h.refused(h.env(verb, cid), h.fx.config(), 4, "CNI_CONTAINERID");
    }
    // Nothing can exist for an ID every ADD refuses: its DEL has nothing to do (idempotent DEL).
    const NodeSnapshot before = h.snapshot();
    BoundedProc del = h.run(h.env("DEL", cid), h.fx.config());
    INFO("stdout: ", del.out.substr(0, 600), "\nstderr: ", del.err.substr(0, 600));
    CHECK(del.exited());
    CHECK(del.exit_code == 0);
    CHECK(del.out.empty());
    PLUMB_CHECK_UNCHANGED(before, h.snapshot());
  }
  for (const std::string& ifname : {std::string("a/b"), std::string(16, 'e'), std::string("..")}) {
    auto e = h.env("ADD");
    e["CNI_IFNAME"] = ifname;
    h.refused(e, h.fx.config(), 4, "CNI_IFNAME");
  }
}

TEST_CASE("a kernel name template as an interface name (\"r%d\": the kernel names the device r0) is refused wherever it enters, naming the field") {
  Hostile h;
  const std::string strict = R"("strictAnnotations": true)";
  h.fx.add_nad("default", "side", R"({"cniVersion":"1.0.0","name":"side","type":"loopback"})");
  h.fx.add_pod("default", "web", R"([{"name":"side","interface":"r%d"}])");
  h.refused(h.env("ADD"), h.fx.config(strict), 103, "\"interface\" \"r%d\" is not a valid interface name");
  h.fx.add_pod("default", "web", "side@net%d");
  h.refused(h.env("ADD"), h.fx.config(strict), 103, "interface \"net%d\" is not a valid interface name");
  auto e = h.env("ADD");
  e["CNI_IFNAME"] = "eth%d";
  h.refused(e, h.fx.config(), 4, "CNI_IFNAME \"eth%d\" is not a valid interface name");
  // The default network's annotation: refused whatever strictAnnotations says, as any bad one.
  plumb::test::write_file(h.fx.store() + "/pods/default/web.yaml",
                          "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\n  annotations:\n"
                          "    v1.multus-cni.io/default-network: 'side@r%d'\n");
  h.refused(h.env("ADD"), h.fx.config(), 103, "interface \"r%d\"");
  // Without strictAnnotations a bad selection annotation is ignored (a warning), as Multus does:
  // the pod gets its default network alone, and no r0.
  h.fx.add_pod("default", "web", R"([{"name":"side","interface":"r%d"}])");
  BoundedProc add = h.run(h.env("ADD"), h.fx.config());
  CHECK_MESSAGE(add.exit_code == 0, add.out);
  CHECK(plumb::test::link_names("pod") == std::set<std::string>{"lo", "eth0"});
  CHECK(h.run(h.env("DEL"), h.fx.config()).exit_code == 0);
}

TEST_CASE("names that would leave a data directory and misspelt references fail naming the key") {
  Hostile h;
  h.fx.add_pod("default", "web", "");
  plumb::test::write_file(h.node.dir() + "/escape.conflist",
                          R"({"cniVersion":"1.0.0","name":"../../escape","plugins":[{"type":"bridge","bridge":"plumb0",)"
                          R"("ipam":{"type":"host-local","dataDir":")" + h.fx.ipam_dir() + R"(","subnet":"203.0.113.0/24"}}]})");
  const std::string conf = R"({"cniVersion":"1.0.0","name":"plumb","type":"plumb","clusterNetwork":")" + h.node.dir() +
                           R"(/escape.conflist","storeDir":")" + h.fx.store() + R"(","stateDir":")" + h.fx.state() + R"("})";
  h.refused(h.env("ADD"), conf, 7, "network \"name\" \"../../escape\" is invalid");
  CHECK_FALSE(std::filesystem::exists(h.node.dir() + "/escape"));
  const std::string misspelt = R"({"cniVersion":"1.0.0","name":"plumb","type":"plumb","clusterNetwork":"a/b/c","storeDir":")" +
                               h.fx.store() + R"(","stateDir":")" + h.fx.state() + R"("})";
  h.refused(h.env("ADD"), misspelt, 7, "plumb config.clusterNetwork: \"a/b/c\" is not a valid NetworkAttachmentDefinition name");
}

TEST_CASE("an ADD refused before any change, and a CHECK of an unknown sandbox, leave no lock file") {
  Hostile h;
  h.fx.add_pod("default", "web", "missing-nad");
  h.refused(h.env("ADD"), h.fx.config(), 102, "missing-nad");
  h.refused(h.env("CHECK"), h.fx.config(), 3, "ctr-1");
  // A failure after the lock was taken (the pod's interface name is taken): rolled back, no lock
  // (the state directory's own folders exist from an earlier pod, as on any node).
  h.fx.add_pod("default", "web", "");
  REQUIRE(h.run(h.env("ADD", "ctr-0"), h.fx.config()).exit_code == 0);
  REQUIRE(h.run(h.env("DEL", "ctr-0"), h.fx.config()).exit_code == 0);
  REQUIRE(plumb::test::sh("ip -n pod link add eth0 type veth peer name x0").exit_code == 0);
  const NodeSnapshot before = h.snapshot();
  BoundedProc p = h.run(h.env("ADD"), h.fx.config());
  CHECK(p.exit_code == 1);
  PLUMB_CHECK_UNCHANGED(before, h.snapshot());
  CHECK(PodFixture::files_under(h.fx.state()).empty());
}

TEST_CASE("a requested address that is taken is refused naming its holder") {
  Hostile h;
  h.fx.add_pod("default", "web", "");
  auto a = h.env("ADD", "ctr-a");
  a["CNI_ARGS"] += ";IP=203.0.113.50";
  REQUIRE(h.run(a, h.fx.config()).exit_code == 0);
  std::string other = h.node.add_netns("other");
  auto b = h.env("ADD", "ctr-b");
  b["CNI_ARGS"] += ";IP=203.0.113.50";
  b["CNI_NETNS"] = other;
  h.refused(b, h.fx.config(), 101, "203.0.113.50 is already allocated in network \"default-net\" to container ctr-a interface eth0");
}
