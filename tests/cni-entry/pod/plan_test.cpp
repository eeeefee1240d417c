// Planning before changing (cni-entry/pod/plan.hpp): every plugin of every attachment of a pod is
// parsed before the first change, so a bad config in the pod's third attachment fails the ADD
// with nothing done. "Nothing" is counted from the kernel's side: netlink monitor sockets in the
// node and pod namespaces (links, addresses, routes, neighbours) and on nftables' change
// notifications see no message at all during the failed ADD; the disk holds no record, lock or
// address file.
#include <doctest/doctest.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>

#include "engine/base/netns.hpp"
#include "tests/support/foreign_plugin.hpp"
#include "tests/support/kube_cluster.hpp"
#include "tests/support/pod_fixture.hpp"

using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;

namespace {

/// A netlink socket subscribed to change notifications; counts what arrives.
class Monitor {
 public:
  /// protocol NETLINK_ROUTE with rtnetlink groups, or NETLINK_NETFILTER with NFNLGRP_NFTABLES.
  Monitor(int protocol, const std::vector<unsigned>& groups) {
    fd_ = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, protocol);
    REQUIRE(fd_ >= 0);
    sockaddr_nl sa{};
    sa.nl_family = AF_NETLINK;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    for (unsigned g : groups) REQUIRE(::setsockopt(fd_, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &g, sizeof g) == 0);
  }
  ~Monitor() { ::close(fd_); }
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  /// Messages received since the last call (non-blocking drain).
  size_t drain() {
    size_t n = 0;
    char buf[65536];
    for (;;) {
      ssize_t len = ::recv(fd_, buf, sizeof buf, 0);
      if (len <= 0) break;
      for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, static_cast<unsigned>(len)); h = NLMSG_NEXT(h, len)) ++n;
    }
    return n;
  }

 private:
  int fd_ = -1;
};

const std::vector<unsigned> kRtGroups = {RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR, RTNLGRP_IPV4_ROUTE,
                                         RTNLGRP_IPV6_ROUTE, RTNLGRP_NEIGH};

}  // namespace

TEST_CASE("a pod whose third attachment has a bad config fails with no kernel change at all") {
  Node node;
  PodFixture fx(node);
  REQUIRE(plumb::test::sh("ip link add mst0 type veth peer name mst0p").exit_code == 0);
  fx.add_nad("default", "blue", plumb::test::bridge_net("br-blue", "198.51.100.0/24", fx.ipam_dir()));
  fx.add_nad("default", "bad", R"({"cniVersion": "1.0.0", "type": "macvlan", "master": "mst0", "mode": "bogus",
    "ipam": {"type": "host-local", "dataDir": ")" + fx.ipam_dir() + R"(", "ranges": [[{"subnet": "192.0.2.0/24"}]]}})");
  fx.add_pod("default", "web", R"([{"name": "blue"}, {"name": "bad"}])");
  std::string pod = node.add_netns("web");

  Monitor node_rt(NETLINK_ROUTE, kRtGroups);
  Monitor node_nft(NETLINK_NETFILTER, {NFNLGRP_NFTABLES});
  auto pod_ns = plumb::netns::Netns::open(pod);
  REQUIRE(pod_ns);
  std::optional<Monitor> pod_rt;
  {
    auto guard = plumb::netns::Guard::enter(*pod_ns);
    REQUIRE(guard);
    pod_rt.emplace(NETLINK_ROUTE, kRtGroups);
  }
  node_rt.drain();
  node_nft.drain();
  pod_rt->drain();

  Proc add = fx.run("ADD", "ctr-1", pod, "default", "web", fx.config());
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code != 0);
  CHECK(add.out.find("\"code\":7") != std::string::npos);
  CHECK(add.out.find("default/bad") != std::string::npos);
  CHECK(add.out.find("mode \\\"bogus\\\"") != std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // notifications are sent synchronously; be generous
  CHECK(node_rt.drain() == 0);
  CHECK(pod_rt->drain() == 0);
  CHECK(node_nft.drain() == 0);
  CHECK(PodFixture::files_under(fx.state()).empty());  // no record, no lock file
  CHECK(PodFixture::files_under(fx.ipam_dir()).empty());

  // The monitors do see an ADD that changes things: the same pod without the bad element.
  fx.add_pod("default", "web", R"([{"name": "blue"}])");
  Proc ok = fx.run("ADD", "ctr-1", pod, "default", "web", fx.config());
  INFO("stdout: ", ok.out, "\nstderr: ", ok.err);
  REQUIRE(ok.exit_code == 0);
  CHECK(node_rt.drain() > 0);
  CHECK(pod_rt->drain() > 0);
  CHECK(node_nft.drain() > 0);  // the default network masquerades
  CHECK(fx.run("DEL", "ctr-1", pod, "default", "web", fx.config()).exit_code == 0);
}

TEST_CASE("a selection element's deviceID (Multus's extension) reaches the plugins declaring the deviceID capability as runtimeConfig.deviceID") {
  Node node;
  PodFixture fx(node);
  plumb::test::ForeignBin bin(node);
  bin.install_fake();
  fx.add_nad("default", "accel", R"({"cniVersion": "1.0.0", "name": "accel", "plugins": [)" +
                                     bin.fake_plugin(R"("podIfname": "net1", "address": "192.0.2.9/24", "capabilities": {"deviceID": true})") +
                                     "]}");
  fx.add_pod("default", "web", R"([{"name": "accel", "deviceID": "0000:af:00.3"}])");
  std::string pod = node.add_netns("web");
  Proc add = fx.run("ADD", "ctr-web", pod, "default", "web", fx.config(bin.bin_dir_key()));
  INFO(add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(add.err.find("deviceID") == std::string::npos);  // no "reserved key" warning: Multus defines it
  auto adds = bin.calls("ADD");
  REQUIRE(adds.size() == 1);
  REQUIRE(adds[0].stdin.HasMember("runtimeConfig"));
  CHECK(std::string(adds[0].stdin["runtimeConfig"]["deviceID"].GetString()) == "0000:af:00.3");
  CHECK_FALSE(adds[0].stdin.HasMember("deviceID"));  // Multus puts the element's only in runtimeConfig
  REQUIRE(fx.run("DEL", "ctr-web", pod, "default", "web", fx.config(bin.bin_dir_key())).exit_code == 0);
}
