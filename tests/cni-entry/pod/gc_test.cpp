// GC and STATUS (cni-entry/pod/gc.cpp), through the real plumb binary: GC removes the
// network-status of a pod it removes (when that sandbox wrote it) and every status no record
// vouches for, and an empty record directory; networks whose conflist says
// "disableGC" are left alone as libcni leaves them; STATUS fails with 50 when the default network
// an ADD would need is missing or unparsable, and passes a delegated default plugin's own STATUS
// error on.
#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "tests/support/foreign_plugin.hpp"
#include "tests/support/pod_fixture.hpp"

using plumb::test::ForeignBin;
using plumb::test::ip_json;
using plumb::test::ipv4_of;
using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;

namespace {

Proc run_verb(const std::string& command, const std::string& conf) {
  return plumb::test::run({plumb::test::plumb_binary()}, {{"CNI_COMMAND", command}, {"CNI_PATH", "/usr/lib/cni"}}, conf);
}

std::string with_valid(std::string conf, const std::string& valid) {
  conf.insert(conf.size() - 1, R"(, "cni.dev/valid-attachments": )" + valid);
  return conf;
}

}  // namespace

TEST_CASE("GC removes the network-status of a pod whose attachments it removes, not that of a kept one") {
  Node node;
  PodFixture fx(node);
  for (const char* name : {"keep", "gone"}) fx.add_pod("default", name, "");
  std::string keep = node.add_netns("keep"), gone = node.add_netns("gone");
  REQUIRE(fx.run("ADD", "ctr-keep", keep, "default", "keep", fx.config()).exit_code == 0);
  REQUIRE(fx.run("ADD", "ctr-gone", gone, "default", "gone", fx.config()).exit_code == 0);
  REQUIRE_FALSE(fx.status_of("default", "gone").empty());
  Proc gc = run_verb("GC", with_valid(fx.config({}, "1.1.0"), R"([{"containerID": "ctr-keep", "ifname": "eth0"}])"));
  INFO(gc.out, gc.err);
  CHECK(gc.exit_code == 0);
  CHECK(fx.status_of("default", "gone").empty());
  CHECK_FALSE(fx.status_of("default", "keep").empty());
  REQUIRE(fx.run("DEL", "ctr-keep", keep, "default", "keep", fx.config()).exit_code == 0);
  CHECK(PodFixture::files_under(fx.store() + "/status").empty());
}

TEST_CASE("GC leaves the attachments of a network whose conflist has disableGC; a DEL still removes them") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("default", "pinned", R"({"cniVersion": "1.1.0", "name": "pinned", "disableGC": true, "plugins": [
    {"type": "bridge", "bridge": "br-pin", "ipam": {"type": "host-local", "dataDir": ")" + fx.ipam_dir() +
                                       R"(", "ranges": [[{"subnet": "198.51.100.0/24"}]]}}]})");
  fx.add_pod("default", "web", "pinned");
  std::string pod = node.add_netns("web");
  REQUIRE(fx.run("ADD", "ctr-1", pod, "default", "web", fx.config()).exit_code == 0);
  Proc gc = run_verb("GC", with_valid(fx.config({}, "1.1.0"), "[]"));
  INFO(gc.out, gc.err);
  CHECK(gc.exit_code == 0);
  CHECK(link_names("web") == std::set<std::string>{"lo", "net1"});  // the default network went, "pinned" stayed
  REQUIRE(fx.run("DEL", "ctr-1", pod, "default", "web", fx.config()).exit_code == 0);
  CHECK(link_names("web") == std::set<std::string>{"lo"});
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
}

TEST_CASE("STATUS: 50 when the default network is missing or unparsable; a delegated default plugin's STATUS is passed on") {
  Node node;
  PodFixture fx(node);
  CHECK(run_verb("STATUS", fx.config({}, "1.1.0")).exit_code == 0);

  plumb::test::write_file(fx.default_conflist(), "{\"cniVersion\": \"1.0.0\", \"name\": ");  // unparsable
  Proc bad = run_verb("STATUS", fx.config({}, "1.1.0"));
  CHECK(bad.exit_code != 0);
  CHECK(bad.out.find(R"("code":50)") != std::string::npos);
  CHECK(bad.out.find("plumb config.clusterNetwork") != std::string::npos);

  std::filesystem::remove(fx.default_conflist());
  Proc missing = run_verb("STATUS", fx.config({}, "1.1.0"));
  CHECK(missing.exit_code != 0);
  CHECK(missing.out.find(R"("code":50)") != std::string::npos);
  CHECK(missing.out.find(fx.default_conflist() + " not found") != std::string::npos);

  ForeignBin bin(node);
  bin.install_fake();
  plumb::test::write_file(fx.default_conflist(), R"({"cniVersion": "1.1.0", "name": "calico-like", "plugins": [)" +
                                                     bin.fake_plugin(R"("statusCode": 51)") + "]}");
  Proc delegated = run_verb("STATUS", fx.config(bin.bin_dir_key(), "1.1.0"));
  CHECK(delegated.exit_code != 0);
  CHECK(delegated.out.find(R"("code":51)") != std::string::npos);
  CHECK(delegated.out.find("plugin fake-cni (STATUS): fake-cni is not ready") != std::string::npos);
  REQUIRE(bin.calls("STATUS").size() == 1);
  CHECK(std::string(bin.calls("STATUS")[0].stdin["name"].GetString()) == "calico-like");
}

TEST_CASE("GC removes a network-status no record vouches for, keeps one that is, and one without an owner") {
  Node node;
  PodFixture fx(node);
  for (const char* name : {"keep", "gone", "old"}) fx.add_pod("default", name, "");
  std::string keep = node.add_netns("keep"), gone = node.add_netns("gone");
  REQUIRE(fx.run("ADD", "ctr-keep", keep, "default", "keep", fx.config()).exit_code == 0);
  REQUIRE(fx.run("ADD", "ctr-gone", gone, "default", "gone", fx.config()).exit_code == 0);
  const std::string written = fx.status_of("default", "gone");
  REQUIRE(fx.run("DEL", "ctr-gone", gone, "default", "gone", fx.config()).exit_code == 0);
  // What a DEL (or GC) killed after the records went and before the status did would leave.
  const std::string dir = fx.store() + "/status/default/";
  plumb::test::write_file(dir + "gone.json", written);
  plumb::test::write_file(dir + "gone.owner", "ctr-gone:eth0");
  // An older plumb's status without an owner: nothing tells whose it is.
  plumb::test::write_file(dir + "old.json", written);
  Proc gc = run_verb("GC", with_valid(fx.config({}, "1.1.0"), R"([{"containerID": "ctr-keep", "ifname": "eth0"}])"));
  INFO(gc.out, gc.err);
  CHECK(gc.exit_code == 0);
  CHECK(fx.status_of("default", "gone").empty());
  CHECK_FALSE(std::filesystem::exists(dir + "gone.owner"));
  CHECK_FALSE(fx.status_of("default", "keep").empty());
  CHECK_FALSE(fx.status_of("default", "old").empty());
  // With every attachment invalid, the kept pod goes, its status with it.
  Proc all = run_verb("GC", with_valid(fx.config({}, "1.1.0"), "[]"));
  CHECK(all.exit_code == 0);
  CHECK(fx.status_of("default", "keep").empty());
  CHECK(PodFixture::files_under(fx.store() + "/status") == std::vector<std::string>{dir + "old.json"});
}

TEST_CASE("GC removes an empty record directory (an ADD killed before its first record), listed as valid or not") {
  Node node;
  PodFixture fx(node);
  for (const char* valid : {R"([])", R"([{"containerID": "ctr-half", "ifname": "eth0"}])"}) {
    CAPTURE(valid);
    std::filesystem::create_directories(fx.state() + "/containers/ctr-half:eth0");
    Proc gc = run_verb("GC", with_valid(fx.config({}, "1.1.0"), valid));
    INFO(gc.out, gc.err);
    CHECK(gc.exit_code == 0);
    CHECK_FALSE(std::filesystem::exists(fx.state() + "/containers/ctr-half:eth0"));
    CHECK_FALSE(std::filesystem::exists(fx.state() + "/locks/ctr-half:eth0"));
  }
}
