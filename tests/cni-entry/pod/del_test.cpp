// DEL and CHECK (cni-entry/pod/del.cpp) as runtimes drive them, through the real plumb binary:
// a stale sandbox's repeated DEL (containerd re-sends DEL for old sandboxes, the kubelet's GC
// always does) leaves the network-status of the pod's current sandbox alone; CHECK skips
// networks whose conflist says "disableCheck" (CNI 1.1.0, as libcni).
#include <doctest/doctest.h>

#include <string>

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
