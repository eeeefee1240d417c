// The vrf driver (chained): configuration errors and, on this machine's kernel (no VRF), the clear
// CNI error with the previous plugin's interface rolled back (host); on Debian's kernel
// (full-kernel tier) the pod's interface enslaved to the VRF with its routes moved to the VRF's
// table — traffic flows only through the VRF —, a second attachment sharing the VRF, a table
// conflict, CHECK, and DEL taking interfaces out and deleting the VRF with its last member.
#include <doctest/doctest.h>

#include "tests/support/full_kernel.hpp"
#include "tests/support/netns_view.hpp"
#include "tests/support/pod_fixture.hpp"

using namespace plumb::test;

namespace {

/// A bridge network (its own bridge and subnet) with the vrf plugin chained after it.
/// The ipam routes: a route to 192.0.2.0/24 for IPv4 subnets, none for IPv6 ones.
std::string vrf_nad(const PodFixture& fx, const std::string& bridge, const std::string& subnet, const std::string& vrf_keys) {
  const std::string routes = subnet.find(':') == std::string::npos ? R"([{"dst": "192.0.2.0/24"}])" : "[]";
  return R"({"cniVersion": "1.0.0", "plugins": [
    {"type": "bridge", "bridge": ")" + bridge + R"(", "isGateway": true,
     "ipam": {"type": "host-local", "dataDir": ")" + fx.ipam_dir() + R"(", "ranges": [[{"subnet": ")" + subnet + R"("}]],
              "routes": )" + routes + R"(}},
    {"type": "vrf", )" + vrf_keys + "}]}";
}


}  // namespace

TEST_CASE("vrf config: vrfname is required and must be an interface name; a kernel without VRF fails clearly and rolls back") {
  Node node;
  PodFixture fx(node);
  std::string pod = node.add_netns("pod-a");
  auto run = [&](const std::string& vrf_keys) {
    fx.add_nad("default", "red", vrf_nad(fx, "brred", "198.51.100.0/24", vrf_keys));
    fx.add_pod("default", "pod-a", R"([{"name": "red", "interface": "net1"}])");
    Proc p = fx.run("ADD", "ctr-a", pod, "default", "pod-a", fx.config());
    INFO(p.out, p.err);
    return p;
  };
  CHECK(run(R"("table": 10)").out.find("red.vrfname is required") != std::string::npos);
  CHECK(run(R"("vrfname": "a/b")").out.find(R"(red.vrfname \"a/b\")") != std::string::npos);
  CHECK(run(R"("vrfname": "red", "table": -1)").exit_code != 0);
  check_feature_or_error(run(R"("vrfname": "red")"), "type vrf table 10", "no VRF support (CONFIG_NET_VRF", "pod-a", "net1", fx);
}

FULL_KERNEL_CASE("vrf: the interface is enslaved, its routes live in the VRF's table, traffic flows only through the VRF; DEL") {
  Node node;
  PodFixture fx(node);
  std::string pod = node.add_netns("pod-a");
  fx.add_nad("default", "red", vrf_nad(fx, "brred", "198.51.100.0/24", R"("vrfname": "red", "table": 1001)"));
  fx.add_nad("default", "blue", vrf_nad(fx, "brblue", "2001:db8:8::/64", R"("vrfname": "red")"));
  fx.add_pod("default", "pod-a", R"([{"name": "red", "interface": "net1"}, {"name": "blue", "interface": "net2"}])");
  Proc a = fx.run("ADD", "ctr-a", pod, "default", "pod-a", fx.config());
  INFO(a.out, a.err);
  REQUIRE(a.exit_code == 0);

  auto vrf = link_detail("pod-a", "red");
  CHECK(std::string(vrf["linkinfo"]["info_kind"].GetString()) == "vrf");
  CHECK(vrf["linkinfo"]["info_data"]["table"].GetInt() == 1001);
  CHECK(std::string(link_detail("pod-a", "net1")["master"].GetString()) == "red");
  CHECK(std::string(link_detail("pod-a", "net2")["master"].GetString()) == "red");  // the second attachment shares it
  // The route of the ipam ("192.0.2.0/24 via the gateway") moved from the main table to 1001.
  CHECK(ip_json("-n pod-a route show table 1001 192.0.2.0/24").Size() == 1);
  CHECK(ip_json("-n pod-a route show table main 192.0.2.0/24").Size() == 0);
  // The second attachment's IPv6 address survived the change of master (put back as the reference).
  CHECK(global_addr("pod-a", "net2", "inet6").rfind("2001:db8:8::", 0) == 0);
  // Traffic to the gateways goes through the VRF: bound to it, it leaves by net1; unbound, the
  // main table knows only the default network (eth0).
  CHECK(pings("pod-a", "198.51.100.1", "red"));
  CHECK(pings("pod-a", "2001:db8:8::1", "red"));
  CHECK(std::string(ip_json("-n pod-a route get 198.51.100.1 vrf red")[0]["dev"].GetString()) == "net1");
  CHECK(std::string(ip_json("-n pod-a route get 198.51.100.1")[0]["dev"].GetString()) == "eth0");

  Proc check = fx.run("CHECK", "ctr-a", pod, "default", "pod-a", fx.config());
  INFO(check.out, check.err);
  CHECK(check.exit_code == 0);
  CHECK(fx.run("DEL", "ctr-a", pod, "default", "pod-a", fx.config()).exit_code == 0);
  CHECK(link_names("pod-a") == std::set<std::string>{"lo"});  // both interfaces and the VRF gone
  CHECK(no_records(fx));
}

FULL_KERNEL_CASE("vrf: an existing VRF with another table, or an interface that already has a master, fails the ADD and rolls back") {
  Node node;
  PodFixture fx(node);
  std::string pod = node.add_netns("pod-a");
  REQUIRE(sh("ip -n pod-a link add red type vrf table 5").exit_code == 0);
  fx.add_nad("default", "red", vrf_nad(fx, "brred", "198.51.100.0/24", R"("vrfname": "red", "table": 6)"));
  fx.add_pod("default", "pod-a", R"([{"name": "red", "interface": "net1"}])");
  Proc a = fx.run("ADD", "ctr-a", pod, "default", "pod-a", fx.config());
  INFO(a.out, a.err);
  CHECK(a.exit_code != 0);
  CHECK(a.out.find("VRF red already exists with a different routing table 5") != std::string::npos);
  CHECK(link_names("pod-a") == std::set<std::string>{"lo", "red"});  // the foreign VRF stays, nothing else
  CHECK(no_records(fx));
}
