// plumb's nftables masquerade (engine/nft) against the real kernel, in a private node namespace
// per case. The ruleset is checked independently with `nft -j list table inet plumb`, and
// masquerading with real traffic between a pod and an "outside" namespace.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "engine/nft/nft.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;

namespace doctest {
template <>
struct StringMaker<std::vector<std::string>> {
  static String convert(const std::vector<std::string>& v) {
    std::string out = "[";
    for (const auto& s : v) out += "\n  " + s;
    return (out + "]").c_str();
  }
};
template <>
struct StringMaker<std::map<std::string, std::string>> {
  static String convert(const std::map<std::string, std::string>& m) {
    std::string out = "{";
    for (const auto& [k, v] : m) out += " " + k + ": " + v;
    return (out + " }").c_str();
  }
};
}  // namespace doctest

namespace {

IpAddr addr(const std::string& s) {
  auto a = IpAddr::parse(s);
  REQUIRE(a.has_value());
  return *a;
}

std::vector<IpPrefix> prefixes(const std::vector<std::string>& list) {
  std::vector<IpPrefix> out;
  for (const auto& s : list) {
    auto p = IpPrefix::parse(s);
    REQUIRE(p.has_value());
    out.push_back(*p);
  }
  return out;
}

void add(const std::string& net, const std::vector<std::string>& subnets, const std::string& pod) {
  auto st = nft::add_masquerade(net, prefixes(subnets), addr(pod));
  INFO("add_masquerade(", net, ", ", pod, "): ", st ? std::string("ok") : st.error().text());
  REQUIRE(st.has_value());
}

std::string compact(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return sb.GetString();
}

struct BaseChain {
  std::string type, hook, policy;
  int prio = 0;
};

/// The plumb table as `nft -j` shows it, without handles.
struct Ruleset {
  std::set<std::string> chains;
  std::map<std::string, BaseChain> base;                          // base chains by name
  std::map<std::string, std::vector<std::string>> rules;          // chain -> compact "expr" JSON
  std::map<std::string, std::string> map_type;                    // map -> "<key type> : <data>"
  std::map<std::string, std::map<std::string, std::string>> elems;  // map -> key -> jump target

  size_t rule_count() const {
    size_t n = 0;
    for (const auto& [c, r] : rules) n += r.size();
    return n;
  }
  bool operator==(const Ruleset& o) const {
    return chains == o.chains && rules == o.rules && map_type == o.map_type && elems == o.elems;
  }
};

bool table_exists() {
  auto p = test::sh("nft -j list tables");
  REQUIRE(p.exit_code == 0);
  rapidjson::Document d;
  d.Parse(p.out.c_str());
  REQUIRE_FALSE(d.HasParseError());
  for (const auto& item : d["nftables"].GetArray()) {
    if (item.HasMember("table") && std::string(item["table"]["name"].GetString()) == "plumb" &&
        std::string(item["table"]["family"].GetString()) == "inet") {
      return true;
    }
  }
  return false;
}

Ruleset list_plumb() {
  auto p = test::sh("nft -j list table inet plumb");
  INFO("nft: ", p.err);
  REQUIRE(p.exit_code == 0);
  rapidjson::Document d;
  d.Parse(p.out.c_str());
  REQUIRE_FALSE(d.HasParseError());
  Ruleset rs;
  for (const auto& item : d["nftables"].GetArray()) {
    if (item.HasMember("chain")) {
      const auto& c = item["chain"];
      std::string name = c["name"].GetString();
      rs.chains.insert(name);
      rs.rules[name];  // an empty chain shows as an empty rule list
      if (c.HasMember("hook")) {
        rs.base[name] = {c["type"].GetString(), c["hook"].GetString(), c["policy"].GetString(), c["prio"].GetInt()};
      }
    } else if (item.HasMember("rule")) {
      const auto& r = item["rule"];
      rs.rules[r["chain"].GetString()].push_back(compact(r["expr"]));
    } else if (item.HasMember("map")) {
      const auto& m = item["map"];
      std::string name = m["name"].GetString();
      rs.map_type[name] = std::string(m["type"].GetString()) + " : " + m["map"].GetString();
      auto& elems = rs.elems[name];
      if (m.HasMember("elem")) {
        for (const auto& e : m["elem"].GetArray()) {
          REQUIRE(e.IsArray());
          REQUIRE(e.Size() == 2);
          elems[e[0].GetString()] = e[1]["jump"]["target"].GetString();
        }
      }
    }
  }
  return rs;
}

// The JSON nft 1.0.6 prints for `ip[6] daddr <prefix> return`, `masquerade`, `ip[6] saddr vmap @m`.
std::string daddr_return(const std::string& proto, const std::string& net, int len) {
  return R"([{"match":{"op":"==","left":{"payload":{"protocol":")" + proto +
         R"(","field":"daddr"}},"right":{"prefix":{"addr":")" + net + R"(","len":)" + std::to_string(len) +
         R"(}}}},{"return":null}])";
}
const std::string kMasquerade = R"([{"masquerade":null}])";
std::string saddr_vmap(const std::string& proto, const std::string& map) {
  return R"([{"vmap":{"key":{"payload":{"protocol":")" + proto + R"(","field":"saddr"}},"data":"@)" + map +
         R"("}}])";
}
const std::vector<std::string> kBaseRules = {saddr_vmap("ip", "masq4"), saddr_vmap("ip6", "masq6")};

// Forks `n` children that wait on a pipe, then all run `body(i)`; returns their exit codes.
template <class F>
std::vector<int> run_concurrently(int n, F body) {
  int go[2];
  REQUIRE(pipe(go) == 0);
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      close(go[1]);
      char c;
      (void)!read(go[0], &c, 1);  // returns 0 when the parent closes the pipe: all start together
      _exit(body(i));
    }
    pids.push_back(pid);
  }
  close(go[0]);
  close(go[1]);
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return codes;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  REQUIRE(f.good());
}

}  // namespace

TEST_CASE("add_masquerade creates the plumb table, the vmaps and one chain per network") {
  test::Node node;
  const std::string red = "kube-system/red.net";  // needs sanitising: a hashed chain name
  const std::string red_chain = nft::masq_chain_name(red);
  REQUIRE(red_chain != "masq-kube-system_red_net");
  CHECK_FALSE(table_exists());

  add("blue", {"192.0.2.0/24", "2001:db8:1::/64"}, "192.0.2.2");
  add("blue", {"192.0.2.0/24", "2001:db8:1::/64"}, "192.0.2.3");
  add("blue", {"192.0.2.0/24", "2001:db8:1::/64"}, "2001:db8:1::2");
  add(red, {"203.0.113.7/24"}, "203.0.113.5");  // host bits of the subnet are ignored

  REQUIRE(table_exists());
  Ruleset rs = list_plumb();
  CHECK(rs.chains == std::set<std::string>{"postrouting", "masq-blue", red_chain});
  REQUIRE(rs.base.count("postrouting") == 1);
  CHECK(rs.base["postrouting"].type == "nat");
  CHECK(rs.base["postrouting"].hook == "postrouting");
  CHECK(rs.base["postrouting"].prio == 100);
  CHECK(rs.base["postrouting"].policy == "accept");
  CHECK(rs.base.size() == 1);
  CHECK(rs.rules["postrouting"] == kBaseRules);

  CHECK(rs.map_type["masq4"] == "ipv4_addr : verdict");
  CHECK(rs.map_type["masq6"] == "ipv6_addr : verdict");
  CHECK(rs.elems["masq4"] == std::map<std::string, std::string>{
                                 {"192.0.2.2", "masq-blue"}, {"192.0.2.3", "masq-blue"}, {"203.0.113.5", red_chain}});
  CHECK(rs.elems["masq6"] == std::map<std::string, std::string>{{"2001:db8:1::2", "masq-blue"}});

  CHECK(rs.rules["masq-blue"] == std::vector<std::string>{daddr_return("ip", "192.0.2.0", 24),
                                                           daddr_return("ip6", "2001:db8:1::", 64),
                                                           daddr_return("ip", "224.0.0.0", 4),
                                                           daddr_return("ip6", "ff00::", 8), kMasquerade});
  CHECK(rs.rules[red_chain] == std::vector<std::string>{daddr_return("ip", "203.0.113.0", 24),
                                                         daddr_return("ip", "224.0.0.0", 4),
                                                         daddr_return("ip6", "ff00::", 8), kMasquerade});
}

TEST_CASE("adding the same pod twice is idempotent; a new subnet list rewrites the network chain") {
  test::Node node;
  add("blue", {"192.0.2.0/24"}, "192.0.2.2");
  Ruleset first = list_plumb();
  add("blue", {"192.0.2.0/24"}, "192.0.2.2");
  Ruleset second = list_plumb();
  CHECK(first == second);
  CHECK(second.elems["masq4"].size() == 1);
  CHECK(second.rule_count() == 2 + 4);

  // Same pod again with a different subnet list: the chain is rewritten, not appended to.
  add("blue", {"192.0.2.0/25", "192.0.2.128/25"}, "192.0.2.2");
  Ruleset third = list_plumb();
  CHECK(third.rules["masq-blue"] == std::vector<std::string>{daddr_return("ip", "192.0.2.0", 25),
                                                              daddr_return("ip", "192.0.2.128", 25),
                                                              daddr_return("ip", "224.0.0.0", 4),
                                                              daddr_return("ip6", "ff00::", 8), kMasquerade});
  CHECK(third.rules["postrouting"] == kBaseRules);
  CHECK(third.elems == first.elems);
}

TEST_CASE("a pod address still mapped to another network is re-pointed") {
  test::Node node;
  add("blue", {"192.0.2.0/24"}, "192.0.2.2");
  add("red", {"192.0.2.0/24"}, "192.0.2.2");
  Ruleset rs = list_plumb();
  CHECK(rs.elems["masq4"] == std::map<std::string, std::string>{{"192.0.2.2", "masq-red"}});
  CHECK(rs.chains == std::set<std::string>{"postrouting", "masq-blue", "masq-red"});
}

TEST_CASE("del_masquerade removes only that element; absent elements and a missing table give false") {
  test::Node node;
  auto absent = nft::del_masquerade(addr("192.0.2.2"));
  REQUIRE(absent.has_value());
  CHECK_FALSE(*absent);  // no table at all

  add("blue", {"192.0.2.0/24", "2001:db8:1::/64"}, "192.0.2.2");
  add("blue", {"192.0.2.0/24", "2001:db8:1::/64"}, "192.0.2.3");
  add("blue", {"192.0.2.0/24", "2001:db8:1::/64"}, "2001:db8:1::2");
  add("green", {"198.51.100.0/24"}, "198.51.100.9");
  Ruleset before = list_plumb();

  auto removed = nft::del_masquerade(addr("192.0.2.2"));
  REQUIRE(removed.has_value());
  CHECK(*removed);
  Ruleset after = list_plumb();
  CHECK(after.elems["masq4"] ==
        std::map<std::string, std::string>{{"192.0.2.3", "masq-blue"}, {"198.51.100.9", "masq-green"}});
  CHECK(after.elems["masq6"] == before.elems["masq6"]);
  CHECK(after.rules == before.rules);
  CHECK(after.chains == before.chains);

  auto again = nft::del_masquerade(addr("192.0.2.2"));
  REQUIRE(again.has_value());
  CHECK_FALSE(*again);
  auto never = nft::del_masquerade(addr("2001:db8:1::99"));
  REQUIRE(never.has_value());
  CHECK_FALSE(*never);
  auto v6 = nft::del_masquerade(addr("2001:db8:1::2"));
  REQUIRE(v6.has_value());
  CHECK(*v6);
  CHECK(list_plumb().elems["masq6"].empty());

  REQUIRE(nft::remove_table().has_value());
  CHECK_FALSE(table_exists());
  REQUIRE(nft::remove_table().has_value());  // idempotent
  auto gone = nft::del_masquerade(addr("192.0.2.3"));
  REQUIRE(gone.has_value());
  CHECK_FALSE(*gone);
}

TEST_CASE("50 pods add elements, not rules") {
  test::Node node;
  add("blue", {"192.0.2.0/24"}, "192.0.2.10");
  const size_t rules_for_one = list_plumb().rule_count();
  CHECK(rules_for_one == 2 + 4);
  for (int i = 11; i < 60; ++i) add("blue", {"192.0.2.0/24"}, "192.0.2." + std::to_string(i));
  Ruleset rs = list_plumb();
  CHECK(rs.rule_count() == rules_for_one);
  CHECK(rs.elems["masq4"].size() == 50);
  CHECK(rs.elems["masq4"]["192.0.2.59"] == "masq-blue");
}

TEST_CASE("concurrent add_masquerade on a fresh node creates exactly one set of base rules") {
  test::Node node;
  for (int round = 0; round < 5; ++round) {
    CAPTURE(round);
    REQUIRE(nft::remove_table().has_value());
    REQUIRE_FALSE(table_exists());
    auto codes = run_concurrently(4, [](int i) {
      // Two processes per network, so network chains are also written concurrently.
      const std::string net = i % 2 == 0 ? "blue" : "red";
      const std::string subnet = i % 2 == 0 ? "192.0.2.0/24" : "203.0.113.0/24";
      auto p = IpPrefix::parse(subnet);
      auto a = IpAddr::parse((i % 2 == 0 ? "192.0.2." : "203.0.113.") + std::to_string(10 + i));
      if (!p || !a) return 2;
      return nft::add_masquerade(net, {*p}, *a) ? 0 : 1;
    });
    CHECK(codes == std::vector<int>{0, 0, 0, 0});
    Ruleset rs = list_plumb();
    CHECK(rs.rules["postrouting"] == kBaseRules);
    CHECK(rs.rules["masq-blue"].size() == 4);
    CHECK(rs.rules["masq-red"].size() == 4);
    CHECK(rs.elems["masq4"] == std::map<std::string, std::string>{{"192.0.2.10", "masq-blue"},
                                                                   {"203.0.113.11", "masq-red"},
                                                                   {"192.0.2.12", "masq-blue"},
                                                                   {"203.0.113.13", "masq-red"}});
  }
}

TEST_CASE("invalid input is rejected before touching the kernel") {
  test::Node node;
  auto empty_net = nft::add_masquerade("", prefixes({"192.0.2.0/24"}), addr("192.0.2.2"));
  REQUIRE_FALSE(empty_net.has_value());
  CHECK(empty_net.error().cni_code == cni_code::kInvalidConfig);
  auto no_ip = nft::add_masquerade("blue", prefixes({"192.0.2.0/24"}), IpAddr{});
  REQUIRE_FALSE(no_ip.has_value());
  CHECK(no_ip.error().cni_code == cni_code::kInvalidConfig);
  auto bad_subnet = nft::add_masquerade("blue", {IpPrefix{}}, addr("192.0.2.2"));
  REQUIRE_FALSE(bad_subnet.has_value());
  CHECK(bad_subnet.error().cni_code == cni_code::kInvalidConfig);
  CHECK(bad_subnet.error().msg.find("subnet #0") != std::string::npos);
  auto del = nft::del_masquerade(IpAddr{});
  REQUIRE_FALSE(del.has_value());
  CHECK(del.error().cni_code == cni_code::kInvalidConfig);
  CHECK_FALSE(table_exists());
}

TEST_CASE("pod traffic leaving the node is masqueraded until del_masquerade") {
  test::Node node;
  node.add_netns("pod");
  node.add_netns("outside");
  // pod eth0 192.0.2.2/24 --- vpod 192.0.2.1/24 [node] vout 198.51.100.1/24 --- outside eth0 198.51.100.2/24
  // "outside" has no route back to 192.0.2.0/24: only masqueraded traffic can be answered.
  auto setup = test::sh(
      "set -e\n"
      "ip link add vpod type veth peer name eth0 netns pod\n"
      "ip addr add 192.0.2.1/24 dev vpod && ip link set vpod up\n"
      "ip -n pod addr add 192.0.2.2/24 dev eth0 && ip -n pod link set eth0 up\n"
      "ip -n pod route add default via 192.0.2.1\n"
      "ip link add vout type veth peer name eth0 netns outside\n"
      "ip addr add 198.51.100.1/24 dev vout && ip link set vout up\n"
      "ip -n outside addr add 198.51.100.2/24 dev eth0 && ip -n outside link set eth0 up\n");
  INFO("setup: ", setup.err);
  REQUIRE(setup.exit_code == 0);
  write_file("/proc/sys/net/ipv4/ip_forward", "1\n");

  const std::string dir = node.dir();
  write_file(dir + "/listen.py",
             "import socket, sys\n"
             "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
             "s.bind(('198.51.100.2', 5555))\n"
             "open(sys.argv[1], 'w').close()\n"
             "s.settimeout(5)\n"
             "data, peer = s.recvfrom(64)\n"
             "print(peer[0])\n");
  write_file(dir + "/send.py",
             "import socket, sys\n"
             "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
             "s.bind(('0.0.0.0', int(sys.argv[1])))\n"
             "s.sendto(b'plumb', ('198.51.100.2', 5555))\n");
  // One UDP datagram from the pod (from a new source port each time, so no earlier conntrack
  // entry applies); returns the source address the outside namespace saw.
  auto sender_seen_outside = [&](int port) {
    const std::string d = dir + "/";
    auto p = test::sh("rm -f " + d + "ready; ip netns exec outside python3 " + d + "listen.py " + d + "ready > " + d +
                      "seen & L=$!; for i in $(seq 50); do [ -e " + d + "ready ] && break; sleep 0.1; done; " +
                      "ip netns exec pod python3 " + d + "send.py " + std::to_string(port) + " && wait $L && cat " +
                      d + "seen");
    INFO("probe: ", p.err);
    REQUIRE(p.exit_code == 0);
    return p.out;
  };
  auto ping_outside = [] { return test::sh("ip netns exec pod ping -n -q -c 1 -W 2 198.51.100.2").exit_code; };

  CHECK(sender_seen_outside(40001) == "192.0.2.2\n");  // forwarding works, nothing rewritten yet

  add("blue", {"192.0.2.0/24"}, "192.0.2.2");
  CHECK(ping_outside() == 0);
  CHECK(sender_seen_outside(40002) == "198.51.100.1\n");

  // The network's own subnets are not masqueraded: list the outside prefix as one of them.
  add("blue", {"192.0.2.0/24", "198.51.100.0/24"}, "192.0.2.2");
  CHECK(sender_seen_outside(40003) == "192.0.2.2\n");
  add("blue", {"192.0.2.0/24"}, "192.0.2.2");
  CHECK(sender_seen_outside(40004) == "198.51.100.1\n");

  auto removed = nft::del_masquerade(addr("192.0.2.2"));
  REQUIRE(removed.has_value());
  CHECK(*removed);
  CHECK(sender_seen_outside(40005) == "192.0.2.2\n");
  CHECK(ping_outside() != 0);  // the reply has no way back without masquerading
}

TEST_CASE("foreign objects in the plumb table give kernel errors naming the operation") {
  test::Node node;
  // A map of the wrong type where masq4 belongs: NEWSET answers EEXIST.
  REQUIRE(test::sh("nft add table inet plumb && nft add map inet plumb masq4 '{ type ipv4_addr : ipv4_addr ; }'")
              .exit_code == 0);
  auto st = nft::add_masquerade("blue", prefixes({"192.0.2.0/24"}), addr("192.0.2.2"));
  REQUIRE_FALSE(st.has_value());
  CHECK(st.error().cni_code == cni_code::kKernel);
  CHECK(st.error().sys_errno == EEXIST);
  CHECK(st.error().msg.find("create map inet plumb masq4") != std::string::npos);
  CHECK(st.error().msg.find("192.0.2.2") != std::string::npos);
  // The kernel's extended ack (here: the offending attribute's offset) is kept.
  CHECK_FALSE(st.error().details.empty());

  // A regular chain where the nat base chain belongs: a conflict, not a missing kernel feature.
  REQUIRE(test::sh("nft delete table inet plumb && nft add table inet plumb && nft add chain inet plumb postrouting")
              .exit_code == 0);
  st = nft::add_masquerade("blue", prefixes({"192.0.2.0/24"}), addr("192.0.2.2"));
  REQUIRE_FALSE(st.has_value());
  CHECK(st.error().cni_code == cni_code::kKernel);
  CHECK(st.error().msg.find("create chain inet plumb postrouting") != std::string::npos);
}
