// plumb's netlink transport (engine/netlink/socket.hpp) against the real kernel, each case in a
// fresh private node namespace: errors with the errno and the kernel's extended ack, dumps far
// larger than one receive buffer, one reply larger than the initial receive buffer, the
// interrupted-dump retry, replies that are not ours, nfnetlink batches with per-message and
// batch-level errors, sockets opened in a pod namespace and the one-socket-per-namespace cache.
#include "engine/netlink/socket.hpp"

#include <doctest/doctest.h>
#include <linux/if_addr.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/base/netns.hpp"
#include "engine/kernel/addr.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/route.hpp"
#include "tests/engine/kernel/kernel_helpers.hpp"
#include "tests/engine/netlink/require_ok.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;
using namespace plumb::test::kernel;

namespace {

int index_of(netlink::Socket& nl, const std::string& name) { return must_get(nl, name).index; }

/// An NFT_MSG_* request of family inet naming table `table` (and chain `chain` if not empty).
netlink::Message nft_msg(uint16_t type, uint16_t flags, const std::string& table, const std::string& chain = {}) {
  netlink::Message m(static_cast<uint16_t>((NFNL_SUBSYS_NFTABLES << 8) | type), flags);
  m.put_header<nfgenmsg>()->nfgen_family = NFPROTO_INET;
  if (chain.empty()) {
    m.put_str(NFTA_TABLE_NAME, table);
  } else {
    m.put_str(NFTA_CHAIN_TABLE, table);
    m.put_str(NFTA_CHAIN_NAME, chain);
  }
  return m;
}

netlink::Batch nft_batch(netlink::Socket& nl) {
  const size_t limit = netlink::Batch::kDefaultLimit;
  return netlink::Batch(NFNL_SUBSYS_NFTABLES, nl.reserve_seq(netlink::Batch::max_messages(limit) + 2), limit);
}

}  // namespace

TEST_CASE("a dump of more than 32 KiB (1000 IPv6 addresses) is received completely") {
  test::Node node;
  netlink::Socket nl = open_socket();
  const int lo = index_of(nl, "lo");
  std::set<std::string> want;
  for (int i = 1; i <= 1000; ++i) {
    char text[64];
    std::snprintf(text, sizeof text, "2001:db8:%x::%x/128", i / 256, i % 256 + 1);
    REQUIRE_OK(addr::add(nl, lo, prefix(text), /*nodad=*/true));
    want.insert(prefix(text).str());
  }

  // The raw dump spans many datagrams and far more than the 32 KiB first receive buffer.
  netlink::Message m(RTM_GETADDR, NLM_F_DUMP);
  m.put_header<ifaddrmsg>()->ifa_family = AF_INET6;
  size_t bytes = 0, msgs = 0;
  REQUIRE_OK(nl.dump(m, "raw address dump", [&](const nlmsghdr* nlh) -> Status {
    CHECK(nlh->nlmsg_type == RTM_NEWADDR);
    bytes += nlh->nlmsg_len;
    ++msgs;
    return {};
  }));
  CHECK(msgs == 1001);  // and ::1
  CHECK(bytes > 64 * 1024);

  auto list = addr::list(nl, lo, AF_INET6);
  REQUIRE_OK(list);
  std::set<std::string> got;
  for (const auto& a : *list) got.insert(a.prefix.str());
  CHECK(list->size() == 1001);
  got.erase("::1/128");
  CHECK(got == want);
  // iproute2 sees the same number.
  auto ip = test::ip_json("-6 addr show dev lo");
  REQUIRE(ip.Size() == 1);
  CHECK(ip[0]["addr_info"].Size() == 1001);
}

TEST_CASE("an interrupted dump (NLM_F_DUMP_INTR) is restarted and delivers one consistent attempt") {
  test::Node node;
  netlink::Socket nl = open_socket();
  std::set<std::string> stable;
  for (int i = 0; i < 50; ++i) {
    make_veth(nl, "s" + std::to_string(i), "t" + std::to_string(i));
    stable.insert("s" + std::to_string(i));
    stable.insert("t" + std::to_string(i));
  }
  stable.insert("lo");

  // Another thread (same namespace: threads inherit it) adds and removes a veth pair until told
  // to stop; every change bumps the namespace's device generation the kernel checks per part.
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    auto c = netlink::Socket::open();
    if (!c) return;
    while (!stop) {
      link::VethSpec v;
      v.host_name = "c0";
      v.peer_name = "c1";
      (void)link::create_veth(*c, v);
      (void)link::remove(*c, "c0");
    }
  });

  // Dump until a dump that needed a restart succeeded (bounded in time and count).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int dumps = 0, restarted_ok = 0, gave_up = 0;
  while (restarted_ok < 3 && dumps < 50000 && std::chrono::steady_clock::now() < deadline) {
    const uint64_t before = nl.dump_restarts();
    auto links = link::list(nl);
    ++dumps;
    if (!links) {
      // Only after kDumpAttempts interrupted attempts in a row, and then as EINTR.
      CHECK(links.error().sys_errno == EINTR);
      CHECK(nl.dump_restarts() - before == static_cast<uint64_t>(netlink::Socket::kDumpAttempts));
      ++gave_up;
      continue;
    }
    // Every link exactly once: nothing of an interrupted attempt was delivered.
    std::map<std::string, int> names;
    std::set<int> indexes;
    for (const auto& l : *links) {
      ++names[l.name];
      CHECK(indexes.insert(l.index).second);
    }
    for (const auto& s : stable) CHECK(names[s] == 1);
    for (const auto& [name, n] : names) {
      CHECK(n == 1);
      CHECK((stable.count(name) == 1 || name == "c0" || name == "c1"));
    }
    if (nl.dump_restarts() > before) ++restarted_ok;
  }
  stop = true;
  churn.join();
  INFO("dumps ", dumps, ", restarts ", nl.dump_restarts(), ", gave up ", gave_up);
  CHECK(nl.dump_restarts() > 0);
  CHECK(restarted_ok > 0);
}

TEST_CASE("replies that are not ours are skipped: a stale reply, a datagram from a process") {
  test::Node node;
  netlink::Socket nl = open_socket();
  make_veth(nl, "a0", "a1");

  // A request sent behind the socket's back leaves its reply (another sequence number) queued.
  netlink::Message stale(RTM_GETLINK, NLM_F_ACK);
  stale.put_header<ifinfomsg>();
  stale.put_str(IFLA_IFNAME, "a1");
  stale.header()->nlmsg_seq = 7;
  REQUIRE(send(nl.fd(), stale.data(), stale.size(), 0) == static_cast<ssize_t>(stale.size()));

  // A process (not the kernel) sends a fake ACK error to our port.
  netlink::Socket other = open_socket();
  std::vector<uint8_t> fake(NLMSG_LENGTH(sizeof(nlmsgerr)), 0);
  auto* nlh = reinterpret_cast<nlmsghdr*>(fake.data());
  nlh->nlmsg_len = static_cast<uint32_t>(fake.size());
  nlh->nlmsg_type = NLMSG_ERROR;
  nlh->nlmsg_pid = nl.port_id();
  nlh->nlmsg_seq = 0;
  reinterpret_cast<nlmsgerr*>(fake.data() + NLMSG_HDRLEN)->error = -EPERM;  // NLMSG_DATA is a C cast
  sockaddr_nl to{};
  to.nl_family = AF_NETLINK;
  to.nl_pid = nl.port_id();
  REQUIRE(sendto(other.fd(), fake.data(), fake.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) ==
          static_cast<ssize_t>(fake.size()));

  auto a0 = link::get(nl, "a0");
  REQUIRE_OK(a0);
  REQUIRE(a0->has_value());
  CHECK((*a0)->name == "a0");
  CHECK(nl.healthy());
  auto all = link::list(nl);
  REQUIRE_OK(all);
  CHECK(all->size() == 3);
}

TEST_CASE("an nfnetlink batch: every ack collected, per-message errors with text, batch-level errors") {
  test::Node node;
  netlink::Socket nl = open_socket(NETLINK_NETFILTER);

  netlink::Batch ok = nft_batch(nl);
  ok.add(nft_msg(NFT_MSG_NEWTABLE, NLM_F_CREATE, "t"));
  ok.add(nft_msg(NFT_MSG_NEWCHAIN, NLM_F_CREATE, "t", "c"));
  REQUIRE_OK(ok.finish());
  auto out = nl.send_batch(ok, "create table and chain");
  REQUIRE_OK(out);
  REQUIRE(out->acks.size() == 2);
  CHECK(out->ok());
  CHECK(test::sh("nft list chain inet t c").exit_code == 0);

  // One bad message aborts the transaction; every message is still answered.
  netlink::Batch bad = nft_batch(nl);
  bad.add(nft_msg(NFT_MSG_NEWCHAIN, NLM_F_CREATE, "t", "d"));
  bad.add(nft_msg(NFT_MSG_NEWCHAIN, NLM_F_CREATE, "nosuch", "e"));
  bad.add(nft_msg(NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, "t", "c"));
  REQUIRE_OK(bad.finish());
  out = nl.send_batch(bad, "three chains");
  REQUIRE_OK(out);
  CHECK_FALSE(out->ok());
  CHECK(out->batch_err == 0);
  REQUIRE(out->acks.size() == 3);
  for (const auto& a : out->acks) CHECK(a.seen);
  CHECK(out->acks[1].err == ENOENT);
  CHECK(out->acks[2].err == EEXIST);
  CHECK(test::sh("nft list chain inet t d").exit_code != 0);  // all or nothing

  // A batch for a subsystem without transactions is refused as a whole, at BATCH_BEGIN.
  netlink::Batch refused(NFNL_SUBSYS_CTNETLINK, nl.reserve_seq(10));
  refused.add(nft_msg(NFT_MSG_NEWTABLE, NLM_F_CREATE, "u"));
  REQUIRE_OK(refused.finish());
  out = nl.send_batch(refused, "batch for ctnetlink");
  REQUIRE_OK(out);
  CHECK_FALSE(out->ok());
  CHECK(out->batch_err == EOPNOTSUPP);

  // The socket stays in step: a dump of the chains of table t.
  netlink::Message m = nft_msg(NFT_MSG_GETCHAIN, 0, "t");
  size_t chains = 0;
  REQUIRE_OK(nl.dump(m, "dump chains", [&](const nlmsghdr*) -> Status {
    ++chains;
    return {};
  }));
  CHECK(chains == 1);
  CHECK(nl.healthy());
}

TEST_CASE("shared(): one socket per protocol and namespace in this process, a new one elsewhere") {
  std::shared_ptr<netlink::Socket> first;
  {
    test::Node node;
    auto a = netlink::shared(NETLINK_NETFILTER);
    REQUIRE_OK(a);
    auto b = netlink::shared(NETLINK_NETFILTER);
    REQUIRE_OK(b);
    CHECK(a->get() == b->get());
    auto route = netlink::shared(NETLINK_ROUTE);
    REQUIRE_OK(route);
    CHECK(route->get() != a->get());
    CHECK((*route)->protocol() == NETLINK_ROUTE);
    first = *a;

    // A forked child never uses the parent's socket (their replies would mix).
    const uint32_t parent_port = first->port_id();
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      auto c = netlink::shared(NETLINK_NETFILTER);
      _exit(c && (*c)->port_id() != parent_port ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  test::Node next;  // another namespace
  auto c = netlink::shared(NETLINK_NETFILTER);
  REQUIRE_OK(c);
  CHECK(c->get() != first.get());
}

TEST_CASE("release_shared_elsewhere(): the sockets of other namespaces go (theirs stay alive no more), the current one's stays") {
  test::Node node;
  auto here = netlink::shared(NETLINK_ROUTE);
  REQUIRE_OK(here);
  const netlink::Socket* kept = here->get();
  std::weak_ptr<netlink::Socket> there;
  {
    auto ns = netns::Netns::open(node.add_netns("pod"));
    REQUIRE_OK(ns);
    auto in = netns::Guard::enter(*ns);
    REQUIRE_OK(in);
    auto s = netlink::shared(NETLINK_NETFILTER);
    REQUIRE_OK(s);
    there = *s;
  }
  here = {};
  CHECK_FALSE(there.expired());  // the cache holds the pod namespace's socket
  netlink::release_shared_elsewhere();
  CHECK(there.expired());
  auto again = netlink::shared(NETLINK_ROUTE);
  REQUIRE_OK(again);
  CHECK(again->get() == kept);
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
