// portmap conditionsV4/V6 (engine/nft/portmap_conditions): the reference's iptables-style and
// nftables-style tokens parsed into nftables expressions that are exactly what nft(8) generates
// for the equivalent rule text (nft --debug=netlink, run live in the test's private network
// namespace on a scratch table), and every unsupported token refused by name.
#include <doctest/doctest.h>

#include <sys/socket.h>

#include <sstream>
#include <string>
#include <vector>

#include "engine/nft/expr.hpp"
#include "engine/nft/objects.hpp"
#include "engine/nft/portmap_conditions.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;
using plumb::test::Node;
using plumb::test::Proc;
using plumb::test::sh;

namespace {

/// The expressions nft generates for `text` in an inet table, one "[ ... ]" per line.
std::string nft_bytecode(const std::string& text) {
  Proc p = sh("nft add table inet cond-test && nft add chain inet cond-test c && nft --debug=netlink add rule inet cond-test c " +
              text + " && nft delete table inet cond-test");
  INFO(p.err);
  REQUIRE(p.exit_code == 0);
  std::istringstream in(p.out);
  std::string line, out;
  while (std::getline(in, line)) {
    auto start = line.find('[');
    if (start == std::string::npos) continue;
    auto end = line.find_last_not_of(' ');
    out += line.substr(start, end - start + 1) + "\n";
  }
  return out;
}

std::string ours(const std::vector<std::string>& tokens, int family) {
  auto c = nft::parse_conditions(tokens, family, "net.conditions");
  const std::string why = c.has_value() ? std::string() : c.error().text();
  INFO(why);
  REQUIRE(c.has_value());
  auto r = nft::expr::rule("t", "c");
  nft::append_conditions(r.get(), *c);
  return nft::obj::expr_text(r.get());
}

}  // namespace

TEST_CASE("iptables-style conditions give nft's bytecode of the same matches") {
  Node node;
  CHECK(ours({"-s", "192.0.2.0/24"}, AF_INET) == nft_bytecode("ip saddr 192.0.2.0/24"));
  CHECK(ours({"!", "-d", "198.51.100.7"}, AF_INET) == nft_bytecode("ip daddr != 198.51.100.7"));
  CHECK(ours({"-d", "198.51.100.128/25"}, AF_INET) == nft_bytecode("ip daddr 198.51.100.128/25"));
  CHECK(ours({"-i", "eth0"}, AF_INET) == nft_bytecode("iifname eth0"));
  CHECK(ours({"!", "-i", "eth+"}, AF_INET) == nft_bytecode("iifname != \"eth*\""));
  CHECK(ours({"-p", "udp"}, AF_INET) == nft_bytecode("meta l4proto udp"));
  CHECK(ours({"-m", "addrtype", "--dst-type", "LOCAL"}, AF_INET) == nft_bytecode("fib daddr type local"));
  CHECK(ours({"-m", "addrtype", "!", "--src-type", "LOCAL"}, AF_INET) == nft_bytecode("fib saddr type != local"));
  CHECK(ours({"-s", "2001:db8::/32", "-m", "comment", "--comment", "any text at all"}, AF_INET6) == nft_bytecode("ip6 saddr 2001:db8::/32"));
}

TEST_CASE("nftables-style conditions (joined with spaces, as the reference's nftables backend) give nft's bytecode") {
  Node node;
  CHECK(ours({"ip saddr != 192.0.2.1"}, AF_INET) == nft_bytecode("ip saddr != 192.0.2.1"));
  CHECK(ours({"ip6", "daddr", "2001:db8::1"}, AF_INET6) == nft_bytecode("ip6 daddr 2001:db8::1"));
  CHECK(ours({"iifname eth*"}, AF_INET) == nft_bytecode("iifname \"eth*\""));
  CHECK(ours({"fib daddr type local"}, AF_INET) == nft_bytecode("fib daddr type local"));
}

TEST_CASE("unsupported or malformed conditions are refused naming the token") {
  struct Case {
    std::vector<std::string> tokens;
    int family;
    unsigned code;
    const char* text;
  };
  for (const auto& c : std::vector<Case>{
           {{"-o", "eth0"}, AF_INET, cni_code::kUnsupportedField, "condition \"-o\""},
           {{"-m", "conntrack", "--ctstate", "NEW"}, AF_INET, cni_code::kUnsupportedField, "\"-m conntrack\""},
           {{"--dport", "80"}, AF_INET, cni_code::kUnsupportedField, "condition \"--dport\""},
           {{"!", "-m", "addrtype"}, AF_INET, cni_code::kUnsupportedField, "\"! -m\""},
           {{"-s"}, AF_INET, cni_code::kInvalidConfig, "\"-s\" needs a value"},
           {{"-s", "2001:db8::1"}, AF_INET, cni_code::kInvalidConfig, "is not an IPv4 address"},
           {{"-m", "addrtype", "--dst-type", "LOCAL,UNICAST"}, AF_INET, cni_code::kUnsupportedField, "address type"},
           {{"ip daddr 192.0.2.1"}, AF_INET6, cni_code::kUnsupportedField, "condition \"ip\""},
           {{"tcp dport 80"}, AF_INET, cni_code::kUnsupportedField, "condition \"tcp\""},
       }) {
    auto r = nft::parse_conditions(c.tokens, c.family, "net.conditionsV4");
    REQUIRE_FALSE(r.has_value());
    INFO(r.error().text());
    CHECK(r.error().cni_code == c.code);
    CHECK(r.error().text().find(c.text) != std::string::npos);
    CHECK(r.error().text().find("net.conditionsV4") != std::string::npos);
  }
}

TEST_CASE("the class name depends on the family and the tokens only; none without conditions") {
  auto a = nft::parse_conditions({"-s", "192.0.2.1"}, AF_INET, "k");
  auto b = nft::parse_conditions({"-s", "192.0.2.1"}, AF_INET, "other key");
  auto c = nft::parse_conditions({"-s", "192.0.2.2"}, AF_INET, "k");
  auto e = nft::parse_conditions({}, AF_INET, "k");
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  REQUIRE(e);
  CHECK(a->class_name() == b->class_name());
  CHECK(a->class_name() != c->class_name());
  CHECK(a->class_name().size() == 9);
  CHECK(e->class_name().empty());
  CHECK(nft::conditions_syntax({"-s", "x"}) == "iptables");
  CHECK(nft::conditions_syntax({"!", "-s", "x"}) == "iptables");
  CHECK(nft::conditions_syntax({"ip saddr x"}) == "nftables");
  CHECK(nft::conditions_syntax({}).empty());
}
