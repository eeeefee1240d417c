// Delegation to plugins plumb does not implement, end to end through the real plumb binary in
// private node namespaces: the test-only foreign plugin (support/fake_cni_plugin.py: records
// every call, builds a real veth pair) as the default network and chained between native
// drivers; a Debian reference binary under a foreign type name; DEL, CHECK and GC reaching a
// delegated plugin after its NAD is gone; a hanging plugin killed at the time limit; a missing
// binary; and SIGKILLs of plumb (or of a daemon worker) while delegated plugins' ADD or DEL run.
// In-process: the driver's one call through a RecordingExecutor (its DEL recorded first, then its
// process).
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "drivers/steps.hpp"
#include "drivers/undo.hpp"
#include "engine/base/json.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/foreign_plugin.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/temp_dir.hpp"

using plumb::test::FakeCall;
using plumb::test::ForeignBin;
using plumb::test::ip_json;
using plumb::test::ipv4_of;
using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;

namespace {

/// Host ends the fake plugin made ("fk" + 10 hex digits).
std::set<std::string> fake_links() {
  std::set<std::string> out;
  for (auto& l : link_names("")) {
    if (l.size() == 12 && l.rfind("fk", 0) == 0) out.insert(l);
  }
  return out;
}

std::string bridge_plugin(const std::string& bridge, const std::string& subnet, const std::string& ipam_dir) {
  return R"({"type": "bridge", "bridge": ")" + bridge + R"(", "ipam": {"type": "host-local", "dataDir": ")" + ipam_dir +
         R"(", "ranges": [[{"subnet": ")" + subnet + R"("}]]}})";
}

/// `config` without prevResult, compact: what a plugin got apart from the verb's prevResult.
std::string without_prev(const rapidjson::Value& config) {
  rapidjson::Document d;
  d.CopyFrom(config, d.GetAllocator());
  d.RemoveMember("prevResult");
  return plumb::json::dump(d);
}

bool process_alive(int pid) {
  std::string st = plumb::test::read_file("/proc/" + std::to_string(pid) + "/stat");
  return !st.empty() && st.find(") Z ") == std::string::npos;
}

/// Nothing of the pod is left on the node: no veth of the fake plugin or of the bridges, no
/// records, no addresses held, no network-status.
void check_clean(const PodFixture& fx, const std::string& pod_ns) {
  CHECK(fake_links().empty());
  CHECK(ip_json("link show type veth").Size() == 0);
  CHECK(link_names(pod_ns) == std::set<std::string>{"lo"});
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
  for (auto& f : plumb::test::address_files(fx.ipam_dir())) FAIL_CHECK(("address still held: " + f));
  CHECK(PodFixture::files_under(fx.store() + "/status").empty());
}

/// A node whose default network is the fake plugin (clusterNetwork conflist).
struct ForeignDefault {
  Node node;
  PodFixture fx{node};
  ForeignBin bin{node};
  std::string conf_file = fx.default_conflist();  // clusterNetwork of fx.config()

  explicit ForeignDefault(const std::string& version = "1.0.0") {
    bin.install_fake();
    plumb::test::write_file(conf_file, R"({"cniVersion": ")" + version + R"(", "name": "calico-like", "plugins": [)" +
                                           bin.fake_plugin(R"("address": "203.0.113.20/24")") + "]}");
  }
  std::string config(const std::string& extra = {}, const std::string& version = "1.0.0") const {
    return fx.config(bin.bin_dir_key() + (extra.empty() ? "" : ", " + extra), version);
  }
};

}  // namespace

TEST_CASE("a foreign default network (its conflist as clusterNetwork) with a native network annotated: ADD, CHECK, DEL") {
  ForeignDefault f;
  f.fx.add_nad("default", "blue", R"({"cniVersion": "1.0.0", "name": "blue", "plugins": [)" +
                                      bridge_plugin("br-blue", "198.51.100.0/24", f.fx.ipam_dir()) + "]}");
  f.fx.add_pod("default", "web", "blue");
  std::string pod = f.node.add_netns("web");

  Proc add = f.fx.run("ADD", "ctr-web", pod, "default", "web", f.config());
  INFO("ADD: ", add.out, add.err);
  REQUIRE(add.exit_code == 0);
  // The runtime gets the foreign plugin's result; the pod has its interface and the native one.
  rapidjson::Document result;
  result.Parse(add.out.c_str());
  CHECK(std::string(result["ips"][0]["address"].GetString()) == "203.0.113.20/24");
  CHECK(link_names("web") == std::set<std::string>{"lo", "eth0", "net1"});
  CHECK(ipv4_of("web", "eth0") == "203.0.113.20/24");
  CHECK(ipv4_of("web", "net1") == "198.51.100.2/24");
  CHECK(fake_links().size() == 1);
  std::string status = f.fx.status_of("default", "web");
  CHECK(status.rfind(R"([{"name":"calico-like","interface":"eth0","ips":["203.0.113.20"])", 0) == 0);

  // What the plugin got: plumb's environment (here the CNI variables and PATH) with CNI_* set for it, its config with name and
  // cniVersion, no prevResult, no descriptor of plumb's.
  auto adds = f.bin.calls("ADD");
  REQUIRE(adds.size() == 1);
  std::set<std::string> keys;
  for (auto it = adds[0].env.MemberBegin(); it != adds[0].env.MemberEnd(); ++it) keys.insert(it->name.GetString());
  CHECK(keys == std::set<std::string>{"CNI_ARGS", "CNI_COMMAND", "CNI_CONTAINERID", "CNI_IFNAME", "CNI_NETNS", "CNI_PATH", "PATH"});
  CHECK(std::string(adds[0].env["CNI_IFNAME"].GetString()) == "eth0");
  CHECK(std::string(adds[0].env["CNI_NETNS"].GetString()) == pod);
  CHECK(std::string(adds[0].env["CNI_CONTAINERID"].GetString()) == "ctr-web");
  CHECK(std::string(adds[0].env["CNI_PATH"].GetString()) == f.bin.dir() + ":/usr/lib/cni");
  CHECK(std::string(adds[0].env["CNI_ARGS"].GetString()) ==
        "IgnoreUnknown=true;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=ctr-web;K8S_POD_UID=");
  CHECK(std::string(adds[0].stdin["name"].GetString()) == "calico-like");
  CHECK(std::string(adds[0].stdin["cniVersion"].GetString()) == "1.0.0");
  CHECK_FALSE(adds[0].stdin.HasMember("prevResult"));
  CHECK(adds[0].fds.size() <= 4);  // 0, 1, 2 and the one Python lists /proc/self/fd with

  // CHECK reaches it with the ADD's result as prevResult.
  Proc check = f.fx.run("CHECK", "ctr-web", pod, "default", "web", f.config());
  INFO("CHECK: ", check.out, check.err);
  CHECK(check.exit_code == 0);
  auto checks = f.bin.calls("CHECK");
  REQUIRE(checks.size() == 1);
  CHECK(std::string(checks[0].stdin["prevResult"]["ips"][0]["address"].GetString()) == "203.0.113.20/24");

  // DEL: the same config, prevResult, and nothing left.
  Proc del = f.fx.run("DEL", "ctr-web", pod, "default", "web", f.config());
  INFO("DEL: ", del.out, del.err);
  REQUIRE(del.exit_code == 0);
  auto dels = f.bin.calls("DEL");
  REQUIRE(dels.size() == 1);
  CHECK(without_prev(dels[0].stdin) == without_prev(adds[0].stdin));
  CHECK(dels[0].stdin.HasMember("prevResult"));
  CHECK(std::string(dels[0].env["CNI_IFNAME"].GetString()) == "eth0");
  check_clean(f.fx, "web");
}

TEST_CASE("a foreign plugin chained between native ones: prevResult flows from bridge to it and from it to tuning") {
  ForeignDefault f;
  f.fx.add_nad("default", "chain", R"({"cniVersion": "1.0.0", "name": "chain", "plugins": [)" +
                                       bridge_plugin("br-chain", "198.51.100.0/24", f.fx.ipam_dir()) + ", " +
                                       f.bin.fake_plugin(R"("podIfname": "side0", "address": "192.0.2.9/24")") +
                                       R"(, {"type": "tuning", "mtu": 1400}]})");
  f.fx.add_pod("default", "web", "chain");
  std::string pod = f.node.add_netns("web");
  Proc add = f.fx.run("ADD", "ctr-web", pod, "default", "web", f.config());
  INFO("ADD: ", add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(link_names("web") == std::set<std::string>{"lo", "eth0", "net1", "side0"});
  CHECK(ipv4_of("web", "side0") == "192.0.2.9/24");
  // native -> foreign: the fake plugin got the bridge's result.
  auto adds = f.bin.calls("ADD");
  REQUIRE(adds.size() == 2);
  const auto& chained = adds[1];
  CHECK(std::string(chained.env["CNI_IFNAME"].GetString()) == "net1");
  REQUIRE(chained.stdin.HasMember("prevResult"));
  CHECK(std::string(chained.stdin["prevResult"]["ips"][0]["address"].GetString()) == "198.51.100.2/24");
  // foreign -> native: tuning ran after it on net1, and the attachment's result (tuning's, passed
  // through) carries what the fake plugin added.
  CHECK(ip_json("-n web link show net1")[0]["mtu"].GetInt() == 1400);
  std::string record = plumb::test::read_file(f.fx.state() + "/containers/ctr-web:eth0/1-net1.json");
  CHECK(record.find("\"name\":\"side0\"") != std::string::npos);
  CHECK(record.find("192.0.2.9/24") != std::string::npos);

  // DEL after the NAD is deleted: from the record alone.
  std::filesystem::remove(f.fx.store() + "/nads/default-chain.yaml");
  Proc del = f.fx.run("DEL", "ctr-web", pod, "default", "web", f.config());
  INFO("DEL: ", del.out, del.err);
  REQUIRE(del.exit_code == 0);
  auto dels = f.bin.calls("DEL");
  REQUIRE(dels.size() == 2);
  // Reverse order: the annotated network (net1) before the default network (eth0).
  CHECK(std::string(dels[0].env["CNI_IFNAME"].GetString()) == "net1");
  CHECK(std::string(dels[1].env["CNI_IFNAME"].GetString()) == "eth0");
  CHECK(without_prev(dels[0].stdin) == without_prev(chained.stdin));
  check_clean(f.fx, "web");
}

TEST_CASE("DEL, CHECK and GC reach a foreign plugin after its NetworkAttachmentDefinition is deleted") {
  Node node;
  PodFixture fx(node);
  ForeignBin bin(node);
  bin.install_fake();
  fx.add_nad("default", "side", R"({"cniVersion": "1.1.0", "name": "side", "plugins": [)" + bin.fake_plugin() + "]}");
  std::string conf = fx.config(bin.bin_dir_key(), "1.1.0");
  std::vector<std::string> pods;
  for (const char* name : {"p1", "p2"}) {
    fx.add_pod("default", name, "side");
    pods.push_back(node.add_netns(name));
    Proc add = fx.run("ADD", std::string("ctr-") + name, pods.back(), "default", name, conf);
    INFO(add.out, add.err);
    REQUIRE(add.exit_code == 0);
  }
  CHECK(fake_links().size() == 2);
  std::filesystem::remove(fx.store() + "/nads/default-side.yaml");
  const std::string added_conf = without_prev(bin.calls("ADD")[0].stdin);

  Proc check = fx.run("CHECK", "ctr-p1", pods[0], "default", "p1", conf);
  INFO("CHECK: ", check.out, check.err);
  CHECK(check.exit_code == 0);
  REQUIRE(bin.calls("CHECK").size() == 1);
  CHECK(without_prev(bin.calls("CHECK")[0].stdin) == added_conf);

  std::string gc_conf = conf;
  gc_conf.insert(gc_conf.size() - 1, R"(, "cni.dev/valid-attachments": [{"containerID": "ctr-p1", "ifname": "eth0"}])");
  Proc gc = plumb::test::run({plumb::test::plumb_binary()}, {{"CNI_COMMAND", "GC"}, {"CNI_PATH", "/usr/lib/cni"}}, gc_conf);
  INFO("GC: ", gc.out, gc.err);
  CHECK(gc.exit_code == 0);
  auto dels = bin.calls("DEL");
  REQUIRE(dels.size() == 1);
  CHECK(std::string(dels[0].env["CNI_CONTAINERID"].GetString()) == "ctr-p2");
  CHECK(std::string(dels[0].env["CNI_IFNAME"].GetString()) == "net1");
  CHECK(without_prev(dels[0].stdin).find(R"("name":"side")") != std::string::npos);
  // The plugin's own GC: the attachments of its network that stay.
  auto gcs = bin.calls("GC");
  REQUIRE(gcs.size() == 1);
  CHECK(plumb::json::dump(gcs[0].stdin["cni.dev/valid-attachments"]) == R"([{"containerID":"ctr-p1","ifname":"net1"}])");
  CHECK(link_names("p2") == std::set<std::string>{"lo"});  // the whole container is gone
  CHECK(link_names("p1") == std::set<std::string>{"lo", "eth0", "net1"});
  CHECK(fake_links().size() == 1);

  REQUIRE(fx.run("DEL", "ctr-p1", pods[0], "default", "p1", conf).exit_code == 0);
  CHECK(bin.calls("DEL").size() == 2);
  CHECK(fake_links().empty());
}

TEST_CASE("a foreign plugin that hangs is killed at delegateTimeoutSeconds; the ADD fails with its stderr and leaves nothing") {
  Node node;
  PodFixture fx(node);
  ForeignBin bin(node);
  bin.install_fake();
  fx.add_nad("default", "stuck", R"({"cniVersion": "1.0.0", "name": "stuck", "plugins": [)" +
                                     bin.fake_plugin(R"("hangOn": "ADD")") + "]}");
  fx.add_pod("default", "web", "stuck");
  std::string pod = node.add_netns("web");
  auto start = std::chrono::steady_clock::now();
  Proc add = fx.run("ADD", "ctr-web", pod, "default", "web", fx.config(bin.bin_dir_key() + R"(, "delegateTimeoutSeconds": 1)"));
  auto took = std::chrono::steady_clock::now() - start;
  INFO("ADD: ", add.out, add.err);
  CHECK(add.exit_code != 0);
  CHECK(add.out.find(R"("code":106)") != std::string::npos);
  CHECK(add.out.find("plugin fake-cni (ADD) did not finish within 1 s") != std::string::npos);
  CHECK(add.out.find("fake-cni: hanging on purpose in ADD") != std::string::npos);
  CHECK(took < std::chrono::seconds(20));
  auto adds = bin.calls("ADD");
  REQUIRE(adds.size() == 1);
  CHECK_FALSE(process_alive(adds[0].pid));
  CHECK(bin.calls("DEL").size() == 1);  // the rollback told it
  check_clean(fx, "web");
}

TEST_CASE("a missing plugin binary fails the ADD before any change, naming the type and the directories searched") {
  Node node;
  PodFixture fx(node);
  ForeignBin bin(node);
  fx.add_nad("default", "calico", R"({"cniVersion": "1.0.0", "name": "calico", "type": "calico"})");
  fx.add_pod("default", "web", "calico");
  std::string pod = node.add_netns("web");
  Proc add = fx.run("ADD", "ctr-web", pod, "default", "web", fx.config(bin.bin_dir_key()));
  INFO(add.out, add.err);
  CHECK(add.exit_code != 0);
  CHECK(add.out.find(R"("code":102)") != std::string::npos);
  CHECK(add.out.find("CNI plugin type \\\"calico\\\" not found in " + bin.dir() + ", /usr/lib/cni") != std::string::npos);
  CHECK(link_names("") == std::set<std::string>{"lo"});  // not even the default network's bridge
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
}

TEST_CASE("Debian's reference tuning under a foreign type name (ref-tuning), chained after a native bridge") {
  Node node;
  PodFixture fx(node);
  ForeignBin bin(node);
  bin.install_reference("tuning", "ref-tuning");
  std::string data = node.dir() + "/tuning-data";
  fx.add_nad("default", "tuned", R"({"cniVersion": "1.0.0", "name": "tuned", "plugins": [)" +
                                     bridge_plugin("br-tuned", "198.51.100.0/24", fx.ipam_dir()) +
                                     R"(, {"type": "ref-tuning", "mac": "02:00:00:00:42:42", "dataDir": ")" + data + R"("}]})");
  fx.add_pod("default", "web", "tuned");
  std::string pod = node.add_netns("web");
  Proc add = fx.run("ADD", "ctr-web", pod, "default", "web", fx.config(bin.bin_dir_key()));
  INFO("ADD: ", add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(std::string(ip_json("-n web link show net1")[0]["address"].GetString()) == "02:00:00:00:42:42");
  // The reference plugin answered with the bridge's result (prevResult) and its own MAC.
  std::string status = fx.status_of("default", "web");
  CHECK(status.find(R"("name":"default/tuned","interface":"net1","ips":["198.51.100.2"],"mac":"02:00:00:00:42:42")") !=
        std::string::npos);
  CHECK_FALSE(PodFixture::files_under(data).empty());  // its backup of the original MAC
  std::filesystem::remove(fx.store() + "/nads/default-tuned.yaml");
  Proc del = fx.run("DEL", "ctr-web", pod, "default", "web", fx.config(bin.bin_dir_key()));
  INFO("DEL: ", del.out, del.err);
  REQUIRE(del.exit_code == 0);
  CHECK(PodFixture::files_under(data).empty());  // restored and dropped by its DEL
  CHECK(link_names("web") == std::set<std::string>{"lo"});
}

TEST_CASE("SIGKILL after every persisted intent of an ADD with delegated plugins (plumb-faulty): DEL removes everything") {
  ForeignDefault f;
  f.fx.add_nad("default", "chain", R"({"cniVersion": "1.0.0", "name": "chain", "plugins": [)" +
                                       bridge_plugin("br-chain", "198.51.100.0/24", f.fx.ipam_dir()) + ", " +
                                       f.bin.fake_plugin(R"("podIfname": "side0")") + "]}");
  f.fx.add_pod("default", "crash", "chain");
  std::string pod = f.node.add_netns("crash");
  unsigned killed = 0;
  for (unsigned step = 1; step < 40; ++step) {
    CAPTURE(step);
    Proc add = f.fx.run_with(plumb::test::plumb_faulty_binary(), {{"PLUMB_FAULT_AFTER_STEP", std::to_string(step)}}, "ADD",
                             "ctr-crash", pod, "default", "crash", f.config());
    Proc del = f.fx.run("DEL", "ctr-crash", pod, "default", "crash", f.config());
    INFO(del.out, del.err);
    REQUIRE(del.exit_code == 0);
    CHECK(fake_links().empty());
    CHECK(link_names("crash") == std::set<std::string>{"lo"});
    CHECK(PodFixture::files_under(f.fx.state() + "/containers").empty());
    if (add.exit_code == 0) break;
    REQUIRE(add.exit_code == 128 + SIGKILL);
    ++killed;
  }
  // default (delegate DEL, its process) + bridge (veth, ipam) + chained (delegate DEL, process).
  CHECK(killed >= 6);
  for (auto& c : f.bin.calls("ADD")) CHECK_FALSE(process_alive(c.pid));
}

TEST_CASE("SIGKILL of plumb while a delegated plugin runs: DEL ends the plugin first, then nothing is left") {
  ForeignDefault f;
  plumb::test::write_file(f.conf_file, R"({"cniVersion": "1.0.0", "name": "calico-like", "plugins": [)" +
                                           f.bin.fake_plugin(R"("sleepBeforeAdd": 1.5)") + "]}");
  f.fx.add_pod("default", "slow", "");
  std::string pod = f.node.add_netns("slow");
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    Proc p = f.fx.run("ADD", "ctr-slow", pod, "default", "slow", f.config());
    _exit(p.exit_code == 0 ? 0 : 1);
  }
  // Wait until the plugin has its config (it records the call first, then sleeps).
  for (int i = 0; i < 500 && f.bin.calls("ADD").empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(f.bin.calls("ADD").size() == 1);
  const int plugin_pid = f.bin.calls("ADD")[0].pid;
  std::string plumb_pid = plumb::test::sh("pgrep -P " + std::to_string(child)).out;
  REQUIRE_FALSE(plumb_pid.empty());
  REQUIRE(::kill(static_cast<pid_t>(std::stol(plumb_pid)), SIGKILL) == 0);
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(process_alive(plugin_pid));  // plumb is gone, its plugin still runs

  Proc del = f.fx.run("DEL", "ctr-slow", pod, "default", "slow", f.config());
  INFO("DEL: ", del.out, del.err);
  REQUIRE(del.exit_code == 0);
  CHECK_FALSE(process_alive(plugin_pid));
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));  // past the plugin's sleep: it would have built by now
  check_clean(f.fx, "slow");
}

namespace {

/// The parent of process `pid` (/proc/<pid>/stat field 4); 0 when it is gone.
pid_t parent_of(int pid) {
  const std::string st = plumb::test::read_file("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = st.rfind(')');
  char state = 0;
  int ppid = 0;
  if (close == std::string::npos || std::sscanf(st.c_str() + close + 2, "%c %d", &state, &ppid) != 2) return 0;
  return ppid;
}

/// How the runtime reaches plumb: the plumb binary (thin), or plumb-shim and a `plumb daemon`
/// started here (thick), whose workers run the invocations.
struct Runner {
  plumb::test::TempDir dir;
  pid_t daemon = -1;
  std::map<std::string, std::string> env;
  std::string binary = plumb::test::plumb_binary();

  explicit Runner(bool thick) {
    if (!thick) return;
    const std::string socket = dir.path + "/plumb.sock";
    daemon = plumb::test::start_child({plumb::test::plumb_binary(), "daemon", "--socket", socket}, {}, dir.path + "/log");
    REQUIRE(daemon > 0);
    REQUIRE(plumb::test::eventually([&] { return std::filesystem::exists(socket); }));
    env = {{"PLUMB_DAEMON_SOCKET", socket}};
    binary = plumb::test::plumb_shim_binary();
  }
  ~Runner() { plumb::test::stop_child(daemon, std::chrono::milliseconds(5000)); }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;
};

}  // namespace

TEST_CASE("SIGKILL of plumb or a daemon worker while a delegated plugin's DEL runs: the next DEL ends that plugin first, then nothing is left") {
  ForeignDefault f;
  plumb::test::write_file(f.conf_file, R"({"cniVersion": "1.0.0", "name": "calico-like", "plugins": [)" +
                                           f.bin.fake_plugin(R"("hangOnce": "DEL")") + "]}");
  f.fx.add_pod("default", "gone", "");
  std::string pod = f.node.add_netns("gone");
  REQUIRE(f.fx.run("ADD", "ctr-gone", pod, "default", "gone", f.config()).exit_code == 0);
  bool thick = false;
  SUBCASE("thin: the plumb binary") {}
  SUBCASE("thick: a daemon worker") { thick = true; }
  Runner r(thick);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    Proc p = f.fx.run_with(r.binary, r.env, "DEL", "ctr-gone", pod, "default", "gone", f.config());
    _exit(p.exit_code == 0 ? 0 : 1);
  }
  // The plugin records its call once it has its config, then hangs; its parent is the plumb
  // process (or worker) running the DEL.
  REQUIRE(plumb::test::eventually([&] { return f.bin.calls("DEL").size() == 1; }));
  const int plugin_pid = f.bin.calls("DEL")[0].pid;
  const pid_t plumb_pid = parent_of(plugin_pid);
  REQUIRE(plumb_pid > 1);
  REQUIRE(plumb_pid != child);
  REQUIRE(::kill(plumb_pid, SIGKILL) == 0);
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(process_alive(plugin_pid));  // plumb is gone, its plugin's DEL still runs

  Proc del = f.fx.run_with(r.binary, r.env, "DEL", "ctr-gone", pod, "default", "gone", f.config());
  INFO("DEL: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  const bool orphan_left = process_alive(plugin_pid);
  CHECK_FALSE(orphan_left);
  if (orphan_left) ::kill(plugin_pid, SIGKILL);  // the case failed: leave no process behind
  CHECK(f.bin.calls("DEL").size() == 2);  // the next DEL ran the plugin's DEL again, whole
  check_clean(f.fx, "gone");
}

TEST_CASE(
    "delegated plugin through a RecordingExecutor: its DEL with the exact config recorded before it runs, then its "
    "process; the veth pairs the chain made are forgotten") {
  Node node;
  const std::string bin = node.dir() + "/bin";
  std::filesystem::create_directories(bin);
  // A plugin that reads its config and answers one address.
  plumb::test::write_file(bin + "/answer",
                          "#!/bin/sh\ncat >/dev/null\n"
                          "printf '{\"cniVersion\":\"1.0.0\",\"ips\":[{\"address\":\"192.0.2.9/24\"}]}'\n");
  std::filesystem::permissions(bin + "/answer", std::filesystem::perms::owner_all);
  plumb::drivers::steps::RecordingExecutor rec(/*apply=*/true);
  rec.made_veths()["net1"] = plumb::drivers::PodVeth{};
  plumb::drivers::Context ctx;
  ctx.container_id = "ctr-rec";
  ctx.ifname = "net1";
  ctx.network = "rec-net";
  ctx.cni_args = {{"K8S_POD_NAME", "p"}};
  ctx.plugin_search.dirs = {bin};
  ctx.executor = &rec;
  auto conf = plumb::json::parse(R"({"cniVersion": "1.0.0", "name": "rec-net", "type": "answer"})", "test");
  REQUIRE(conf);
  plumb::drivers::ParseInput in{ctx.network, ctx.ifname, ctx.cni_args};
  in.plugin_search = ctx.plugin_search;
  auto parsed = plumb::drivers::parse_plugin(*conf, in);
  REQUIRE_MESSAGE(parsed, parsed.error().text());
  auto r = parsed->driver->add(ctx, *parsed->config, nullptr);
  REQUIRE_MESSAGE(r, r.error().text());
  REQUIRE(r->ips.size() == 1);
  CHECK(r->ips[0].address.str() == "192.0.2.9/24");
  REQUIRE(rec.made().size() == 2);
  CHECK(rec.made()[0].step == "run_plugin");
  REQUIRE(rec.made()[0].inverse);
  CHECK_FALSE(rec.made()[0].inverse->rollback_only);
  CHECK(plumb::json::dump(plumb::drivers::undo::encode(rec.made()[0].inverse->op)) ==
        R"({"op":"delegate.del","type":"answer","config":{"cniVersion":"1.0.0","name":"rec-net","type":"answer"},)"
        R"("ifname":"net1","args":")" +
            plumb::cni::delegate_args(ctx.cni_args) + R"("})");
  CHECK(rec.made()[1].step == "started_process");
  REQUIRE(rec.made()[1].inverse);
  CHECK(std::holds_alternative<plumb::drivers::undo::DelegateEndProcess>(rec.made()[1].inverse->op));
  CHECK(rec.made_veths().empty());  // the plugin may have changed them
}
