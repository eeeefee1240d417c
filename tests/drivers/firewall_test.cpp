// The firewall driver end to end: bridge attachments chained with firewall in a private node,
// traffic routed between two bridges through the node (bounded pings), the pods' addresses in
// plumb's nftables sets (`nft -j`), the administrator's chain in the path, ingressPolicy
// same-bridge dropping bridge-to-bridge traffic, and DEL removing the pods' elements; the
// bridge isolation's claims, released by DEL and rollback (a RecordingExecutor run too).
#include <doctest/doctest.h>

#include <string>
#include <tuple>

#include "drivers/steps.hpp"
#include "engine/base/json.hpp"
#include "tests/support/driver_harness.hpp"
#include "tests/support/pod_fixture.hpp"

using plumb::test::ip_json;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;
using plumb::test::sh;

namespace {

/// A bridge network chained with firewall: br-<side>, its subnet routed to the other side's.
std::string fw_nad(const std::string& name, const std::string& side, const std::string& fw_keys, const std::string& ipam_dir,
                   const std::string& start) {
  const bool a = side == "a";
  const std::string subnet = a ? "198.51.100.0/24" : "192.0.2.0/24", other = a ? "192.0.2.0/24" : "198.51.100.0/24";
  return R"({"cniVersion": "1.0.0", "name": ")" + name + R"(", "plugins": [
    {"type": "bridge", "bridge": "br-)" + side + R"(", "isGateway": true,
     "ipam": {"type": "host-local", "dataDir": ")" + ipam_dir + R"(", "ranges": [[{"subnet": ")" + subnet +
         R"(", "rangeStart": ")" + start + R"("}]], "routes": [{"dst": ")" + other + R"("}]}},
    {"type": "firewall")" + fw_keys + R"(}]})";
}

std::string net1_ip(const std::string& ns) {
  auto d = ip_json("-n " + ns + " -4 addr show dev net1");
  return d[0]["addr_info"][0]["local"].GetString();
}

bool ping(const std::string& from, const std::string& to) {
  return sh("ip netns exec " + from + " ping -c 1 -W 1 " + to).exit_code == 0;
}

std::string set_of(const std::string& name) { return sh("nft list set inet plumb " + name).out; }

/// The isolation sets and their claims, as `nft list set` prints them.
std::string isolation_sets() {
  std::string all;
  for (const char* set : {"firewall-bridges", "firewall-bridge-pairs", "firewall-isolated-pairs",
                          "firewall-bridge-owners", "firewall-isolated-owners"}) {
    all += set_of(set);
  }
  return all;
}

/// A bridge network br-s (static address `address`) chained with firewall of ingressPolicy `policy`.
std::string static_nad(const std::string& name, const std::string& policy, const std::string& address) {
  return R"({"cniVersion": "1.0.0", "name": ")" + name + R"(", "plugins": [
    {"type": "bridge", "bridge": "br-s", "ipam": {"type": "static", "addresses": [{"address": ")" +
         address + R"("}]}},
    {"type": "firewall", "ingressPolicy": ")" +
         policy + R"("}]})";
}

}  // namespace

TEST_CASE("firewall: pods admitted per address, the admin chain in the path, same-bridge isolation, DEL cleans") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("default", "fa", fw_nad("fa", "a", R"(, "backend": "iptables", "iptablesAdminChainName": "MY-ADMIN")", fx.ipam_dir(), "198.51.100.10"));
  fx.add_nad("default", "fb", fw_nad("fb", "b", "", fx.ipam_dir(), "192.0.2.10"));
  fx.add_nad("default", "fa-iso", fw_nad("fa-iso", "a", R"(, "ingressPolicy": "same-bridge")", fx.ipam_dir(), "198.51.100.100"));
  fx.add_nad("default", "fb-iso", fw_nad("fb-iso", "b", R"(, "ingressPolicy": "isolated")", fx.ipam_dir(), "192.0.2.100"));
  std::string pa = node.add_netns("pod-a"), pb = node.add_netns("pod-b");
  fx.add_pod("default", "pod-a", "fa");
  fx.add_pod("default", "pod-b", "fb");
  Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
  INFO("pod-a: ", a.out, a.err);
  REQUIRE(a.exit_code == 0);
  Proc b = fx.run("ADD", "ctr-b", pb, "default", "pod-b", fx.config());
  INFO("pod-b: ", b.out, b.err);
  REQUIRE(b.exit_code == 0);
  const std::string ip_a = net1_ip("pod-a"), ip_b = net1_ip("pod-b");

  // Admitted: both addresses in the set, with their owner as comment; the admin chain exists and
  // is jumped to; traffic routed br-a -> br-b flows.
  CHECK(set_of("firewall4").find(ip_a) != std::string::npos);
  CHECK(set_of("firewall4").find("ctr-a/net1") != std::string::npos);
  CHECK(set_of("firewall4").find(ip_b) != std::string::npos);
  CHECK(sh("nft list chain inet plumb firewall-admin").out.find("jump MY-ADMIN") != std::string::npos);
  CHECK(sh("nft list chain inet plumb CNI-ADMIN").exit_code == 0);
  CHECK(ping("pod-a", ip_b));

  // The administrator's chain is in the path: a drop there stops the pod's forwarded traffic.
  REQUIRE(sh("nft add rule inet plumb MY-ADMIN ip saddr " + ip_a + " drop").exit_code == 0);
  CHECK_FALSE(ping("pod-a", ip_b));
  REQUIRE(sh("nft flush chain inet plumb MY-ADMIN").exit_code == 0);
  CHECK(ping("pod-a", ip_b));

  Proc check = fx.run("CHECK", "ctr-a", pa, "default", "pod-a", fx.config(R"("prevResult": )" + a.out));
  INFO("check: ", check.out, check.err);
  CHECK(check.exit_code == 0);

  // ingressPolicy on both bridges (same-bridge on br-a, isolated on br-b): traffic between the
  // two bridges is dropped from now on, for every pod on them.
  std::string pc = node.add_netns("pod-c"), pd = node.add_netns("pod-d");
  fx.add_pod("default", "pod-c", "fa-iso");
  fx.add_pod("default", "pod-d", "fb-iso");
  REQUIRE(fx.run("ADD", "ctr-c", pc, "default", "pod-c", fx.config()).exit_code == 0);
  REQUIRE(fx.run("ADD", "ctr-d", pd, "default", "pod-d", fx.config()).exit_code == 0);
  INFO("bridges: ", set_of("firewall-bridges"), " isolated: ", set_of("firewall-isolated-pairs"));
  CHECK(set_of("firewall-bridges").find("br-a") != std::string::npos);
  CHECK(set_of("firewall-isolated-pairs").find("br-b") != std::string::npos);
  CHECK(set_of("firewall-isolated-pairs").find("br-a") == std::string::npos);
  CHECK_FALSE(ping("pod-a", ip_b));
  CHECK_FALSE(ping("pod-c", net1_ip("pod-d")));
  // Within one bridge nothing changes (bridged traffic).
  CHECK(ping("pod-a", net1_ip("pod-c")));

  for (auto [cid, name, path] : {std::tuple{"ctr-a", "pod-a", pa}, std::tuple{"ctr-b", "pod-b", pb}, std::tuple{"ctr-c", "pod-c", pc},
                                 std::tuple{"ctr-d", "pod-d", pd}}) {
    Proc del = fx.run("DEL", cid, path, "default", name, fx.config());
    INFO("del ", cid, ": ", del.out, del.err);
    CHECK(del.exit_code == 0);
  }
  CHECK(set_of("firewall4").find(ip_a) == std::string::npos);
  CHECK(set_of("firewall-owners").find("elements") == std::string::npos);
  // No attachment claims the bridges' isolation any more: they are out of the sets (the reference
  // leaves its rules for good).
  CHECK(set_of("firewall-bridges").find("br-a") == std::string::npos);
  CHECK(set_of("firewall-isolated-pairs").find("br-b") == std::string::npos);
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
}

TEST_CASE("firewall: an address admitted for another container is a conflict; the other's element survives") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("default", "st", R"({"cniVersion": "1.0.0", "name": "st", "plugins": [
    {"type": "bridge", "bridge": "br-s", "ipam": {"type": "static", "addresses": [{"address": "198.51.100.7/24"}]}},
    {"type": "firewall"}]})");
  std::string pa = node.add_netns("pod-a"), pb = node.add_netns("pod-b");
  fx.add_pod("default", "pod-a", "st");
  fx.add_pod("default", "pod-b", "st");
  REQUIRE(fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config()).exit_code == 0);
  Proc b = fx.run("ADD", "ctr-b", pb, "default", "pod-b", fx.config());
  CHECK(b.exit_code != 0);
  CHECK(b.out.find("198.51.100.7 is already admitted for ctr-a/net1") != std::string::npos);
  CHECK(set_of("firewall4").find("ctr-a/net1") != std::string::npos);
  CHECK(fx.run("DEL", "ctr-a", pa, "default", "pod-a", fx.config()).exit_code == 0);
  CHECK(set_of("firewall4").find("198.51.100.7") == std::string::npos);
}

TEST_CASE("firewall: backend firewalld, an unknown ingressPolicy and a plumb-owned admin chain name are refused by name") {
  Node node;
  PodFixture fx(node);
  std::string pa = node.add_netns("pod-a");
  for (auto [keys, needle] : {std::pair{R"(, "backend": "firewalld")", "firewalld"}, std::pair{R"(, "ingressPolicy": "closed")", "closed"},
                              std::pair{R"(, "iptablesAdminChainName": "portmap-dnat")", "portmap-dnat"}}) {
    fx.add_nad("default", "fa", fw_nad("fa", "a", keys, fx.ipam_dir(), "198.51.100.10"));
    fx.add_pod("default", "pod-a", "fa");
    Proc a = fx.run("ADD", "ctr-a", pa, "default", "pod-a", fx.config());
    INFO(keys, ": ", a.out);
    CHECK(a.exit_code != 0);
    CHECK(a.out.find(needle) != std::string::npos);
    CHECK(sh("ip -n pod-a -j link show").out.find("net1") == std::string::npos);
  }
}

TEST_CASE(
    "firewall isolated with a RecordingExecutor: the isolation and the admission as steps with their inverses; "
    "nftables untouched") {
  Node node;
  plumb::drivers::steps::RecordingExecutor rec;
  plumb::drivers::Context ctx;
  ctx.container_id = "ctr-rec";
  ctx.ifname = "net1";
  ctx.network = "rec-net";
  ctx.executor = &rec;
  plumb::cni::CniResult prev;
  prev.cni_version = "1.1.0";
  prev.interfaces = {{"br-r", "", std::nullopt, "", "", ""}};
  prev.ips.push_back({});
  prev.ips[0].address = plumb::IpPrefix::parse("203.0.113.9/24").value();
  auto conf = plumb::json::parse(R"({"type": "firewall", "ingressPolicy": "isolated"})", "test");
  REQUIRE(conf);
  auto r = plumb::test::add_plugin(ctx, *conf, &prev);
  REQUIRE_MESSAGE(r, r.error().text());
  REQUIRE(rec.made().size() == 2);
  CHECK(rec.made()[0].step == "isolate_bridge");
  REQUIRE(rec.made()[0].inverse);
  CHECK(plumb::json::dump(plumb::drivers::undo::encode(rec.made()[0].inverse->op)) ==
        R"({"op":"firewall.release_bridge","bridge":"br-r","isolated":true,"containerID":"ctr-rec","ifname":"net1",)"
        R"("ifUnknown":"skip"})");
  CHECK_FALSE(rec.made()[0].inverse->rollback_only);
  CHECK(rec.made()[1].step == "add_firewall_pod");
  REQUIRE(rec.made()[1].inverse);
  CHECK(plumb::json::dump(plumb::drivers::undo::encode(rec.made()[1].inverse->op)) ==
        R"({"op":"firewall.remove","containerID":"ctr-rec","ifname":"net1","addresses":["203.0.113.9"],)"
        R"("adminChain":"CNI-ADMIN"})");
  CHECK(sh("nft list tables").out.find("inet plumb") == std::string::npos);
}

TEST_CASE(
    "firewall isolation is claimed per attachment: DEL and a rolled-back ADD leave the isolation sets as before, "
    "the last claim's DEL empties them") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("default", "s-same", static_nad("s-same", "same-bridge", "198.51.100.7/24"));
  fx.add_nad("default", "s-iso", static_nad("s-iso", "isolated", "198.51.100.8/24"));
  fx.add_nad("default", "s-iso-dup", static_nad("s-iso-dup", "isolated", "198.51.100.7/24"));
  std::string p1 = node.add_netns("pod-1"), p2 = node.add_netns("pod-2"), p3 = node.add_netns("pod-3");
  fx.add_pod("default", "pod-1", "s-same");
  fx.add_pod("default", "pod-2", "s-iso");
  fx.add_pod("default", "pod-3", "s-iso-dup");
  Proc a1 = fx.run("ADD", "ctr-1", p1, "default", "pod-1", fx.config());
  INFO("pod-1: ", a1.out, a1.err);
  REQUIRE(a1.exit_code == 0);
  const std::string same_bridge_only = isolation_sets();
  CHECK(set_of("firewall-bridges").find("br-s") != std::string::npos);
  CHECK(set_of("firewall-isolated-pairs").find("br-s") == std::string::npos);

  // An isolated attachment on the same bridge adds the isolated pair; its DEL takes out only that.
  Proc a2 = fx.run("ADD", "ctr-2", p2, "default", "pod-2", fx.config());
  INFO("pod-2: ", a2.out, a2.err);
  REQUIRE(a2.exit_code == 0);
  CHECK(set_of("firewall-isolated-pairs").find("br-s") != std::string::npos);
  REQUIRE(fx.run("DEL", "ctr-2", p2, "default", "pod-2", fx.config()).exit_code == 0);
  CHECK(isolation_sets() == same_bridge_only);

  // An isolated ADD whose admission fails after the isolation (its address is pod-1's): rolled back.
  Proc a3 = fx.run("ADD", "ctr-3", p3, "default", "pod-3", fx.config());
  CHECK(a3.exit_code != 0);
  CHECK(a3.out.find("198.51.100.7 is already admitted for ctr-1/net1") != std::string::npos);
  CHECK(isolation_sets() == same_bridge_only);

  // The last claim's DEL: no element left in any isolation set.
  REQUIRE(fx.run("DEL", "ctr-1", p1, "default", "pod-1", fx.config()).exit_code == 0);
  for (const char* set : {"firewall-bridges", "firewall-bridge-pairs", "firewall-isolated-pairs",
                          "firewall-bridge-owners", "firewall-isolated-owners"}) {
    INFO(set, ": ", set_of(set));
    CHECK(set_of(set).find("elements") == std::string::npos);
  }
}
