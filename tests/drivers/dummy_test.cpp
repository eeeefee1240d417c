// The dummy driver: ipam required and, on this machine's kernel (no dummy devices), the clear CNI
// error (host); the dummy device with the IPAM's addresses and routes, CHECK and DEL on Debian's
// kernel (full-kernel tier). A dummy carries no traffic: the pod reaches its own address on it.
#include <doctest/doctest.h>

#include "tests/support/full_kernel.hpp"
#include "tests/support/netns_view.hpp"
#include "tests/support/pod_fixture.hpp"

using namespace plumb::test;

namespace {

std::string dummy_nad(const PodFixture& fx) {
  return R"({"cniVersion": "1.0.0", "type": "dummy",
   "ipam": {"type": "host-local", "dataDir": ")" + fx.ipam_dir() + R"(",
            "ranges": [[{"subnet": "198.51.100.0/24"}], [{"subnet": "2001:db8:7::/64"}]],
            "routes": [{"dst": "192.0.2.0/24"}]}})";
}


}  // namespace

TEST_CASE("dummy: a config without ipam is refused as the reference does; on a kernel without dummy devices the ADD fails clearly") {
  Node node;
  PodFixture fx(node);
  std::string pod = node.add_netns("pod-a");
  fx.add_nad("default", "dm", R"({"cniVersion": "1.0.0", "type": "dummy"})");
  fx.add_pod("default", "pod-a", R"([{"name": "dm", "interface": "dm0"}])");
  Proc p = fx.run("ADD", "ctr-a", pod, "default", "pod-a", fx.config());
  INFO(p.out, p.err);
  CHECK(p.exit_code != 0);
  CHECK(p.out.find("dm: dummy interface requires an IPAM configuration") != std::string::npos);

  fx.add_nad("default", "dm", dummy_nad(fx));
  check_feature_or_error(fx.run("ADD", "ctr-a", pod, "default", "pod-a", fx.config()), "type dummy", "no dummy devices (CONFIG_DUMMY",
                         "pod-a", "dm0", fx);
}

FULL_KERNEL_CASE("dummy: the pod gets a dummy device with the IPAM's addresses and routes; CHECK passes and fails once it is gone; DEL") {
  Node node;
  PodFixture fx(node);
  std::string pod = node.add_netns("pod-a");
  fx.add_nad("default", "dm", dummy_nad(fx));
  fx.add_pod("default", "pod-a", R"([{"name": "dm", "interface": "dm0"}])");
  Proc a = fx.run("ADD", "ctr-a", pod, "default", "pod-a", fx.config());
  INFO(a.out, a.err);
  REQUIRE(a.exit_code == 0);
  auto l = link_detail("pod-a", "dm0");
  CHECK(std::string(l["linkinfo"]["info_kind"].GetString()) == "dummy");
  CHECK(std::string(l["operstate"].GetString()) != "DOWN");
  const std::string v4 = global_addr("pod-a", "dm0");
  CHECK(v4.rfind("198.51.100.", 0) == 0);
  CHECK(global_addr("pod-a", "dm0", "inet6").rfind("2001:db8:7:", 0) == 0);
  auto routes = ip_json("-n pod-a route show 192.0.2.0/24");
  REQUIRE(routes.Size() == 1);
  CHECK(std::string(routes[0]["dev"].GetString()) == "dm0");
  CHECK(pings("pod-a", v4));

  const std::string check_conf = fx.config(R"("prevResult": )" + a.out);
  Proc check = fx.run("CHECK", "ctr-a", pod, "default", "pod-a", check_conf);
  INFO(check.out, check.err);
  CHECK(check.exit_code == 0);
  REQUIRE(sh("ip -n pod-a link del dm0").exit_code == 0);
  Proc broken = fx.run("CHECK", "ctr-a", pod, "default", "pod-a", check_conf);
  CHECK(broken.exit_code != 0);
  CHECK(broken.out.find("dm0") != std::string::npos);

  CHECK(fx.run("DEL", "ctr-a", pod, "default", "pod-a", fx.config()).exit_code == 0);
  CHECK(link_names("pod-a") == std::set<std::string>{"lo"});
  CHECK(no_records(fx));
}
