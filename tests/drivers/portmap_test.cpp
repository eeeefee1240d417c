// plumb's native portmap against the real kernel, each case in a fresh private node namespace.
// The plumb binary runs as a runtime runs it, on a default network of bridge + portmap +
// loopback; real TCP/UDP traffic comes from a "client" namespace connected to the node by a veth
// (198.51.100.2 / 2001:db8:100::2 -> node 198.51.100.1 / 2001:db8:100::1), from the node itself,
// from 127.0.0.1, and from the pod to its own host port (hairpin). Sockets are created by this
// process inside the namespaces (setns around socket()), every wait is bounded by poll timeouts.
// The ruleset is read back independently with `nft -j`, conntrack with /proc/net/nf_conntrack
// (the probes and read-backs: tests/support/portmap_probe.hpp).
#include <doctest/doctest.h>

#include <csignal>

#include "tests/support/full_kernel.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/portmap_probe.hpp"
#include "tests/support/scale.hpp"

using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;
using namespace plumb::test::portmap;

namespace {

/// The pod's listeners: TCP port 80 and UDP port 53, v4 and v6, and TCP port 81 (v4, hostIP).
struct PodListeners {
  Sock t4, t6, u4, u6, h4;
};

/// From another host: the client's own address arrives (no SNAT); through the pod's gateway
/// address too (any local address of the node).
void check_from_client(const std::string& client, const PodIps& ip, const PodListeners& l) {
  auto p = tcp_probe(client, kNodeV4, 8080, l.t4);
  CHECK_MESSAGE(p.ok, "client tcp v4: ", errtext(p.err));
  CHECK(p.peer == kClientV4);
  p = tcp_probe(client, kNodeV6, 8080, l.t6);
  CHECK_MESSAGE(p.ok, "client tcp v6: ", errtext(p.err));
  CHECK(p.peer == kClientV6);
  p = udp_probe(client, kNodeV4, 8053, l.u4);
  CHECK_MESSAGE(p.ok, "client udp v4: ", errtext(p.err));
  CHECK(p.peer == kClientV4);
  p = udp_probe(client, kNodeV6, 8053, l.u6);
  CHECK_MESSAGE(p.ok, "client udp v6: ", errtext(p.err));
  CHECK(p.peer == kClientV6);
  p = tcp_probe(client, ip.gw4, 8080, l.t4);
  CHECK_MESSAGE(p.ok, "client tcp v4 via the bridge address: ", errtext(p.err));
}

/// From the node itself (output hook), and from 127.0.0.1: route_localnet on the bridge and
/// masquerade to the bridge address.
void check_from_node(const PodIps& ip, const PodListeners& l) {
  auto p = tcp_probe("", kNodeV4, 8080, l.t4);
  CHECK_MESSAGE(p.ok, "node tcp v4: ", errtext(p.err));
  CHECK(p.peer == kNodeV4);
  p = tcp_probe("", kNodeV6, 8080, l.t6);
  CHECK_MESSAGE(p.ok, "node tcp v6: ", errtext(p.err));
  p = udp_probe("", kNodeV4, 8053, l.u4);
  CHECK_MESSAGE(p.ok, "node udp v4: ", errtext(p.err));
  p = udp_probe("", kNodeV6, 8053, l.u6);
  CHECK_MESSAGE(p.ok, "node udp v6: ", errtext(p.err));

  CHECK(plumb::test::read_file("/proc/sys/net/ipv4/conf/plumb0/route_localnet") == "1\n");
  p = tcp_probe("", "127.0.0.1", 8080, l.t4);
  CHECK_MESSAGE(p.ok, "localhost tcp: ", errtext(p.err));
  CHECK(p.peer == ip.gw4);
  p = udp_probe("", "127.0.0.1", 8053, l.u4);
  CHECK_MESSAGE(p.ok, "localhost udp: ", errtext(p.err));
  CHECK(p.peer == ip.gw4);
}

/// Hairpin: the pod (namespace path `pod`) to its own host port, masqueraded to the bridge address.
void check_hairpin(const std::string& pod, const PodIps& ip, const PodListeners& l) {
  auto p = tcp_probe(pod, kNodeV4, 8080, l.t4);
  CHECK_MESSAGE(p.ok, "hairpin tcp v4: ", errtext(p.err));
  CHECK(p.peer == ip.gw4);
  p = tcp_probe(pod, kNodeV6, 8080, l.t6);
  CHECK_MESSAGE(p.ok, "hairpin tcp v6: ", errtext(p.err));
  CHECK(p.peer != ip.v6);
  CHECK(p.peer.rfind("2001:db8:0:1:", 0) == 0);  // an address of the bridge
  p = udp_probe(pod, kNodeV4, 8053, l.u4);
  CHECK_MESSAGE(p.ok, "hairpin udp v4: ", errtext(p.err));
  CHECK(p.peer == ip.gw4);
  p = udp_probe(pod, kNodeV6, 8053, l.u6);
  CHECK_MESSAGE(p.ok, "hairpin udp v6: ", errtext(p.err));
  CHECK(p.peer != ip.v6);
}

/// The ruleset: one element per mapping and family, owned by the container, commented. Returns
/// the table's rule count.
size_t check_ruleset(const PodIps& ip) {
  auto d = nft_table();
  CHECK(elements(d, "portmap4").size() == 2);
  CHECK(elements(d, "portmap6").size() == 2);
  CHECK(elements(d, "portmap4-hostip").size() == 1);
  CHECK(elements(d, "portmap6-hostip").empty());
  CHECK(elements(d, "portmap-owners").size() == 5);
  CHECK(elements(d, "portmap4-hairpin").size() == 1);
  CHECK(elements(d, "portmap4-localhost").size() == 1);
  const std::string text = nft_text();
  INFO(text);
  CHECK(text.find("tcp . 8080 comment \"ctr-pod1/eth0\" : " + ip.v4 + " . 80") != std::string::npos);
  CHECK(text.find("udp . 8053 comment \"ctr-pod1/eth0\" : " + ip.v6 + " . 53") != std::string::npos);
  CHECK(text.find("tcp . 198.51.100.1 . 8081 comment \"ctr-pod1/eth0\" : " + ip.v4 + " . 81") != std::string::npos);
  CHECK(text.find("meta nfproto ipv4 dnat ip to meta l4proto . th dport map @portmap4") != std::string::npos);
  CHECK(text.find("fib daddr type local jump portmap-dnat") != std::string::npos);
  CHECK(text.find("ct status dnat ip saddr . ip daddr @portmap4-hairpin masquerade") != std::string::npos);
  return rule_count(d);
}

/// After DEL: the node answers the host ports itself (refused), elements gone, `rules` rules stay.
void check_closed(const std::string& client, const PodListeners& l, size_t rules) {
  CHECK(tcp_connect_error(client, kNodeV4, 8080) == ECONNREFUSED);
  CHECK(tcp_connect_error(client, kNodeV6, 8080) == ECONNREFUSED);
  CHECK(tcp_connect_error("", "127.0.0.1", 8080) == ECONNREFUSED);
  CHECK(tcp_connect_error(client, kNodeV4, 8081) == ECONNREFUSED);
  auto p = udp_probe(client, kNodeV4, 8053, l.u4);
  CHECK_FALSE(p.ok);
  CHECK(p.err == ECONNREFUSED);
  auto after = nft_table();
  CHECK(rule_count(after) == rules);
  for (const char* set : {"portmap4", "portmap6", "portmap4-hostip", "portmap-owners", "portmap4-hairpin",
                          "portmap6-hairpin", "portmap4-localhost"}) {
    INFO(set);
    CHECK(elements(after, set).empty());
  }
}

}  // namespace

TEST_CASE(
    "tcp and udp host ports reach the pod from a client, from the node, from 127.0.0.1 and by hairpin, v4 and v6; DEL "
    "closes them") {
  Node node;
  PodFixture fx(node);
  write_default_network(fx);
  const std::string client = add_client(node);
  const std::vector<std::string> maps = {mapping_json(8080, 80, "tcp"), mapping_json(8053, 53, "udp"),
                                         mapping_json(8081, 81, "TCP", kNodeV4)};
  PodIps ip = add_pod(node, fx, "pod1", maps);
  const std::string pod = "/run/netns/pod1";

  PodListeners l{listener(pod, AF_INET, SOCK_STREAM, 80), listener(pod, AF_INET6, SOCK_STREAM, 80),
                 listener(pod, AF_INET, SOCK_DGRAM, 53), listener(pod, AF_INET6, SOCK_DGRAM, 53),
                 listener(pod, AF_INET, SOCK_STREAM, 81)};
  wait_ipv6_settled({{"", "plumb0"}, {"", "vclient"}, {"client", "eth0"}, {"pod1", "eth0"}});

  check_from_client(client, ip, l);
  check_from_node(ip, l);
  check_hairpin(pod, ip, l);

  // hostIP: only that address (and only IPv4) is mapped.
  auto p = tcp_probe(client, kNodeV4, 8081, l.h4);
  CHECK_MESSAGE(p.ok, "hostIP tcp: ", errtext(p.err));
  CHECK(tcp_connect_error(client, ip.gw4, 8081) == ECONNREFUSED);
  CHECK(tcp_connect_error(client, kNodeV6, 8081) == ECONNREFUSED);

  const size_t rules = check_ruleset(ip);

  // CHECK passes.
  Proc check = fx.run("CHECK", "ctr-pod1", pod, "default", "pod1", config_with(fx, maps));
  CHECK_MESSAGE(check.exit_code == 0, check.out);

  Proc del = del_pod(fx, "pod1", maps);
  INFO("DEL: ", del.out, del.err);
  REQUIRE(del.exit_code == 0);
  check_closed(client, l, rules);
}

TEST_CASE("CHECK fails naming the host port when its element was removed behind plumb's back") {
  Node node;
  PodFixture fx(node);
  write_default_network(fx);
  const std::vector<std::string> maps = {mapping_json(8080, 80, "tcp")};
  PodIps ip = add_pod(node, fx, "pod1", maps);
  Proc ok = fx.run("CHECK", "ctr-pod1", "/run/netns/pod1", "default", "pod1", config_with(fx, maps));
  CHECK_MESSAGE(ok.exit_code == 0, ok.out);
  REQUIRE(plumb::test::sh("nft delete element inet plumb portmap4 '{ tcp . 8080 }'").exit_code == 0);
  Proc bad = fx.run("CHECK", "ctr-pod1", "/run/netns/pod1", "default", "pod1", config_with(fx, maps));
  CHECK(bad.exit_code != 0);
  CHECK(bad.out.find("tcp host port 8080 on every IPv4 address is not mapped") != std::string::npos);
  // DEL still succeeds and leaves nothing (the owner element goes although its mapping is gone).
  Proc del = del_pod(fx, "pod1", maps);
  CHECK_MESSAGE(del.exit_code == 0, del.out);
  auto d = nft_table();
  CHECK(elements(d, "portmap-owners").empty());
  CHECK(elements(d, "portmap6").empty());
}

TEST_CASE("a second pod asking for a taken host port is refused naming the port and the owner; the owner keeps it") {
  Node node;
  PodFixture fx(node);
  write_default_network(fx);
  const std::string client = add_client(node);
  const std::vector<std::string> maps = {mapping_json(8080, 80, "tcp")};
  PodIps ip1 = add_pod(node, fx, "pod1", maps);
  Sock l1 = listener("/run/netns/pod1", AF_INET, SOCK_STREAM, 80);

  std::string ns2 = node.add_netns("pod2");
  fx.add_pod("default", "pod2", "");
  // pod2 also maps an unrelated port, which must not stay behind either.
  const std::vector<std::string> maps2 = {mapping_json(9090, 90, "tcp"), mapping_json(8080, 8000, "tcp")};
  Proc add2 = fx.run("ADD", "ctr-pod2", ns2, "default", "pod2", config_with(fx, maps2));
  INFO("ADD pod2: ", add2.out, add2.err);
  CHECK(add2.exit_code != 0);
  rapidjson::Document err;
  err.Parse(add2.out.c_str());
  REQUIRE(err.IsObject());
  CHECK(err["code"].GetInt() == 105);
  const std::string msg = err["msg"].GetString();
  CHECK(msg.find("tcp host port 8080") != std::string::npos);
  CHECK(msg.find("container ctr-pod1 (interface eth0)") != std::string::npos);
  CHECK(msg.find(ip1.v4 + ":80") != std::string::npos);

  // The rollback of pod2 removed nothing of pod1's and nothing of its own is left.
  auto d = nft_table();
  CHECK(elements(d, "portmap4").size() == 1);
  CHECK(elements(d, "portmap6").size() == 1);
  CHECK(elements(d, "portmap-owners").size() == 2);
  CHECK(nft_text().find("9090") == std::string::npos);
  auto p = tcp_probe(client, kNodeV4, 8080, l1);
  CHECK_MESSAGE(p.ok, "pod1 after pod2's failed ADD: ", errtext(p.err));

  // The runtime's DEL of the failed pod2 does not touch pod1's mapping either.
  Proc del2 = del_pod(fx, "pod2", maps2);
  CHECK_MESSAGE(del2.exit_code == 0, del2.out);
  p = tcp_probe(client, kNodeV4, 8080, l1);
  CHECK_MESSAGE(p.ok, "pod1 after pod2's DEL: ", errtext(p.err));
  CHECK(nft_text().find("comment \"ctr-pod1/eth0\"") != std::string::npos);

  // Once pod1 is gone, pod2 gets the port.
  REQUIRE(del_pod(fx, "pod1", maps).exit_code == 0);
  Proc again = fx.run("ADD", "ctr-pod2", ns2, "default", "pod2", config_with(fx, maps2));
  INFO("ADD pod2 again: ", again.out, again.err);
  REQUIRE(again.exit_code == 0);
  Sock l2 = listener(ns2, AF_INET, SOCK_STREAM, 8000);
  p = tcp_probe(client, kNodeV4, 8080, l2);
  CHECK_MESSAGE(p.ok, "pod2 after pod1's DEL: ", errtext(p.err));
}

TEST_CASE("200 pods with host ports (40 under the sanitizers): the rule count does not change and every mapping works") {
  Node node;
  PodFixture fx(node);
  write_default_network(fx);
  const std::string client = add_client(node);
  constexpr int kPods = plumb::test::pod_count(200, 40);
  size_t rules_after_first = 0;
  std::vector<PodIps> ips;
  for (int i = 0; i < kPods; ++i) {
    ips.push_back(add_pod(node, fx, "p" + std::to_string(i), {mapping_json(20000 + i, 80, "tcp")}));
    if (i == 0) rules_after_first = rule_count(nft_table());
  }
  auto d = nft_table();
  CHECK(rules_after_first > 0);
  CHECK(rule_count(d) == rules_after_first);
  CHECK(elements(d, "portmap4").size() == kPods);
  CHECK(elements(d, "portmap6").size() == kPods);

  wait_ipv6_settled({{"", "plumb0"}, {"", "vclient"}, {"client", "eth0"}, {"p" + std::to_string(kPods - 1), "eth0"}});
  int working = 0;
  for (int i = 0; i < kPods; ++i) {
    const std::string ns = "/run/netns/p" + std::to_string(i);
    Sock l4 = listener(ns, AF_INET, SOCK_STREAM, 80), l6 = listener(ns, AF_INET6, SOCK_STREAM, 80);
    auto p4 = tcp_probe(client, kNodeV4, static_cast<uint16_t>(20000 + i), l4);
    auto p6 = tcp_probe(client, kNodeV6, static_cast<uint16_t>(20000 + i), l6);
    CHECK_MESSAGE(p4.ok, "pod ", i, " v4: ", errtext(p4.err));
    CHECK_MESSAGE(p6.ok, "pod ", i, " v6: ", errtext(p6.err));
    working += p4.ok && p6.ok;
  }
  CHECK(working == kPods);

  for (int i = 0; i < kPods; ++i) {
    Proc del = del_pod(fx, "p" + std::to_string(i), {mapping_json(20000 + i, 80, "tcp")});
    CHECK_MESSAGE(del.exit_code == 0, del.out);
  }
  auto after = nft_table();
  CHECK(rule_count(after) == rules_after_first);
  CHECK(elements(after, "portmap4").empty());
  CHECK(elements(after, "portmap-owners").empty());
}

TEST_CASE("UDP conntrack entries of a released host port are flushed, and stale ones when a port is claimed") {
  Node node;
  PodFixture fx(node);
  write_default_network(fx);
  const std::string client = add_client(node);
  const std::vector<std::string> maps = {mapping_json(8053, 53, "udp")};
  add_pod(node, fx, "pod1", maps);
  Sock u1 = listener("/run/netns/pod1", AF_INET, SOCK_DGRAM, 53);
  auto p = udp_probe(client, kNodeV4, 8053, u1, 40000);
  REQUIRE_MESSAGE(p.ok, "pod1: ", errtext(p.err));
  CHECK(conntrack_lines("udp", 8053).size() == 1);

  REQUIRE(del_pod(fx, "pod1", maps).exit_code == 0);
  CHECK(conntrack_lines("udp", 8053).empty());

  // The same flow (same client port) now reaches the port's new owner instead of following
  // the old binding to pod1's released address.
  add_pod(node, fx, "pod2", maps);
  Sock u2 = listener("/run/netns/pod2", AF_INET, SOCK_DGRAM, 53);
  p = udp_probe(client, kNodeV4, 8053, u2, 40000);
  CHECK_MESSAGE(p.ok, "pod2 with the same client flow: ", errtext(p.err));

  // A flow that reached the node before the port was mapped (answered by the node itself) is
  // flushed when a pod claims the port, so its next datagram is forwarded.
  Sock none = listener("", AF_INET, SOCK_DGRAM, 19999);  // a node socket that is never the target
  p = udp_probe(client, kNodeV4, 8054, none, 40001);
  CHECK_FALSE(p.ok);
  CHECK(conntrack_lines("udp", 8054).size() == 1);
  add_pod(node, fx, "pod3", {mapping_json(8054, 54, "udp")});
  Sock u3 = listener("/run/netns/pod3", AF_INET, SOCK_DGRAM, 54);
  p = udp_probe(client, kNodeV4, 8054, u3, 40001);
  CHECK_MESSAGE(p.ok, "pod3 with a flow older than its mapping: ", errtext(p.err));
}

TEST_CASE("snat false installs no masquerade elements; masqAll masquerades client traffic") {
  Node node;
  PodFixture fx(node);
  const std::string client = add_client(node);
  write_default_network(fx, R"("snat": false)");
  add_pod(node, fx, "pod1", {mapping_json(8080, 80, "tcp")});
  auto d = nft_table();
  CHECK(elements(d, "portmap4").size() == 1);
  CHECK(elements(d, "portmap4-hairpin").empty());
  CHECK(elements(d, "portmap4-localhost").empty());
  REQUIRE(del_pod(fx, "pod1", {mapping_json(8080, 80, "tcp")}).exit_code == 0);

  write_default_network(fx, R"("masqAll": true)");
  PodIps ip = add_pod(node, fx, "pod2", {mapping_json(8080, 80, "tcp")});
  Sock l = listener("/run/netns/pod2", AF_INET, SOCK_STREAM, 80);
  auto p = tcp_probe(client, kNodeV4, 8080, l);
  CHECK_MESSAGE(p.ok, errtext(p.err));
  CHECK(p.peer == ip.gw4);  // not the client's address
  CHECK(elements(nft_table(), "portmap4-masqall").size() == 1);
  REQUIRE(del_pod(fx, "pod2", {mapping_json(8080, 80, "tcp")}).exit_code == 0);
  CHECK(elements(nft_table(), "portmap4-masqall").empty());
}

TEST_CASE("portmap keys of the reference plugin are validated with clear errors and nothing is left behind") {
  Node node;
  PodFixture fx(node);
  std::string ns = node.add_netns("pod1");
  fx.add_pod("default", "pod1", "");
  struct Case {
    std::string keys;
    std::vector<std::string> maps;
    int code;
    std::string text;
  };
  const std::vector<Case> cases = {
      {R"("externalSetMarkChain": "KUBE-MARK-MASQ")", {mapping_json(8080, 80, "tcp")}, 2, "externalSetMarkChain"},
      {R"("conditionsV4": ["-o", "eth0"])", {mapping_json(8080, 80, "tcp")}, 2, "condition \"-o\" is not supported"},
      {R"("conditionsV4": ["-m", "conntrack", "--ctstate", "NEW"])", {mapping_json(8080, 80, "tcp")}, 2, "\"-m conntrack\""},
      {R"("conditionsV6": ["ip6 nexthdr tcp"])", {mapping_json(8080, 80, "tcp")}, 2, "condition \"ip6 nexthdr\""},
      {R"("backend": "nftables", "conditionsV4": ["-s", "192.0.2.1"])", {mapping_json(8080, 80, "tcp")}, 7,
       "nftables backend was requested but configuration contains iptables-specific options [conditionsV4]"},
      {R"("conditionsV4": ["-s", "2001:db8::1"])", {mapping_json(8080, 80, "tcp")}, 7, "is not an IPv4 address"},
      {R"("markMasqBit": 32)", {mapping_json(8080, 80, "tcp")}, 7, "markMasqBit 32 must be between 0 and 31"},
      {R"("markMasqBit": 13, "externalSetMarkChain": "X")", {mapping_json(8080, 80, "tcp")}, 7, "cannot both be set"},
      {"", {mapping_json(0, 80, "tcp")}, 7, "hostPort 0 is not a port number"},
      {"", {mapping_json(8080, 70000, "tcp")}, 7, "containerPort 70000"},
      {"", {mapping_json(8080, 80, "icmp")}, 7, "protocol \"icmp\" must be tcp, udp or sctp"},
      {"", {mapping_json(8080, 80, "tcp", "not-an-ip")}, 7, "hostIP \"not-an-ip\""},
      {"", {mapping_json(8080, 80, "tcp"), mapping_json(8080, 81, "tcp")}, 7, "maps host port 8080 again"},
  };
  for (const auto& c : cases) {
    write_default_network(fx, c.keys);
    Proc add = fx.run("ADD", "ctr-pod1", ns, "default", "pod1", config_with(fx, c.maps));
    INFO("keys: ", c.keys, " -> ", add.out);
    CHECK(add.exit_code != 0);
    rapidjson::Document err;
    err.Parse(add.out.c_str());
    REQUIRE(err.IsObject());
    CHECK(err["code"].GetInt() == c.code);
    CHECK(std::string(err["msg"].GetString()).find(c.text) != std::string::npos);
    CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
    CHECK(plumb::test::ip_json("link show type veth").Size() == 0);
  }
  // Accepted: empty conditions, a valid mark bit, a backend, a wrong-family hostIP (skipped for
  // that family), and "0.0.0.0" (every IPv4 address, IPv4 only).
  write_default_network(fx, R"("conditionsV4": [], "conditionsV6": [], "markMasqBit": 13, "backend": "nftables")");
  Proc ok = fx.run("ADD", "ctr-pod1", ns, "default", "pod1",
                   config_with(fx, {mapping_json(8080, 80, "tcp", "0.0.0.0"), mapping_json(8443, 443, "tcp", "2001:db8:100::1")}));
  INFO(ok.out, ok.err);
  REQUIRE(ok.exit_code == 0);
  auto d = nft_table();
  CHECK(elements(d, "portmap4").size() == 1);
  CHECK(elements(d, "portmap6").empty());
  CHECK(elements(d, "portmap6-hostip").size() == 1);
  CHECK(elements(d, "portmap4-hostip").empty());
}

TEST_CASE("sctp host ports are forwarded: a raw INIT chunk reaches the pod rewritten (real SCTP sockets: full-kernel/drivers/portmap)") {
  Node node;
  PodFixture fx(node);
  write_default_network(fx);
  const std::string client = add_client(node);
  PodIps ip = add_pod(node, fx, "pod1", {mapping_json(9000, 90, "sctp")});
  const std::string pod = "/run/netns/pod1";
  CHECK(nft_text().find("sctp . 9000 comment \"ctr-pod1/eth0\" : " + ip.v4 + " . 90") != std::string::npos);

  // A raw INIT from the client to the host port arrives in the pod addressed to the pod and the
  // container port, with a valid checksum (rewritten by NAT): conntrack tracked it and the DNAT
  // map matched on the sctp key.
  Sock tx(client, AF_INET, SOCK_RAW, IPPROTO_SCTP);
  Sock rx(pod, AF_INET, SOCK_RAW, IPPROTO_SCTP);
  REQUIRE(tx.fd() >= 0);
  REQUIRE(rx.fd() >= 0);
  auto init = sctp_init(5000, 9000);
  socklen_t len = 0;
  auto dst = sockaddr_of(kNodeV4, 0, &len);
  REQUIRE(sendto(tx.fd(), init.data(), init.size(), 0, reinterpret_cast<sockaddr*>(&dst), len) ==
          static_cast<ssize_t>(init.size()));
  bool seen = false;
  for (int i = 0; i < 10 && !seen && wait_for(rx.fd(), POLLIN); ++i) {
    uint8_t buf[2048];
    ssize_t n = recv(rx.fd(), buf, sizeof buf, 0);
    REQUIRE(n > 20);
    const size_t ihl = (buf[0] & 0x0f) * 4u;
    if (static_cast<size_t>(n) < ihl + 12) continue;
    char daddr[INET_ADDRSTRLEN] = {}, saddr[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, buf + 16, daddr, sizeof daddr);
    inet_ntop(AF_INET, buf + 12, saddr, sizeof saddr);
    const uint16_t sport = static_cast<uint16_t>(buf[ihl] << 8 | buf[ihl + 1]);
    const uint16_t dport = static_cast<uint16_t>(buf[ihl + 2] << 8 | buf[ihl + 3]);
    if (sport != 5000) continue;
    seen = true;
    CHECK(std::string(daddr) == ip.v4);
    CHECK(std::string(saddr) == kClientV4);
    CHECK(dport == 90);
    CHECK(sctp_checksum_ok(buf + ihl, static_cast<size_t>(n) - ihl));
  }
  CHECK_MESSAGE(seen, "no SCTP INIT from the client reached the pod");
  auto ct = conntrack_lines("sctp", 9000);
  CHECK(ct.size() == 1);

  REQUIRE(del_pod(fx, "pod1", {mapping_json(9000, 90, "sctp")}).exit_code == 0);
  CHECK(nft_text().find("sctp . 9000") == std::string::npos);
}

TEST_CASE("conditionsV4 in iptables and nftables syntax gate the DNAT: the matching client reaches the pod, others do not") {
  Node node;
  PodFixture fx(node);
  std::string client = add_client(node);
  const std::vector<std::string> maps = {mapping_json(8080, 80, "tcp")};
  for (auto [n, keys, rule] : {std::tuple{"1", R"("conditionsV4": ["-s", "198.51.100.2/32", "!", "-i", "plumb0", "-m", "addrtype", "--dst-type", "LOCAL", "-m", "comment", "--comment", "only the client"])",
                                          "ip saddr 198.51.100.2 iifname != \"plumb0\" fib daddr type local"},
                               std::tuple{"2", R"("backend": "nftables", "conditionsV4": ["ip saddr != 198.51.100.2"])", "ip saddr != 198.51.100.2"}}) {
    INFO("case ", n, ": ", keys);
    write_default_network(fx, keys);
    const std::string name = std::string("pod") + n;
    PodIps ips = add_pod(node, fx, name, maps);
    Sock server = listener("/run/netns/" + name, AF_INET, SOCK_STREAM, 80);
    // The class's DNAT map holds the mapping, its rule carries the conditions.
    Proc chain = plumb::test::sh("nft list chain inet plumb portmap-dnat");
    CHECK(chain.out.find(rule) != std::string::npos);
    auto d = nft_table();
    CHECK(elements(d, "portmap4").empty());
    Proc table = plumb::test::sh("nft list table inet plumb");
    CHECK(table.out.find("map portmap4-c") != std::string::npos);
    if (std::string(n) == "1") {
      Probe from_client = tcp_probe(client, kNodeV4, 8080, server);
      CHECK_MESSAGE(from_client.ok, "client: ", errtext(from_client.err));
      CHECK(tcp_connect_error("", kNodeV4, 8080) == ECONNREFUSED);  // the node's own connection does not match -s
    } else {
      Probe from_node = tcp_probe("", kNodeV4, 8080, server);
      CHECK_MESSAGE(from_node.ok, "node: ", errtext(from_node.err));
      CHECK(tcp_connect_error(client, kNodeV4, 8080) == ECONNREFUSED);  // excluded by "!="
    }
    Proc del = del_pod(fx, name, maps);
    CHECK(del.exit_code == 0);
    CHECK(tcp_connect_error(client, kNodeV4, 8080) == ECONNREFUSED);
    (void)ips;
  }
}

FULL_KERNEL_CASE("sctp host ports carry real SCTP associations from a client, v4 and v6, and from the node; DEL closes them") {
  Node node;
  PodFixture fx(node);
  write_default_network(fx);
  const std::string client = add_client(node);
  const std::vector<std::string> maps = {mapping_json(9000, 90, "sctp")};
  add_pod(node, fx, "pod1", maps);
  const std::string pod = "/run/netns/pod1";
  wait_ipv6_settled({{"", "plumb0"}, {"", "vclient"}, {"client", "eth0"}, {"pod1", "eth0"}});
  Sock probe("", AF_INET, SOCK_STREAM, IPPROTO_SCTP);
  REQUIRE_MESSAGE(probe.fd() >= 0, "this kernel has no SCTP sockets: ", errtext(errno));
  for (int family : {AF_INET, AF_INET6}) {
    CAPTURE(family);
    Sock l = listener(pod, family, SOCK_STREAM, 90, IPPROTO_SCTP);
    auto p = tcp_probe(client, family == AF_INET ? kNodeV4 : kNodeV6, 9000, l, 0, IPPROTO_SCTP);
    CHECK_MESSAGE(p.ok, "sctp association through the host port: ", errtext(p.err));
    CHECK(p.peer == (family == AF_INET ? kClientV4 : kClientV6));
  }
  {
    Sock l = listener(pod, AF_INET, SOCK_STREAM, 90, IPPROTO_SCTP);
    auto p = tcp_probe("", kNodeV4, 9000, l, 0, IPPROTO_SCTP);  // from the node itself (output hook)
    CHECK_MESSAGE(p.ok, "sctp association from the node: ", errtext(p.err));
  }
  CHECK(conntrack_lines("sctp", 9000).size() >= 1);
  REQUIRE(del_pod(fx, "pod1", maps).exit_code == 0);
  // Nothing forwards the port any more: the client's association is refused or times out.
  Sock l = listener("", AF_INET, SOCK_STREAM, 9001, IPPROTO_SCTP);  // unrelated listener: the probe needs one
  CHECK_FALSE(tcp_probe(client, kNodeV4, 9000, l, 0, IPPROTO_SCTP, kWaitMs).ok);
  CHECK(nft_text().find("sctp . 9000") == std::string::npos);
}

TEST_CASE("route_localnet on a node's bridge: a SIGKILL after any intent of the ADD, then DEL, puts its value back") {
  Node node;
  PodFixture fx(node);
  write_default_network(fx);
  REQUIRE(plumb::test::sh("ip link add plumb0 type bridge && ip link set plumb0 up").exit_code == 0);
  const std::string localnet = "/proc/sys/net/ipv4/conf/plumb0/route_localnet";
  REQUIRE(plumb::test::read_file(localnet) == "0\n");
  const std::string pod = node.add_netns("kill");
  fx.add_pod("default", "kill", "");
  const std::string conf = config_with(fx, {mapping_json(8080, 80, "tcp")});
  unsigned killed = 0;
  for (unsigned step = 1; step < 30; ++step) {
    CAPTURE(step);
    Proc add = fx.run_with(plumb::test::plumb_faulty_binary(), {{"PLUMB_FAULT_AFTER_STEP", std::to_string(step)}},
                           "ADD", "ctr-kill", pod, "default", "kill", conf);
    if (add.exit_code == 0) {  // past the last intent: a completed attachment keeps it (the bridge is shared)
      CHECK(plumb::test::read_file(localnet) == "1\n");
      REQUIRE(fx.run("DEL", "ctr-kill", pod, "default", "kill", conf).exit_code == 0);
      break;
    }
    REQUIRE_MESSAGE(add.exit_code == 128 + SIGKILL, add.out << add.err);
    ++killed;
    Proc del = fx.run("DEL", "ctr-kill", pod, "default", "kill", conf);
    REQUIRE_MESSAGE(del.exit_code == 0, del.out << del.err);
    CHECK(plumb::test::read_file(localnet) == "0\n");
  }
  CHECK(killed >= 5);  // veth, gateways, masquerade, route_localnet's restore, the mappings' removal
}
