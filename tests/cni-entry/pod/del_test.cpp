// DEL and CHECK (cni-entry/pod/del.cpp) as runtimes drive them, through the real plumb binary:
// a stale sandbox's repeated DEL (containerd re-sends DEL for old sandboxes, the kubelet's GC
// always does) leaves the network-status of the pod's current sandbox alone; CHECK skips
// networks whose conflist says "disableCheck" (CNI 1.1.0, as libcni); attachments are keyed by
// (container ID, CNI_IFNAME) for records, locks, status ownership and repeated ADDs; a DEL
// killed at any step leaves what the next one needs to remove the pod's network-status; an
// empty record directory goes.
#include <doctest/doctest.h>
#include <signal.h>

#include <filesystem>
#include <set>
#include <string>

#include "engine/state/state.hpp"
#include "tests/support/foreign_plugin.hpp"
#include "tests/support/pod_fixture.hpp"

using plumb::test::ForeignBin;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;

TEST_CASE("ADD S1, DEL S1, ADD S2, DEL S1 again: the status S2 wrote stays; S2's own DEL removes it") {
  Node node;
  PodFixture fx(node);
  fx.add_pod("default", "web", "");
  std::string s1 = node.add_netns("s1"), s2 = node.add_netns("s2");
  REQUIRE(fx.run("ADD", "sandbox-1", s1, "default", "web", fx.config()).exit_code == 0);
  REQUIRE(fx.run("DEL", "sandbox-1", s1, "default", "web", fx.config()).exit_code == 0);
  CHECK(fx.status_of("default", "web").empty());
  REQUIRE(fx.run("ADD", "sandbox-2", s2, "default", "web", fx.config()).exit_code == 0);
  const std::string written = fx.status_of("default", "web");
  REQUIRE_FALSE(written.empty());
  Proc stale = fx.run("DEL", "sandbox-1", s1, "default", "web", fx.config());
  CHECK(stale.exit_code == 0);
  CHECK(fx.status_of("default", "web") == written);
  // A DEL for the old sandbox while the new one exists, with its netns gone too.
  CHECK(fx.run("DEL", "sandbox-1", "", "default", "web", fx.config()).exit_code == 0);
  CHECK(fx.status_of("default", "web") == written);
  REQUIRE(fx.run("DEL", "sandbox-2", s2, "default", "web", fx.config()).exit_code == 0);
  CHECK(fx.status_of("default", "web").empty());
  CHECK(PodFixture::files_under(fx.store() + "/status").empty());
}

TEST_CASE("CHECK skips a network whose conflist has disableCheck (bool or \"true\"), and checks it otherwise") {
  Node node;
  PodFixture fx(node);
  ForeignBin bin(node);
  bin.install_fake();
  auto nad = [&](const std::string& disable) {
    fx.add_nad("default", "side", R"({"cniVersion": "1.1.0", "name": "side", )" + disable + R"("plugins": [)" +
                                      bin.fake_plugin(R"("failOn": "CHECK")") + "]}");
  };
  fx.add_pod("default", "web", "side");
  std::string pod = node.add_netns("web");
  const std::string conf = fx.config(bin.bin_dir_key(), "1.1.0");
  nad(R"("disableCheck": true, )");
  REQUIRE(fx.run("ADD", "ctr-1", pod, "default", "web", conf).exit_code == 0);
  Proc skipped = fx.run("CHECK", "ctr-1", pod, "default", "web", conf);
  INFO(skipped.out, skipped.err);
  CHECK(skipped.exit_code == 0);
  CHECK(bin.calls("CHECK").empty());
  REQUIRE(fx.run("DEL", "ctr-1", pod, "default", "web", conf).exit_code == 0);

  nad(R"("disableCheck": "false", )");
  REQUIRE(fx.run("ADD", "ctr-2", pod, "default", "web", conf).exit_code == 0);
  Proc checked = fx.run("CHECK", "ctr-2", pod, "default", "web", conf);
  CHECK(checked.exit_code != 0);
  CHECK(checked.out.find(R"("code":117)") != std::string::npos);  // the plugin's own error code
  CHECK(checked.out.find("fake-cni failed CHECK on purpose") != std::string::npos);
  CHECK(bin.calls("CHECK").size() == 1);
  REQUIRE(fx.run("DEL", "ctr-2", pod, "default", "web", conf).exit_code == 0);
}

TEST_CASE("attachments are (container ID, CNI_IFNAME): a second ifname's ADD and DEL leave the first's alone") {
  Node node;
  PodFixture fx(node);
  fx.add_pod("default", "web", "");
  std::string pod = node.add_netns("web");
  REQUIRE(fx.run("ADD", "ctr-1", pod, "default", "web", fx.config(), "eth0").exit_code == 0);
  Proc second = fx.run("ADD", "ctr-1", pod, "default", "web", fx.config(), "eth1");
  INFO(second.out, second.err);
  REQUIRE(second.exit_code == 0);
  CHECK(plumb::test::link_names("web") == std::set<std::string>{"lo", "eth0", "eth1"});
  // A repeated ADD of either key returns its own recorded result.
  Proc again = fx.run("ADD", "ctr-1", pod, "default", "web", fx.config(), "eth0");
  CHECK(again.exit_code == 0);
  CHECK(again.out.find("\"eth0\"") != std::string::npos);
  CHECK(plumb::test::link_names("web") == std::set<std::string>{"lo", "eth0", "eth1"});
  // The status was written last by eth1's attachments: eth0's DEL leaves it.
  const std::string status = fx.status_of("default", "web");
  REQUIRE(fx.run("DEL", "ctr-1", pod, "default", "web", fx.config(), "eth0").exit_code == 0);
  CHECK(plumb::test::link_names("web") == std::set<std::string>{"lo", "eth1"});
  CHECK(fx.status_of("default", "web") == status);
  CHECK(std::filesystem::exists(fx.state() + "/containers/ctr-1:eth1/0-eth1.json"));
  CHECK_FALSE(std::filesystem::exists(fx.state() + "/containers/ctr-1:eth0"));
  REQUIRE(fx.run("DEL", "ctr-1", pod, "default", "web", fx.config(), "eth1").exit_code == 0);
  CHECK(plumb::test::link_names("web") == std::set<std::string>{"lo"});
  CHECK(fx.status_of("default", "web").empty());
  CHECK(PodFixture::files_under(fx.state()).empty());
}

TEST_CASE("DEL of a container ID plumb never saw, naming a live pod, leaves that pod's network-status") {
  Node node;
  PodFixture fx(node);
  fx.add_pod("default", "web", "");
  std::string pod = node.add_netns("web");
  REQUIRE(fx.run("ADD", "ctr-live", pod, "default", "web", fx.config()).exit_code == 0);
  const std::string written = fx.status_of("default", "web");
  REQUIRE_FALSE(written.empty());
  // Also a status written by an older plumb, without an owner file: only a DEL of its own sandbox removes it.
  std::filesystem::remove(fx.store() + "/status/default/web.owner");
  Proc stranger = fx.run("DEL", "ctr-never-seen", "", "default", "web", fx.config());
  CHECK(stranger.exit_code == 0);
  CHECK(fx.status_of("default", "web") == written);
  CHECK_FALSE(std::filesystem::exists(fx.state() + "/locks/ctr-never-seen:eth0"));
  REQUIRE(fx.run("DEL", "ctr-live", pod, "default", "web", fx.config()).exit_code == 0);
  CHECK(fx.status_of("default", "web").empty());
}

TEST_CASE("ADD refuses a CNI_IFNAME that is no kernel interface name (code 4, naming it); DEL of one succeeds and touches nothing") {
  Node node;
  PodFixture fx(node);
  fx.add_pod("default", "web", "");
  const std::string pod = node.add_netns("web");
  REQUIRE(fx.run("ADD", "ctr-1", pod, "default", "web", fx.config()).exit_code == 0);
  const auto state_before = PodFixture::files_under(fx.state());
  for (const std::string ifname : {"r%d", "../eth0", "eth 0", "abcdefghijklmnop", ".."}) {
    CAPTURE(ifname);
    Proc add = fx.run("ADD", "ctr-2", pod, "default", "web", fx.config(), ifname);
    CHECK(add.exit_code == 1);
    CHECK(add.out.find("\"code\":4,") != std::string::npos);
    CHECK(add.out.find("CNI_IFNAME \\\"" + ifname + "\\\" is not a valid interface name") != std::string::npos);
    // Nothing can exist under it: the runtime's DEL is answered, not failed forever.
    Proc del = fx.run("DEL", "ctr-1", pod, "default", "web", fx.config(), ifname);
    CHECK_MESSAGE(del.exit_code == 0, del.out);
    CHECK(del.out.empty());
    CHECK(PodFixture::files_under(fx.state()) == state_before);
  }
  CHECK(plumb::test::link_names("web").count("eth0") == 1);  // ctr-1's eth0 stays
  REQUIRE(fx.run("DEL", "ctr-1", pod, "default", "web", fx.config()).exit_code == 0);
}

namespace {

/// Replaces every string value `from` in `v` with `to`.
void replace_strings(rapidjson::Value& v, const std::string& from, const std::string& to, rapidjson::Document::AllocatorType& a) {
  if (v.IsString() && v.GetString() == from) v.SetString(to.c_str(), static_cast<rapidjson::SizeType>(to.size()), a);
  if (v.IsArray()) {
    for (auto& e : v.GetArray()) replace_strings(e, from, to, a);
  }
  if (v.IsObject()) {
    for (auto& m : v.GetObject()) replace_strings(m.value, from, to, a);
  }
}

}  // namespace

TEST_CASE("DEL of a pod whose record names its interface \"r%d\" (a kernel name template ADD once took) succeeds and leaves no record") {
  Node node;
  PodFixture fx(node);
  REQUIRE(plumb::test::sh("ip link add m0 type veth peer name m1 && ip link set m0 up").exit_code == 0);
  fx.add_nad("default", "side",
             R"({"cniVersion":"1.0.0","name":"side","type":"macvlan","master":"m0","ipam":{"type":"host-local","dataDir":")" +
                 fx.ipam_dir() + R"(","ranges":[[{"subnet":"198.51.100.0/24"}]]}})");
  fx.add_pod("default", "web", R"([{"name":"side","interface":"rx"}])");
  const std::string pod = node.add_netns("web");
  REQUIRE(fx.run("ADD", "ctr-1", pod, "default", "web", fx.config()).exit_code == 0);
  // The record of "rx" made into what such an ADD recorded: "r%d" wherever it says "rx" (the
  // kernel had named the device r0; here it is rx). Its macvlan's undo looks the link up by name.
  plumb::state::StateDir state(fx.state());
  const plumb::state::Key key{"ctr-1", "eth0"};
  auto records = state.read(key);
  REQUIRE(records.has_value());
  bool rewritten = false;
  for (auto& rec : records->records) {
    if (rec.ifname != "rx") continue;
    std::filesystem::remove(rec.origin);
    rec.ifname = "r%d";
    replace_strings(rec.undo, "rx", "r%d", rec.undo.GetAllocator());
    REQUIRE(state.write(rec).has_value());
    rewritten = true;
  }
  REQUIRE(rewritten);
  const std::string held = fx.ipam_dir() + "/side/198.51.100.2";  // host-local's: the container ID, the ifname
  std::string holder = plumb::test::read_file(held);
  REQUIRE(holder == "ctr-1\r\nrx");  // the reference's line break
  plumb::test::write_file(held, "ctr-1\r\nr%d");
  Proc del = fx.run("DEL", "ctr-1", pod, "default", "web", fx.config());
  CHECK_MESSAGE(del.exit_code == 0, del.out);
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
  CHECK(plumb::test::link_names("web").count("eth0") == 0);
  CHECK_FALSE(std::filesystem::exists(fx.ipam_dir() + "/side/198.51.100.2"));  // the address is released
}

TEST_CASE("a DEL SIGKILLed at any step (plumb-faulty), then repeated: the pod's network-status goes with its records") {
  Node node;
  PodFixture fx(node);
  fx.add_pod("default", "web", "");
  std::string pod = node.add_netns("web");
  unsigned killed = 0;
  for (unsigned step = 1; step < 20; ++step) {
    CAPTURE(step);
    REQUIRE(fx.run("ADD", "ctr-web", pod, "default", "web", fx.config()).exit_code == 0);
    REQUIRE_FALSE(fx.status_of("default", "web").empty());
    Proc del = fx.run_with(plumb::test::plumb_faulty_binary(), {{"PLUMB_FAULT_AFTER_STEP", std::to_string(step)}}, "DEL",
                           "ctr-web", pod, "default", "web", fx.config());
    Proc again = fx.run("DEL", "ctr-web", pod, "default", "web", fx.config());
    INFO(again.out, again.err);
    REQUIRE(again.exit_code == 0);
    CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
    CHECK(fx.status_of("default", "web").empty());
    CHECK(PodFixture::files_under(fx.store() + "/status").empty());
    if (del.exit_code == 0) break;
    REQUIRE(del.exit_code == 128 + SIGKILL);
    ++killed;
  }
  CHECK(killed >= 3);  // before the group deletion, after it, after the record's removal
}

TEST_CASE("an empty record directory (an ADD killed after making it, before its first record) is removed by DEL") {
  Node node;
  PodFixture fx(node);
  fx.add_pod("default", "web", "");
  std::filesystem::create_directories(fx.state() + "/containers/ctr-half:eth0");
  Proc del = fx.run("DEL", "ctr-half", "", "default", "web", fx.config());
  INFO(del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(del.out.empty());
  CHECK_FALSE(std::filesystem::exists(fx.state() + "/containers/ctr-half:eth0"));
  CHECK_FALSE(std::filesystem::exists(fx.state() + "/locks/ctr-half:eth0"));
}
