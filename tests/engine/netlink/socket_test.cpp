// plumb's netlink transport (engine/netlink/socket.hpp) against the real kernel, each case in a
// fresh private node namespace: dumps far larger than one receive buffer, the interrupted-dump
// retry, replies that are not ours, nfnetlink batches with per-message and batch-level errors,
// and the one-socket-per-namespace cache.
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

#include "engine/kernel/addr.hpp"
#include "engine/kernel/link.hpp"
#include "engine/base/netns.hpp"
#include "engine/netlink/socket.hpp"
#include "tests/engine/netlink/require_ok.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;

namespace {

netlink::Socket open_socket(int protocol = NETLINK_ROUTE) {
  auto s = netlink::Socket::open(protocol);
  REQUIRE_OK(s);
  return std::move(*s);
}

IpPrefix prefix(const std::string& s) {
  auto p = IpPrefix::parse(s);
  REQUIRE(p);
  return *p;
}

int index_of(netlink::Socket& nl, const std::string& name) {
  auto l = link::get(nl, name);
  REQUIRE_OK(l);
  REQUIRE(l->has_value());
  return (*l)->index;
}

void make_veth(netlink::Socket& nl, const std::string& a, const std::string& b) {
  link::VethSpec v;
  v.host_name = a;
  v.peer_name = b;
  REQUIRE_OK(link::create_veth(nl, v));
}

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
