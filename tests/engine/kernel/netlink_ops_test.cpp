// The kernel access layer (netlink socket, netns, addr, route, sysctl) against the real kernel,
// inside a private node namespace per case (links: link_test.cpp). Kernel state is checked
// independently through iproute2 (`ip -j ...`).
#include <doctest/doctest.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <string>
#include <vector>

#include "engine/kernel/addr.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/netconf.hpp"
#include "engine/netlink/socket.hpp"
#include "engine/base/netns.hpp"
#include "engine/kernel/route.hpp"
#include "engine/kernel/sysctl.hpp"
#include "tests/engine/netlink/require_ok.hpp"
#include "tests/engine/kernel/kernel_helpers.hpp"
#include "tests/support/private_node.hpp"
#include "tests/support/literals.hpp"

using namespace plumb;
using namespace plumb::test::kernel;

TEST_CASE("addresses: add, list and remove IPv4 and IPv6 (nodad visible to iproute2)") {
  plumb::test::Node node;
  netlink::Socket nl = open_socket();
  make_veth(nl, "a0", "a1");
  set_up(nl, "a0");
  set_up(nl, "a1");
  int idx = must_get(nl, "a0").index;

  REQUIRE_OK(addr::add(nl, idx, prefix("192.0.2.10/24")));
  REQUIRE_OK(addr::add(nl, idx, prefix("2001:db8::10/64"), true));

  auto j = plumb::test::ip_json("addr show dev a0");
  bool saw4 = false, saw6 = false;
  for (const auto& a : j[0]["addr_info"].GetArray()) {
    std::string local = a["local"].GetString();
    if (local == "192.0.2.10") {
      saw4 = true;
      CHECK(a["prefixlen"].GetInt() == 24);
      CHECK(str(a, "broadcast") == "192.0.2.255");
    }
    if (local == "2001:db8::10") {
      saw6 = true;
      CHECK(a["prefixlen"].GetInt() == 64);
      CHECK(a.HasMember("nodad"));
      CHECK(a["nodad"].GetBool());
      CHECK_FALSE(a.HasMember("tentative"));
    }
  }
  CHECK(saw4);
  CHECK(saw6);

  auto v4 = addr::list(nl, idx, AF_INET);
  REQUIRE_OK(v4);
  REQUIRE(v4->size() == 1);
  CHECK((*v4)[0].prefix.str() == "192.0.2.10/24");
  CHECK((*v4)[0].index == idx);
  CHECK((*v4)[0].scope == RT_SCOPE_UNIVERSE);

  auto v6 = addr::list(nl, idx, AF_INET6);
  REQUIRE_OK(v6);
  auto it = std::find_if(v6->begin(), v6->end(), [](const addr::AddrInfo& a) { return a.prefix.str() == "2001:db8::10/64"; });
  REQUIRE(it != v6->end());
  CHECK((it->flags & IFA_F_NODAD) != 0);
  for (const auto& a : *v6) CHECK(a.prefix.addr.family == AF_INET6);

  auto all = addr::list(nl);
  REQUIRE_OK(all);
  std::set<std::string> seen;
  for (const auto& a : *all) seen.insert(a.prefix.str());
  CHECK(seen.count("127.0.0.1/8") == 1);  // lo, another link
  CHECK(seen.count("192.0.2.10/24") == 1);
  CHECK(seen.count("2001:db8::10/64") == 1);

  auto dup = addr::add(nl, idx, prefix("192.0.2.10/24"));
  REQUIRE_FALSE(dup);
  CHECK(dup.error().sys_errno == EEXIST);
  CHECK(dup.error().cni_code == cni_code::kConflict);

  for (const char* p : {"192.0.2.10/24", "2001:db8::10/64"}) {
    INFO(p);
    auto rm = addr::remove(nl, idx, prefix(p));
    REQUIRE_OK(rm);
    CHECK(*rm);
    auto rm2 = addr::remove(nl, idx, prefix(p));
    REQUIRE_OK(rm2);
    CHECK_FALSE(*rm2);
  }
  j = plumb::test::ip_json("addr show dev a0");
  for (const auto& a : j[0]["addr_info"].GetArray()) {
    std::string local = a["local"].GetString();
    CHECK(local != "192.0.2.10");
    CHECK(local != "2001:db8::10");
  }
}

TEST_CASE("routes: add, list and remove, including default routes via a gateway") {
  plumb::test::Node node;
  netlink::Socket nl = open_socket();
  make_veth(nl, "r0", "r1");
  set_up(nl, "r0");
  set_up(nl, "r1");
  int idx = must_get(nl, "r0").index;
  REQUIRE_OK(addr::add(nl, idx, prefix("192.0.2.10/24")));
  REQUIRE_OK(addr::add(nl, idx, prefix("2001:db8::10/64"), true));

  route::Route def4;
  def4.dst = prefix("0.0.0.0/0");
  def4.gw = ip("192.0.2.1");
  def4.oif = idx;
  REQUIRE_OK(route::add(nl, def4));

  route::Route lnk;
  lnk.dst = prefix("198.51.100.0/24");
  lnk.oif = idx;
  lnk.priority = 50;
  lnk.prefsrc = ip("192.0.2.10");
  REQUIRE_OK(route::add(nl, lnk));

  route::Route def6;
  def6.dst = prefix("::/0");
  def6.gw = ip("2001:db8::1");
  def6.oif = idx;
  REQUIRE_OK(route::add(nl, def6));

  route::Route t100;
  t100.dst = prefix("203.0.113.0/24");
  t100.oif = idx;
  t100.table = 100;
  t100.mtu_bytes = 1400;
  REQUIRE_OK(route::add(nl, t100));

  // iproute2's view.
  auto d = plumb::test::ip_json("route show default");
  REQUIRE(d.Size() == 1);
  CHECK(str(d[0], "gateway") == "192.0.2.1");
  CHECK(str(d[0], "dev") == "r0");
  auto l = plumb::test::ip_json("route show 198.51.100.0/24");
  REQUIRE(l.Size() == 1);
  CHECK(str(l[0], "scope") == "link");
  CHECK(str(l[0], "prefsrc") == "192.0.2.10");
  CHECK(l[0]["metric"].GetInt() == 50);
  auto d6 = plumb::test::ip_json("-6 route show default");
  REQUIRE(d6.Size() == 1);
  CHECK(str(d6[0], "gateway") == "2001:db8::1");
  auto t = plumb::test::ip_json("route show table 100");
  REQUIRE(t.Size() == 1);
  CHECK(str(t[0], "dst") == "203.0.113.0/24");
  CHECK(t[0]["metrics"][0]["mtu"].GetInt() == 1400);

  // Our view.
  auto main4 = route::list(nl, AF_INET);
  REQUIRE_OK(main4);
  auto find = [](const std::vector<route::Route>& v, const std::string& dst) -> const route::Route* {
    for (const auto& r : v) {
      if (r.dst.str() == dst) return &r;
    }
    return nullptr;
  };
  const route::Route* gd = find(*main4, "0.0.0.0/0");
  REQUIRE(gd != nullptr);
  REQUIRE(gd->gw);
  CHECK(gd->gw->str() == "192.0.2.1");
  CHECK(gd->oif == idx);
  CHECK(gd->is_default());
  const route::Route* gl = find(*main4, "198.51.100.0/24");
  REQUIRE(gl != nullptr);
  CHECK_FALSE(gl->gw);
  CHECK(gl->scope == RT_SCOPE_LINK);
  CHECK(gl->priority == 50);
  REQUIRE(gl->prefsrc);
  CHECK(gl->prefsrc->str() == "192.0.2.10");
  CHECK(find(*main4, "192.0.2.0/24") != nullptr);  // the kernel's prefix route
  CHECK(find(*main4, "203.0.113.0/24") == nullptr);  // other table
  for (const auto& r : *main4) CHECK(r.table == RT_TABLE_MAIN);

  auto tab = route::list(nl, AF_INET, 100);
  REQUIRE_OK(tab);
  REQUIRE(tab->size() == 1);
  CHECK((*tab)[0].dst.str() == "203.0.113.0/24");
  CHECK((*tab)[0].mtu_bytes == 1400);
  CHECK((*tab)[0].table == 100);

  auto main6 = route::list(nl, AF_INET6);
  REQUIRE_OK(main6);
  const route::Route* gd6 = find(*main6, "::/0");
  REQUIRE(gd6 != nullptr);
  CHECK(gd6->gw->str() == "2001:db8::1");

  // Duplicates and removal.
  auto dup = route::add(nl, def4);
  REQUIRE_FALSE(dup);
  CHECK(dup.error().sys_errno == EEXIST);
  for (const route::Route* r : {&def4, &lnk, &def6, &t100}) {
    INFO(r->dst.str());
    auto rm = route::remove(nl, *r);
    REQUIRE_OK(rm);
    CHECK(*rm);
    auto rm2 = route::remove(nl, *r);
    REQUIRE_OK(rm2);
    CHECK_FALSE(*rm2);
  }
  CHECK(plumb::test::ip_json("route show default").Size() == 0);
  CHECK(plumb::test::ip_json("-6 route show default").Size() == 0);
  CHECK(plumb::test::ip_json("route show table 100").Size() == 0);
  CHECK(plumb::test::ip_json("route show 198.51.100.0/24").Size() == 0);
}

TEST_CASE("errors carry the errno and the kernel's extended-ack message") {
  plumb::test::Node node;
  std::string pod = node.add_netns("pod1");
  netns::Netns ns = open_ns(pod);
  netlink::Socket nl = open_socket();
  make_veth(nl, "d0", "eth0", ns.fd());

  // Host name taken.
  link::VethSpec spec;
  spec.host_name = "d0";
  spec.peer_name = "d9";
  auto dup = link::create_veth(nl, spec);
  REQUIRE_FALSE(dup);
  CHECK(dup.error().sys_errno == EEXIST);
  CHECK(dup.error().cni_code == cni_code::kConflict);
  CHECK(dup.error().msg.find("d0") != std::string::npos);
  if (!dup.error().details.empty()) CHECK(dup.error().text().find(dup.error().details) != std::string::npos);
  MESSAGE("duplicate veth: ", dup.error().text());

  // Peer name taken inside the pod namespace.
  link::VethSpec spec2;
  spec2.host_name = "d1";
  spec2.peer_name = "eth0";
  spec2.peer_netns_fd = ns.fd();
  auto dup2 = link::create_veth(nl, spec2);
  REQUIRE_FALSE(dup2);
  CHECK(dup2.error().sys_errno == EEXIST);
  auto d1 = link::get(nl, "d1");
  REQUIRE_OK(d1);
  CHECK_FALSE(d1->has_value());  // nothing half-created

  // The kernel explains an unreachable gateway through extended ack.
  make_veth(nl, "e0", "e1");
  set_up(nl, "e0");
  route::Route r;
  r.dst = prefix("0.0.0.0/0");
  r.gw = ip("203.0.113.1");
  r.oif = must_get(nl, "e0").index;
  auto bad = route::add(nl, r);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().sys_errno == ENETUNREACH);
  CHECK(bad.error().details == "Nexthop has invalid gateway");
  CHECK(bad.error().text().find("Nexthop has invalid gateway") != std::string::npos);

  // And through a raw request (unknown link kind).
  netlink::Message m(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
  m.put_header<ifinfomsg>();
  m.put_str(IFLA_IFNAME, "x0");
  {
    netlink::Message::Nest li(m, IFLA_LINKINFO);
    m.put_str(IFLA_INFO_KIND, "no-such-kind");
  }
  auto st = nl.request(m, "create x0");
  REQUIRE_FALSE(st);
  CHECK(st.error().sys_errno == EOPNOTSUPP);
  CHECK(st.error().details == "Unknown device type");

  // Missing links are not errors for lookups and deletes.
  auto missing = link::get(nl, "nosuch0");
  REQUIRE_OK(missing);
  CHECK_FALSE(missing->has_value());
  auto missing_idx = link::get(nl, 99999);
  REQUIRE_OK(missing_idx);
  CHECK_FALSE(missing_idx->has_value());
  auto rm = link::remove(nl, "nosuch0");
  REQUIRE_OK(rm);
  CHECK_FALSE(*rm);

  // Invalid names never reach the kernel: no device can have one, so it is found nowhere (a
  // record an older plumb wrote with such a name is torn down, engine/kernel/ifname.hpp).
  auto inv = link::get(nl, "this-name-is-too-long");
  REQUIRE_OK(inv);
  CHECK_FALSE(inv->has_value());

  // The socket stays usable after all these errors (no stale replies, fresh sequence numbers).
  CHECK(must_get(nl, "d0").kind == "veth");
}

TEST_CASE("dumps larger than 8 KiB: 100 veth pairs are all listed") {
  plumb::test::Node node;
  netlink::Socket nl = open_socket();
  for (int i = 0; i < 100; ++i) make_veth(nl, "lv" + std::to_string(i), "lp" + std::to_string(i));

  auto links = link::list(nl);
  REQUIRE_OK(links);
  std::set<std::string> names;
  for (const auto& l : *links) names.insert(l.name);
  CHECK(links->size() == 201);
  CHECK(names.size() == 201);
  for (int i = 0; i < 100; ++i) {
    CHECK(names.count("lv" + std::to_string(i)) == 1);
    CHECK(names.count("lp" + std::to_string(i)) == 1);
  }
  CHECK(names.count("lo") == 1);
  CHECK(plumb::test::ip_json("link show").Size() == links->size());

  // The raw dump really spans many kilobytes (several datagrams).
  netlink::Message m(RTM_GETLINK, NLM_F_DUMP);
  m.put_header<ifinfomsg>();
  size_t bytes = 0, msgs = 0;
  REQUIRE_OK(nl.query(m, "raw dump", [&](const nlmsghdr* nlh) -> Status {
    bytes += nlh->nlmsg_len;
    ++msgs;
    return {};
  }));
  CHECK(msgs == 201);
  CHECK(bytes > 8 * 1024);

  // A callback error stops the dump, is returned, and the socket stays in sync.
  netlink::Message m2(RTM_GETLINK, NLM_F_DUMP);
  m2.put_header<ifinfomsg>();
  size_t seen = 0;
  auto st = nl.query(m2, "aborted dump", [&](const nlmsghdr*) -> Status {
    ++seen;
    return fail(cni_code::kInternal, "stop here");
  });
  REQUIRE_FALSE(st);
  CHECK(st.error().msg == "stop here");
  CHECK(seen == 1);
  auto again = link::list(nl);
  REQUIRE_OK(again);
  CHECK(again->size() == 201);
}

TEST_CASE("a single reply larger than the 32 KiB initial receive buffer is read whole") {
  plumb::test::Node node;
  netlink::Socket nl = open_socket();
  make_veth(nl, "big0", "big1");
  // ~350 alternative names of 100 bytes make one RTM_NEWLINK reply of ~38 KiB.
  std::string batch;
  for (int i = 0; i < 350; ++i) {
    std::string n = "alt" + std::to_string(1000 + i);
    n.resize(100, 'x');
    batch += "link property add dev big0 altname " + n + "\n";
  }
  auto p = plumb::test::run({"ip", "-batch", "-"}, {}, batch);
  INFO(p.err);
  REQUIRE(p.exit_code == 0);

  netlink::Message m(RTM_GETLINK, 0);
  m.put_header<ifinfomsg>();
  m.put_str(IFLA_IFNAME, "big0");
  size_t len = 0;
  REQUIRE_OK(nl.query(m, "get big0", [&](const nlmsghdr* nlh) -> Status {
    len = nlh->nlmsg_len;
    return {};
  }));
  CHECK(len > 32 * 1024);
  link::LinkInfo li = must_get(nl, "big0");
  CHECK(li.kind == "veth");
  auto all = link::list(nl);
  REQUIRE_OK(all);
  CHECK(all->size() == 3);
}

TEST_CASE("Socket::open_in a pod namespace sees only that namespace's links") {
  plumb::test::Node node;
  std::string pod = node.add_netns("pod1");
  netns::Netns ns = open_ns(pod);
  netlink::Socket nl = open_socket();
  make_veth(nl, "vx0", "eth0", ns.fd());
  make_veth(nl, "vy0", "vy1");

  auto before = netns::Netns::current();
  REQUIRE_OK(before);
  auto pnl = netlink::Socket::open_in(ns.fd());
  REQUIRE_OK(pnl);
  auto after = netns::Netns::current();
  REQUIRE_OK(after);
  CHECK(before->inode() == after->inode());  // the thread is back in the node

  auto pl = link::list(*pnl);
  REQUIRE_OK(pl);
  std::set<std::string> pod_names;
  for (const auto& l : *pl) pod_names.insert(l.name);
  CHECK(pod_names == std::set<std::string>{"lo", "eth0"});

  auto nlist = link::list(nl);
  REQUIRE_OK(nlist);
  std::set<std::string> node_names;
  for (const auto& l : *nlist) node_names.insert(l.name);
  CHECK(node_names == std::set<std::string>{"lo", "vx0", "vy0", "vy1"});

  // Changes through the pod socket land in the pod.
  set_up(*pnl, "eth0");
  REQUIRE_OK(addr::add(*pnl, must_get(*pnl, "eth0").index, prefix("198.51.100.2/24")));
  auto j = plumb::test::ip_json("-n pod1 addr show dev eth0");
  CHECK(has_flag(j[0], "UP"));
  CHECK(str(j[0]["addr_info"][0], "local") == "198.51.100.2");
  CHECK(addr::list(nl, 0, AF_INET).value().size() == 1);  // only lo's 127.0.0.1 in the node

  auto bad = netlink::Socket::open_in(-1);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().sys_errno == EBADF);
}

TEST_CASE("netns: Guard returns to the original namespace; open checks the file type") {
  plumb::test::Node node;
  std::string pod = node.add_netns("pod1");
  netns::Netns ns = open_ns(pod);
  auto start = netns::Netns::current();
  REQUIRE_OK(start);
  CHECK(start->inode() != ns.inode());
  {
    auto g = netns::Guard::enter(ns);
    REQUIRE_OK(g);
    auto inside = netns::Netns::current();
    REQUIRE_OK(inside);
    CHECK(inside->inode() == ns.inode());
    // Moving the guard keeps one return, at the end of the new owner's life.
    netns::Guard moved(std::move(*g));
    auto still = netns::Netns::current();
    REQUIRE_OK(still);
    CHECK(still->inode() == ns.inode());
  }
  auto end = netns::Netns::current();
  REQUIRE_OK(end);
  CHECK(end->inode() == start->inode());

  auto dupd = netns::Netns::from_fd(ns.fd());
  REQUIRE_OK(dupd);
  CHECK(dupd->inode() == ns.inode());
  CHECK(dupd->fd() != ns.fd());

  auto missing = netns::Netns::open("/run/netns/nosuch");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().sys_errno == ENOENT);
  CHECK(missing.error().msg.find("/run/netns/nosuch") != std::string::npos);
  auto uts = netns::Netns::open("/proc/self/ns/uts");
  REQUIRE_FALSE(uts);
  CHECK(uts.error().sys_errno == EINVAL);
  auto regular = netns::Netns::open("/proc/self/status");
  REQUIRE_FALSE(regular);
  CHECK(regular.error().sys_errno == EINVAL);
}

TEST_CASE("sysctl: read and write a per-interface key inside a Guard in the pod namespace") {
  plumb::test::Node node;
  std::string pod = node.add_netns("pod1");
  netns::Netns ns = open_ns(pod);
  netlink::Socket nl = open_socket();
  make_veth(nl, "s0", "eth0", ns.fd());

  {
    auto g = netns::Guard::enter(ns);
    REQUIRE_OK(g);
    auto v0 = sysctl::read("net/ipv4/conf/eth0/arp_notify");
    REQUIRE_OK(v0);
    CHECK(*v0 == "0");
    REQUIRE_OK(sysctl::write("net/ipv4/conf/eth0/arp_notify", "1"));
    auto v1 = sysctl::read("net.ipv4.conf.eth0.arp_notify");
    REQUIRE_OK(v1);
    CHECK(*v1 == "1");
  }
  // Independent check from inside the pod, and the node has no such interface.
  auto p = plumb::test::sh("ip netns exec pod1 cat /proc/sys/net/ipv4/conf/eth0/arp_notify");
  REQUIRE(p.exit_code == 0);
  CHECK(p.out == "1\n");
  auto node_side = sysctl::read("net/ipv4/conf/eth0/arp_notify");
  REQUIRE_FALSE(node_side);
  CHECK(node_side.error().sys_errno == ENOENT);
  CHECK(node_side.error().msg.find("net/ipv4/conf/eth0/arp_notify") != std::string::npos);
  auto node_s0 = sysctl::read("net/ipv4/conf/s0/arp_notify");
  REQUIRE_OK(node_s0);
  CHECK(*node_s0 == "0");

  auto bad = sysctl::write("net/ipv4/conf/s0/arp_notify", "not-a-number");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().sys_errno == EINVAL);
  auto esc = sysctl::read("net/../../../etc/hostname");
  REQUIRE_FALSE(esc);
  CHECK(esc.error().cni_code == cni_code::kInvalidConfig);
}

TEST_CASE("netconf: forwarding read over rtnetlink; ensure_forwarding writes only when off, so an unchanged net.ipv6.conf.all.forwarding leaves a device's own forwarding alone") {
  plumb::test::Node node;
  netlink::Socket nl = open_socket();
  REQUIRE(plumb::test::sh("ip link add s7 type veth peer name s7p").exit_code == 0);
  // What RTM_GETNETCONF reports is what /proc/sys holds, both ways, both families.
  for (const char* v : {"0", "1"}) {
    REQUIRE_OK(sysctl::write("net/ipv4/ip_forward", v));
    REQUIRE_OK(sysctl::write("net/ipv6/conf/all/forwarding", v));
    auto v4 = netconf::forwarding_all(nl, AF_INET);
    auto v6 = netconf::forwarding_all(nl, AF_INET6);
    REQUIRE_OK(v4);
    REQUIRE_OK(v6);
    CHECK(*v4 == (v[0] == '1'));
    CHECK(*v6 == (v[0] == '1'));
  }
  REQUIRE_OK(sysctl::write("net/ipv6/conf/s7/forwarding", "0"));
  REQUIRE_OK(netconf::ensure_forwarding(nl, AF_INET6));  // off: written
  auto all = sysctl::read("net/ipv6/conf/all/forwarding");
  REQUIRE_OK(all);
  CHECK(*all == "1");
  REQUIRE_OK(sysctl::write("net/ipv6/conf/s7/forwarding", "0"));
  REQUIRE_OK(netconf::ensure_forwarding(nl, AF_INET6));  // already on: nothing written
  auto own = sysctl::read("net/ipv6/conf/s7/forwarding");
  REQUIRE_OK(own);
  CHECK(*own == "0");
  REQUIRE_OK(sysctl::write("net/ipv6/conf/all/forwarding", "1"));  // what a plain write does to it
  own = sysctl::read("net/ipv6/conf/s7/forwarding");
  REQUIRE_OK(own);
  CHECK(*own == "1");
  REQUIRE_OK(netconf::ensure_forwarding(nl, AF_INET));
  auto v4 = sysctl::read("net/ipv4/ip_forward");
  REQUIRE_OK(v4);
  CHECK(*v4 == "1");
}

TEST_CASE("link::modify sets net.ipv4.conf.<if>.arp_notify over rtnetlink, in the socket's namespace") {
  plumb::test::Node node;
  std::string pod = node.add_netns("pod1");
  netns::Netns ns = open_ns(pod);
  netlink::Socket nl = open_socket();
  make_veth(nl, "s0", "eth0", ns.fd());
  auto pod_nl = netlink::Socket::open_in(ns.fd());
  REQUIRE_OK(pod_nl);
  auto eth0 = link::get(*pod_nl, "eth0");
  REQUIRE_OK(eth0);
  REQUIRE(eth0->has_value());
  auto in_pod = [] { return plumb::test::sh("ip netns exec pod1 cat /proc/sys/net/ipv4/conf/eth0/arp_notify").out; };
  CHECK(in_pod() == "0\n");
  link::LinkChange on;
  on.arp_notify = true;
  REQUIRE_OK(link::modify(*pod_nl, (*eth0)->index, on));
  CHECK(in_pod() == "1\n");
  CHECK(*sysctl::read("net/ipv4/conf/s0/arp_notify") == "0");  // the node's end untouched
  link::LinkChange off;
  off.arp_notify = false;
  REQUIRE_OK(link::modify(*pod_nl, (*eth0)->index, off));
  CHECK(in_pod() == "0\n");
}
