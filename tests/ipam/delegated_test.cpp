// ipam/delegated: an "ipam" type plumb does not implement, inside one of plumb's own drivers, is
// run with the CNI IPAM delegation protocol — here Debian's reference host-local binary copied
// under the foreign type name "ref-host-local" (a type plumb never implements natively), through
// the real plumb binary: the address is the reference plugin's, in its own data directory; DEL
// after the NAD is deleted releases it; a SIGKILLed ADD leaves nothing held after DEL. And the
// test-only foreign plugin as IPAM receives the whole plugin config and the attachment's CNI_*.
#include <doctest/doctest.h>
#include <signal.h>

#include <filesystem>
#include <set>
#include <string>

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

std::set<std::string> held(const std::string& dir) {
  std::set<std::string> out;
  for (auto& f : PodFixture::files_under(dir)) {
    auto base = std::filesystem::path(f).filename().string();
    if (base != "lock" && base.rfind("last_reserved_ip", 0) != 0) out.insert(base);
  }
  return out;
}

/// NAD default/blue: a native bridge whose IPAM is Debian's host-local copied as ref-host-local,
/// its data in `data` (returned).
std::string reference_host_local_nad(const PodFixture& fx, const ForeignBin& bin, const std::string& data) {
  bin.install_reference("host-local", "ref-host-local");
  fx.add_nad("default", "blue", R"({"cniVersion": "1.0.0", "name": "blue", "type": "bridge", "bridge": "br-blue",
    "ipam": {"type": "ref-host-local", "dataDir": ")" + data + R"(", "ranges": [[{"subnet": "198.51.100.0/24"}]]}})");
  return data;
}

}  // namespace

TEST_CASE("the reference host-local (copied as ref-host-local) as a native bridge's IPAM: ADD, CHECK, DEL after the NAD is gone") {
  Node node;
  PodFixture fx(node);
  ForeignBin bin(node);
  const std::string data = reference_host_local_nad(fx, bin, node.dir() + "/ref-ipam");
  fx.add_pod("default", "web", "blue");
  std::string pod = node.add_netns("web");
  const std::string conf = fx.config(bin.bin_dir_key());
  Proc add = fx.run("ADD", "ctr-web", pod, "default", "web", conf);
  INFO("ADD: ", add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(ipv4_of("web", "net1") == "198.51.100.2/24");
  CHECK(held(data) == std::set<std::string>{"198.51.100.2"});
  CHECK(plumb::test::read_file(data + "/blue/198.51.100.2").rfind("ctr-web", 0) == 0);
  CHECK(fx.run("CHECK", "ctr-web", pod, "default", "web", conf).exit_code == 0);

  std::filesystem::remove(fx.store() + "/nads/default-blue.yaml");
  Proc del = fx.run("DEL", "ctr-web", pod, "default", "web", conf);
  INFO("DEL: ", del.out, del.err);
  REQUIRE(del.exit_code == 0);
  CHECK(held(data).empty());
  CHECK(ip_json("link show type veth").Size() == 0);
}

TEST_CASE("a delegated IPAM gets the whole plugin config and the attachment's CNI_IFNAME (IPAM delegation protocol)") {
  Node node;
  PodFixture fx(node);
  ForeignBin bin(node);
  bin.install_fake("fake-ipam");
  // As an IPAM the fake plugin only records and returns an address: podIfname names a veth it
  // builds aside, so the bridge's own net1 is untouched.
  fx.add_nad("default", "blue", R"({"cniVersion": "1.0.0", "name": "blue", "type": "bridge", "bridge": "br-blue", "ipam": )" +
                                    bin.fake_plugin(R"("podIfname": "aside0", "address": "198.51.100.77/24")", "fake-ipam") + "}");
  fx.add_pod("default", "web", "blue");
  std::string pod = node.add_netns("web");
  Proc add = fx.run("ADD", "ctr-web", pod, "default", "web", fx.config(bin.bin_dir_key()));
  INFO("ADD: ", add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(ipv4_of("web", "net1") == "198.51.100.77/24");
  auto adds = bin.calls("ADD");
  REQUIRE(adds.size() == 1);
  CHECK(std::string(adds[0].stdin["type"].GetString()) == "bridge");  // the plugin's config, not just "ipam"
  CHECK(std::string(adds[0].stdin["name"].GetString()) == "blue");
  CHECK(std::string(adds[0].stdin["ipam"]["type"].GetString()) == "fake-ipam");
  CHECK(std::string(adds[0].env["CNI_IFNAME"].GetString()) == "net1");
  CHECK(std::string(adds[0].env["CNI_COMMAND"].GetString()) == "ADD");
  REQUIRE(fx.run("DEL", "ctr-web", pod, "default", "web", fx.config(bin.bin_dir_key())).exit_code == 0);
  auto dels = bin.calls("DEL");
  REQUIRE(dels.size() == 1);
  CHECK(std::string(dels[0].stdin["type"].GetString()) == "bridge");
  CHECK(std::string(dels[0].env["CNI_IFNAME"].GetString()) == "net1");
}

TEST_CASE("SIGKILL at every intent of an ADD whose IPAM is delegated (plumb-faulty): DEL releases the address") {
  Node node;
  PodFixture fx(node);
  ForeignBin bin(node);
  const std::string data = reference_host_local_nad(fx, bin, node.dir() + "/ref-ipam");
  fx.add_pod("default", "crash", "blue");
  std::string pod = node.add_netns("crash");
  const std::string conf = fx.config(bin.bin_dir_key());
  unsigned killed = 0;
  for (unsigned step = 1; step < 40; ++step) {
    CAPTURE(step);
    Proc add = fx.run_with(plumb::test::plumb_faulty_binary(), {{"PLUMB_FAULT_AFTER_STEP", std::to_string(step)}}, "ADD",
                           "ctr-crash", pod, "default", "crash", conf);
    Proc del = fx.run("DEL", "ctr-crash", pod, "default", "crash", conf);
    INFO(del.out, del.err);
    REQUIRE(del.exit_code == 0);
    CHECK(held(data).empty());
    CHECK(ip_json("link show type veth").Size() == 0);
    if (add.exit_code == 0) break;
    REQUIRE(add.exit_code == 128 + SIGKILL);
    ++killed;
  }
  CHECK(killed >= 5);
}
