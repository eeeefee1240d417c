// Hot-plug (cni-entry/pod/hotplug.cpp) against the real kernel in a private node: a sandbox ADDed
// by the real plumb binary follows its pod's selection annotation (the local store's manifest
// changed) — attachments added and removed, network-status rewritten from the records — and a
// DEL of the sandbox then removes everything, hot-plugged or not. A hot-plug SIGKILLed after
// each write-ahead step (the journal's fault hook, in a forked child) leaves nothing the DEL
// cannot finish, and the next hot-plug completes what the killed one began.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <string>

#include "cni-entry/pod/config.hpp"
#include "cni-entry/pod/hotplug.hpp"
#include "engine/state/journal.hpp"
#include "tests/support/node_snapshot.hpp"
#include "tests/support/pod_fixture.hpp"

using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::NodeSnapshot;
using plumb::test::PodFixture;
using plumb::test::Proc;
namespace hp = plumb::pod::hotplug;

namespace {

std::string bridge_nad(const std::string& bridge, const std::string& subnet, const std::string& ipam_dir) {
  return R"({"cniVersion": "0.4.0", "type": "bridge", "bridge": ")" + bridge +
         R"(", "ipam": {"type": "host-local", "dataDir": ")" + ipam_dir + R"(", "ranges": [[{"subnet": ")" + subnet +
         R"("}]]}})";
}

/// A node with NADs default/blue and default/green, pod default/web ADDed as container c1 in
/// namespace p1 with the selection `networks`.
struct HotplugNode {
  Node node;
  PodFixture fx{node};
  std::string netns;

  explicit HotplugNode(const std::string& networks) {
    fx.add_nad("default", "blue", bridge_nad("br-blue", "198.51.100.0/24", fx.ipam_dir()));
    fx.add_nad("default", "green", bridge_nad("br-green", "192.0.2.0/24", fx.ipam_dir()));
    // What stays after a pod, as after the reference plugins (the bridges and their gateway
    // addresses, nftables' tables, host-local's files): one pod of both networks before the node
    // is read.
    fx.add_pod("default", "warm", R"([{"name": "blue"}, {"name": "green"}])");
    const std::string warm = node.add_netns("warm");
    REQUIRE(fx.run("ADD", "cw", warm, "default", "warm", fx.config()).exit_code == 0);
    REQUIRE(fx.run("DEL", "cw", warm, "default", "warm", fx.config()).exit_code == 0);
    node.del_netns("warm");
    netns = node.add_netns("p1");
    fx.add_pod("default", "web", networks);
  }
  /// The pod's manifest as before the test changed its annotation (an input, not node state).
  void restore_manifest(const std::string& networks) const { fx.add_pod("default", "web", networks); }
  Proc add() const { return fx.run("ADD", "c1", netns, "default", "web", fx.config()); }
  Proc del() const { return fx.run("DEL", "c1", netns, "default", "web", fx.config()); }

  /// The hot-plug as the daemon runs it, in this process.
  hp::Outcome hotplug() const {
    auto conf = plumb::pod::parse_config(fx.config());
    REQUIRE(conf.has_value());
    auto store = plumb::pod::make_source(*conf);
    REQUIRE(store.has_value());
    plumb::pod::Log log;
    auto out = hp::apply(*conf, **store, {"default", "web", ""}, log);
    REQUIRE_MESSAGE(out.has_value(), out.error().text());
    return std::move(*out);
  }
};

std::set<std::string> names(std::initializer_list<const char*> l) { return {l.begin(), l.end()}; }

}  // namespace

TEST_CASE("hot-plug attaches added selection elements, detaches removed ones, and DEL removes everything") {
  HotplugNode n(R"([{"name": "blue", "interface": "blue1"}])");
  const auto before = NodeSnapshot::take(n.node.dir(), {"p1"});
  Proc add = n.add();
  REQUIRE_MESSAGE(add.exit_code == 0, add.err);
  CHECK(link_names("p1") == names({"lo", "eth0", "blue1"}));

  n.fx.add_pod("default", "web",
               R"([{"name": "blue", "interface": "blue1"}, {"name": "green", "interface": "green1"}])");
  auto out = n.hotplug();
  CHECK(out.sandbox == "c1:eth0");
  REQUIRE(out.changes.size() == 1);
  CHECK(out.changes[0].added);
  CHECK(out.changes[0].network == "default/green");
  CHECK_FALSE(out.changes[0].error);
  CHECK(link_names("p1") == names({"lo", "eth0", "blue1", "green1"}));
  CHECK(plumb::test::ipv4_of("p1", "green1").rfind("192.0.2.", 0) == 0);
  std::string status = n.fx.status_of("default", "web");
  CHECK(status.find(R"("name":"default/green","interface":"green1")") != std::string::npos);

  n.fx.add_pod("default", "web", R"([{"name": "green", "interface": "green1"}])");
  out = n.hotplug();
  REQUIRE(out.changes.size() == 1);
  CHECK_FALSE(out.changes[0].added);
  CHECK(out.changes[0].ifname == "blue1");
  CHECK(link_names("p1") == names({"lo", "eth0", "green1"}));
  status = n.fx.status_of("default", "web");
  CHECK(status.find("default/blue") == std::string::npos);
  CHECK(status.find("default/green") != std::string::npos);

  CHECK(n.hotplug().changes.empty());  // nothing changed: nothing done
  Proc del = n.del();
  CHECK_MESSAGE(del.exit_code == 0, del.err);
  n.restore_manifest(R"([{"name": "blue", "interface": "blue1"}])");
  PLUMB_CHECK_UNCHANGED(before, NodeSnapshot::take(n.node.dir(), {"p1"}));
}

TEST_CASE(
    "a hot-plug SIGKILLed after any write-ahead step leaves nothing DEL cannot finish, and the next hot-plug completes "
    "it") {
  bool finished = false;
  for (unsigned step = 1; step <= 40 && !finished; ++step) {
    CAPTURE(step);
    HotplugNode n(R"([{"name": "blue", "interface": "blue1"}])");
    const auto before = NodeSnapshot::take(n.node.dir(), {"p1"});
    REQUIRE(n.add().exit_code == 0);
    n.fx.add_pod("default", "web", R"([{"name": "green", "interface": "green1"}])");
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      plumb::txn::set_fault_hook([](unsigned s) {
        if (s == static_cast<unsigned>(std::atoi(std::getenv("HOTPLUG_KILL_AT")))) ::kill(::getpid(), SIGKILL);
      });
      ::setenv("HOTPLUG_KILL_AT", std::to_string(step).c_str(), 1);
      (void)n.hotplug();
      ::_exit(0);
    }
    int ws = 0;
    REQUIRE(::waitpid(child, &ws, 0) == child);
    finished = WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
    if (step % 2 == 1) {
      // The next hot-plug finishes the job: green only.
      auto out = n.hotplug();
      for (const auto& c : out.changes) CHECK_MESSAGE(!c.error, c.error->text());
      CHECK(link_names("p1") == names({"lo", "eth0", "green1"}));
    }
    Proc del = n.del();
    CHECK_MESSAGE(del.exit_code == 0, del.err);
    n.restore_manifest(R"([{"name": "blue", "interface": "blue1"}])");
    PLUMB_CHECK_UNCHANGED(before, NodeSnapshot::take(n.node.dir(), {"p1"}));
  }
  CHECK(finished);  // the last step was reached: every step was killed once
}
