// CNI wire types: versions, the invocation environment, results of every version and their
// conversion, error and VERSION JSON, runtimeConfig key canonicalisation.
#include <doctest/doctest.h>

#include <cerrno>
#include <map>
#include <string>

#include "engine/cni/cni.hpp"

using namespace plumb;

namespace {

// ---- a fake environment for Env::from ----
std::map<std::string, std::string> g_env;
const char* fake_getenv(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}
Result<cni::Env> env_of(std::map<std::string, std::string> vars) {
  g_env = std::move(vars);
  return cni::Env::from(&fake_getenv);
}
std::map<std::string, std::string> add_env() {
  return {{"CNI_COMMAND", "ADD"}, {"CNI_CONTAINERID", "abc123"}, {"CNI_NETNS", "/run/netns/pod1"},
          {"CNI_IFNAME", "eth0"}, {"CNI_PATH", "/opt/cni/bin"}};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

json::Document parse(const std::string& text) {
  auto d = json::parse(text, "test");
  REQUIRE_MESSAGE(d.has_value(), text);
  return std::move(*d);
}
std::string canon(const std::string& text) { return json::dump(parse(text)); }

// ---- a result that uses every field of every version ----
cni::CniResult rich_result() {
  cni::CniResult r;
  r.cni_version = "1.1.0";
  r.interfaces.push_back({"br0", "02:00:00:00:00:01", std::nullopt, "", "", ""});
  r.interfaces.push_back({"eth1", "02:00:00:00:00:02", 1400u, "/run/netns/pod1", "/run/vhost/sock0", "0000:04:00.5"});
  r.ips.push_back({*IpPrefix::parse("192.0.2.10/24"), *IpAddr::parse("192.0.2.1"), 1});
  r.ips.push_back({*IpPrefix::parse("2001:db8::10/64"), *IpAddr::parse("2001:db8::1"), 1});
  r.ips.push_back({*IpPrefix::parse("198.51.100.7/24"), std::nullopt, 1});
  cni::RouteEntry def4{*IpPrefix::parse("0.0.0.0/0"), *IpAddr::parse("192.0.2.1"), 1400, 1360, 10, 100, 0};
  cni::RouteEntry net4{*IpPrefix::parse("203.0.113.0/24"), std::nullopt, {}, {}, {}, {}, {}};
  cni::RouteEntry def6{*IpPrefix::parse("::/0"), *IpAddr::parse("2001:db8::1"), {}, {}, {}, {}, {}};
  r.routes = {def4, net4, def6};
  r.dns.nameservers = {"192.0.2.53"};
  r.dns.domain = "example.com";
  r.dns.search = {"example.com"};
  r.dns.options = {"ndots:2"};
  return r;
}

const std::string kDns = R"("dns":{"nameservers":["192.0.2.53"],"domain":"example.com","search":["example.com"],"options":["ndots:2"]})";

// The rich result in each shape (%V% = cniVersion).
const std::string kG11 =
    R"({"cniVersion":"1.1.0","interfaces":[{"name":"br0","mac":"02:00:00:00:00:01"},)"
    R"({"name":"eth1","mac":"02:00:00:00:00:02","mtu":1400,"sandbox":"/run/netns/pod1","socketPath":"/run/vhost/sock0","pciID":"0000:04:00.5"}],)"
    R"("ips":[{"interface":1,"address":"192.0.2.10/24","gateway":"192.0.2.1"},{"interface":1,"address":"2001:db8::10/64","gateway":"2001:db8::1"},)"
    R"({"interface":1,"address":"198.51.100.7/24"}],)"
    R"("routes":[{"dst":"0.0.0.0/0","gw":"192.0.2.1","mtu":1400,"advmss":1360,"priority":10,"table":100,"scope":0},)"
    R"({"dst":"203.0.113.0/24"},{"dst":"::/0","gw":"2001:db8::1"}],)" +
    kDns + "}";
// 1.0.0: no 1.1.0 fields, no ips[].version.
const std::string kG10body =
    R"("interfaces":[{"name":"br0","mac":"02:00:00:00:00:01"},{"name":"eth1","mac":"02:00:00:00:00:02","sandbox":"/run/netns/pod1"}],)"
    R"("ips":[{"interface":1,"address":"192.0.2.10/24","gateway":"192.0.2.1"},{"interface":1,"address":"2001:db8::10/64","gateway":"2001:db8::1"},)"
    R"({"interface":1,"address":"198.51.100.7/24"}],)"
    R"("routes":[{"dst":"0.0.0.0/0","gw":"192.0.2.1"},{"dst":"203.0.113.0/24"},{"dst":"::/0","gw":"2001:db8::1"}],)" +
    kDns + "}";
// 0.3.x and 0.4.0: ips[].version (libcni types040; the CNI 0.4.0 result carries it).
const std::string kG03body =
    R"("interfaces":[{"name":"br0","mac":"02:00:00:00:00:01"},{"name":"eth1","mac":"02:00:00:00:00:02","sandbox":"/run/netns/pod1"}],)"
    R"("ips":[{"version":"4","interface":1,"address":"192.0.2.10/24","gateway":"192.0.2.1"},)"
    R"({"version":"6","interface":1,"address":"2001:db8::10/64","gateway":"2001:db8::1"},)"
    R"({"version":"4","interface":1,"address":"198.51.100.7/24"}],)"
    R"("routes":[{"dst":"0.0.0.0/0","gw":"192.0.2.1"},{"dst":"203.0.113.0/24"},{"dst":"::/0","gw":"2001:db8::1"}],)" +
    kDns + "}";
// 0.1.0 / 0.2.0: first IPv4 and first IPv6, routes by family.
const std::string kG02body =
    R"("ip4":{"ip":"192.0.2.10/24","gateway":"192.0.2.1","routes":[{"dst":"0.0.0.0/0","gw":"192.0.2.1"},{"dst":"203.0.113.0/24"}]},)"
    R"("ip6":{"ip":"2001:db8::10/64","gateway":"2001:db8::1","routes":[{"dst":"::/0","gw":"2001:db8::1"}]},)" +
    kDns + "}";
// What a 0.2.0 result becomes in 0.4.0+ (no interfaces, no interface index).
const std::string kU02body =
    R"("ips":[{"address":"192.0.2.10/24","gateway":"192.0.2.1"},{"address":"2001:db8::10/64","gateway":"2001:db8::1"}],)"
    R"("routes":[{"dst":"0.0.0.0/0","gw":"192.0.2.1"},{"dst":"203.0.113.0/24"},{"dst":"::/0","gw":"2001:db8::1"}],)" +
    kDns + "}";
const std::string kU02body03 =
    R"("ips":[{"version":"4","address":"192.0.2.10/24","gateway":"192.0.2.1"},{"version":"6","address":"2001:db8::10/64","gateway":"2001:db8::1"}],)"
    R"("routes":[{"dst":"0.0.0.0/0","gw":"192.0.2.1"},{"dst":"203.0.113.0/24"},{"dst":"::/0","gw":"2001:db8::1"}],)" +
    kDns + "}";

std::string with_version(const std::string& v, const std::string& body) { return R"({"cniVersion":")" + v + R"(",)" + body; }

enum Level { L02, L03, L11 };  // how much of the rich result a version can carry
Level level(const std::string& v) {
  if (v == "0.1.0" || v == "0.2.0") return L02;
  if (v == "1.1.0") return L11;
  return L03;
}
bool has_ip_version(const std::string& v) { return v == "0.3.0" || v == "0.3.1" || v == "0.4.0"; }

/// The rich result as encoded natively in `v`.
std::string golden(const std::string& v) {
  if (level(v) == L02) return with_version(v, kG02body);
  if (v == "1.1.0") return kG11;
  return with_version(v, has_ip_version(v) ? kG03body : kG10body);
}
/// The rich result encoded in `from`, decoded, and re-encoded in `to`.
std::string expected_conversion(const std::string& from, const std::string& to) {
  if (level(to) == L02) return with_version(to, kG02body);
  if (level(from) == L02) return with_version(to, has_ip_version(to) ? kU02body03 : kU02body);
  if (level(from) == L03 && level(to) == L11) return with_version(to, kG10body);
  return golden(to);
}

std::string encode(const cni::CniResult& r, const std::string& v) {
  auto d = cni::encode_result(r, v);
  REQUIRE(d.has_value());
  return json::dump(*d);
}
cni::CniResult decode(const std::string& text, const std::string& v) {
  auto d = parse(text);
  auto r = cni::decode_result(d, v);
  REQUIRE_MESSAGE(r.has_value(), r.error().text());
  return *r;
}

}  // namespace

TEST_CASE("supported versions, oldest first, and numeric version comparison") {
  CHECK(cni::supported_versions() == std::vector<std::string>{"0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"});
  CHECK(cni::version_supported("0.3.1"));
  CHECK(cni::version_supported("1.1.0"));
  CHECK_FALSE(cni::version_supported("1.2.0"));
  CHECK_FALSE(cni::version_supported(""));
  CHECK_FALSE(cni::version_supported("0.3"));
  CHECK(cni::compare_versions("0.10.0", "0.9.0") > 0);
  CHECK(cni::compare_versions("1.0.0", "1.0") == 0);
  CHECK(cni::compare_versions("0.3.1", "0.4.0") < 0);
  CHECK(cni::compare_versions("1.1.0", "1.1.0") == 0);
  CHECK(cni::compare_versions("x.1", "0.1") == 0);  // unparseable parts compare as 0
}

TEST_CASE("Env::from reads a complete ADD environment and splits CNI_ARGS") {
  auto vars = add_env();
  vars["CNI_ARGS"] = "IgnoreUnknown=1;K8S_POD_NAMESPACE=team-a;;K8S_POD_NAME=web-0;X=a=b";
  auto e = env_of(vars);
  REQUIRE(e.has_value());
  CHECK(e->command == cni::Command::Add);
  CHECK(e->container_id == "abc123");
  CHECK(e->netns == "/run/netns/pod1");
  CHECK(e->ifname == "eth0");
  CHECK(e->path == "/opt/cni/bin");
  CHECK(e->args_raw == vars["CNI_ARGS"]);
  REQUIRE(e->args.size() == 4);
  CHECK(e->arg("K8S_POD_NAMESPACE") == "team-a");
  CHECK(e->arg("K8S_POD_NAME") == "web-0");
  CHECK(e->arg("X") == "a=b");
  CHECK(e->arg("IgnoreUnknown") == "1");
  CHECK_FALSE(e->arg("k8s_pod_name").has_value());  // exact match only
}

TEST_CASE("Env::from: every command and what it requires") {
  for (auto [cmd, want] : std::vector<std::pair<std::string, cni::Command>>{{"ADD", cni::Command::Add},
                                                                           {"DEL", cni::Command::Del},
                                                                           {"CHECK", cni::Command::Check},
                                                                           {"VERSION", cni::Command::Version},
                                                                           {"STATUS", cni::Command::Status},
                                                                           {"GC", cni::Command::Gc}}) {
    auto vars = add_env();
    vars["CNI_COMMAND"] = cmd;
    auto e = env_of(vars);
    REQUIRE_MESSAGE(e.has_value(), cmd);
    CHECK(e->command == want);
  }
  SUBCASE("missing or unknown CNI_COMMAND") {
    auto e = env_of({});
    REQUIRE_FALSE(e.has_value());
    CHECK(e.error().cni_code == cni_code::kInvalidEnv);
    CHECK(contains(e.error().msg, "CNI_COMMAND"));
    e = env_of({{"CNI_COMMAND", "ATTACH"}});
    REQUIRE_FALSE(e.has_value());
    CHECK(e.error().cni_code == cni_code::kInvalidEnv);
    CHECK(contains(e.error().msg, "\"ATTACH\""));
  }
  SUBCASE("ADD and CHECK need container id, netns and ifname") {
    for (std::string cmd : {"ADD", "CHECK"}) {
      for (std::string var : {"CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"}) {
        auto vars = add_env();
        vars["CNI_COMMAND"] = cmd;
        vars.erase(var);
        auto e = env_of(vars);
        REQUIRE_FALSE_MESSAGE(e.has_value(), (cmd + " without " + var));
        CHECK(e.error().cni_code == cni_code::kInvalidEnv);
        CHECK(contains(e.error().msg, var));
      }
    }
  }
  SUBCASE("DEL needs container id and ifname, not netns") {
    auto vars = add_env();
    vars["CNI_COMMAND"] = "DEL";
    vars["CNI_NETNS"] = "";
    auto e = env_of(vars);
    REQUIRE(e.has_value());
    CHECK(e->netns.empty());
    vars.erase("CNI_IFNAME");
    e = env_of(vars);
    REQUIRE_FALSE(e.has_value());
    CHECK(contains(e.error().msg, "CNI_IFNAME"));
    vars = add_env();
    vars["CNI_COMMAND"] = "DEL";
    vars.erase("CNI_CONTAINERID");
    e = env_of(vars);
    REQUIRE_FALSE(e.has_value());
    CHECK(contains(e.error().msg, "CNI_CONTAINERID"));
  }
  SUBCASE("VERSION, STATUS and GC need nothing else") {
    for (std::string cmd : {"VERSION", "STATUS", "GC"}) {
      auto e = env_of({{"CNI_COMMAND", cmd}});
      CHECK_MESSAGE(e.has_value(), cmd);
    }
  }
}

TEST_CASE("Env::from: container IDs that could escape a path are rejected") {
  for (const std::string& bad : std::vector<std::string>{"../etc", ".hidden", "..", "a/b", "a..b", "id with space", "id;rm", std::string(201, 'a'), std::string(1025, 'a')}) {
    auto vars = add_env();
    vars["CNI_CONTAINERID"] = bad;
    auto e = env_of(vars);
    REQUIRE_FALSE_MESSAGE(e.has_value(), bad);
    CHECK(e.error().cni_code == cni_code::kInvalidEnv);
    CHECK(contains(e.error().msg, "CNI_CONTAINERID"));
  }
  for (const std::string& good : std::vector<std::string>{"abc_DEF-1.2", "0123456789abcdef", std::string(200, 'f')}) {
    auto vars = add_env();
    vars["CNI_CONTAINERID"] = good;
    CHECK_MESSAGE(env_of(vars).has_value(), good);
  }
  // An invalid id is rejected even where it is optional.
  auto e = env_of({{"CNI_COMMAND", "GC"}, {"CNI_CONTAINERID", "../x"}});
  CHECK_FALSE(e.has_value());
  // A DEL's is no error: nothing can exist for it, so the DEL has nothing to do.
  for (const std::string& bad : std::vector<std::string>{"../etc", std::string(201, 'a')}) {
    auto vars = add_env();
    vars["CNI_COMMAND"] = "DEL";
    vars["CNI_CONTAINERID"] = bad;
    auto del = env_of(vars);
    REQUIRE_MESSAGE(del.has_value(), bad);
    CHECK(del->container_id_refused);
  }
  auto vars = add_env();
  vars["CNI_COMMAND"] = "DEL";
  auto del = env_of(vars);
  REQUIRE(del.has_value());
  CHECK_FALSE(del->container_id_refused);
}

TEST_CASE("Env::from: CNI_IFNAME of ADD and CHECK must be a kernel interface name (DEL takes any); CNI_ARGS items need '='") {
  for (std::string bad : {"eth0:1", "a/b", "has space", "sixteen-chars-xx", ".", "..", "r%d"}) {
    for (const char* command : {"ADD", "CHECK"}) {
      auto vars = add_env();
      vars["CNI_COMMAND"] = command;
      vars["CNI_IFNAME"] = bad;
      auto e = env_of(vars);
      REQUIRE_FALSE_MESSAGE(e.has_value(), bad);
      CHECK(e.error().cni_code == cni_code::kInvalidEnv);
      CHECK(contains(e.error().msg, "CNI_IFNAME \"" + bad + "\" is not a valid interface name"));
    }
    // Nothing can exist under such a name: DEL answers it (pod::run) rather than failing forever.
    auto vars = add_env();
    vars["CNI_COMMAND"] = "DEL";
    vars["CNI_IFNAME"] = bad;
    auto e = env_of(vars);
    REQUIRE_MESSAGE(e.has_value(), bad);
    CHECK(e->ifname == bad);
  }
  auto vars = add_env();
  vars["CNI_IFNAME"] = "fifteen-chars-x";
  CHECK(env_of(vars).has_value());
  vars["CNI_ARGS"] = "A=1;novalue";
  auto e = env_of(vars);
  REQUIRE_FALSE(e.has_value());
  CHECK(e.error().cni_code == cni_code::kInvalidEnv);
  CHECK(contains(e.error().msg, "\"novalue\""));
  vars["CNI_ARGS"] = "=x";
  CHECK_FALSE(env_of(vars).has_value());
}

TEST_CASE("each version's native encoding of a result (golden JSON)") {
  auto r = rich_result();
  for (const auto& v : cni::supported_versions()) {
    CAPTURE(v);
    CHECK(encode(r, v) == canon(golden(v)));
  }
}

TEST_CASE("decoding each version's golden gives back what that version carries") {
  SUBCASE("1.1.0 is lossless") {
    auto r = decode(kG11, "1.1.0");
    CHECK(r.cni_version == "1.1.0");
    REQUIRE(r.interfaces.size() == 2);
    CHECK(r.interfaces[1].mtu_bytes == 1400u);
    CHECK(r.interfaces[1].socket_path == "/run/vhost/sock0");
    CHECK(r.interfaces[1].pci_id == "0000:04:00.5");
    REQUIRE(r.routes.size() == 3);
    CHECK(r.routes[0].mtu_bytes == 1400);
    CHECK(r.routes[0].advmss == 1360);
    CHECK(r.routes[0].priority == 10);
    CHECK(r.routes[0].table == 100);
    CHECK(r.routes[0].scope == 0);
    CHECK_FALSE(r.routes[1].table.has_value());
    REQUIRE(r.ips.size() == 3);
    CHECK(r.ips[2].interface == 1);
    CHECK_FALSE(r.ips[2].gateway.has_value());
    CHECK(r.dns.options == std::vector<std::string>{"ndots:2"});
    CHECK(encode(r, "1.1.0") == canon(kG11));
  }
  SUBCASE("0.3.1 has ips[].version") {
    auto r = decode(golden("0.3.1"), "0.3.1");
    REQUIRE(r.ips.size() == 3);
    CHECK(r.ips[1].address.str() == "2001:db8::10/64");
    CHECK(r.interfaces[1].sandbox == "/run/netns/pod1");
  }
  SUBCASE("0.2.0 ip4/ip6") {
    auto r = decode(golden("0.2.0"), "0.2.0");
    CHECK(r.interfaces.empty());
    REQUIRE(r.ips.size() == 2);
    CHECK(r.ips[0].address.str() == "192.0.2.10/24");
    CHECK(r.ips[0].gateway->str() == "192.0.2.1");
    CHECK_FALSE(r.ips[0].interface.has_value());
    CHECK(r.ips[1].address.str() == "2001:db8::10/64");
    REQUIRE(r.routes.size() == 3);
    CHECK(r.routes[2].dst.str() == "::/0");
  }
}

TEST_CASE("conversion between every pair of versions follows libcni") {
  auto rich = rich_result();
  for (const auto& from : cni::supported_versions()) {
    auto in = decode(encode(rich, from), from);
    for (const auto& to : cni::supported_versions()) {
      CAPTURE(from);
      CAPTURE(to);
      CHECK(encode(in, to) == canon(expected_conversion(from, to)));
    }
  }
}

TEST_CASE("0.2.0 <-> 1.1.0 round trips") {
  SUBCASE("0.2.0 -> 1.1.0 -> 0.2.0 is lossless") {
    const std::string g02 = golden("0.2.0");
    auto up = encode(decode(g02, "0.2.0"), "1.1.0");
    CHECK(up == canon(with_version("1.1.0", kU02body)));
    CHECK(encode(decode(up, "1.1.0"), "0.2.0") == canon(g02));
  }
  SUBCASE("1.1.0 -> 0.2.0 -> 1.1.0 keeps the first address of each family") {
    auto down = encode(decode(kG11, "1.1.0"), "0.2.0");
    CHECK(down == canon(with_version("0.2.0", kG02body)));
    CHECK(encode(decode(down, "0.2.0"), "1.1.0") == canon(with_version("1.1.0", kU02body)));
  }
  SUBCASE("IPv6 only, and no address at all") {
    cni::CniResult r;
    r.ips.push_back({*IpPrefix::parse("2001:db8::5/64"), std::nullopt, 0});
    r.routes.push_back({*IpPrefix::parse("198.51.100.0/24"), std::nullopt, {}, {}, {}, {}, {}});  // no ip4: dropped
    CHECK(encode(r, "0.2.0") == R"({"cniVersion":"0.2.0","ip6":{"ip":"2001:db8::5/64"},"dns":{}})");
    CHECK(encode(cni::CniResult{}, "0.1.0") == R"({"cniVersion":"0.1.0","dns":{}})");
    CHECK(encode(cni::CniResult{}, "0.4.0") == R"({"cniVersion":"0.4.0","dns":{}})");
    // The reference plugins Debian ships (libcni < 1.2) write "dns":{} in 1.x too.
    CHECK(encode(cni::CniResult{}, "1.0.0") == R"({"cniVersion":"1.0.0","dns":{}})");
    CHECK(encode(cni::CniResult{}, "1.1.0") == R"({"cniVersion":"1.1.0","dns":{}})");
  }
}

TEST_CASE("encode_result and decode_result reject unsupported versions") {
  auto e = cni::encode_result(rich_result(), "2.0.0");
  REQUIRE_FALSE(e.has_value());
  CHECK(e.error().cni_code == cni_code::kIncompatibleVersion);
  CHECK(contains(e.error().msg, "2.0.0"));
  auto d = parse("{}");
  auto r = cni::decode_result(d, "0.5.0");
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kIncompatibleVersion);
}

TEST_CASE("decode_result errors are kDecode and name the field and value") {
  struct Case {
    std::string version, text, field, value;
  };
  for (const auto& c : std::vector<Case>{
           {"1.0.0", R"({"ips":[{"address":"192.0.2.300/24"}]})", "ips[0].address", "192.0.2.300/24"},
           {"1.0.0", R"({"ips":[{"address":"192.0.2.3"}]})", "ips[0].address", "192.0.2.3"},
           {"1.0.0", R"({"ips":[{"address":"192.0.2.3/24","gateway":"nope"}]})", "ips[0].gateway", "nope"},
           {"1.0.0", R"({"ips":[{"address":"192.0.2.3/24","interface":"0"}]})", "ips[0].interface", "\"0\""},
           {"0.3.1", R"({"ips":[{"version":"5","address":"192.0.2.3/24"}]})", "ips[0].version", "\"5\""},
           {"0.3.1", R"({"ips":[{"version":"6","address":"192.0.2.3/24"}]})", "ips[0].version", "\"6\""},
           {"1.1.0", R"({"interfaces":[{"name":"eth0","mtu":-1}]})", "interfaces[0].mtu", "-1"},
           {"1.1.0", R"({"interfaces":["eth0"]})", "interfaces[0]", "\"eth0\""},
           {"1.1.0", R"({"routes":[{"gw":"192.0.2.1"}]})", "routes[0].dst", ""},
           {"1.1.0", R"({"routes":[{"dst":"0.0.0.0/0","table":"main"}]})", "routes[0].table", "\"main\""},
           {"1.1.0", R"({"dns":{"nameservers":"192.0.2.53"}})", "dns.nameservers", "192.0.2.53"},
           {"0.2.0", R"({"ip4":{"ip":"2001:db8::1/64"}})", "ip4.ip", "2001:db8::1/64"},
           {"0.2.0", R"({"ip6":{"gateway":"2001:db8::1"}})", "ip6.ip", ""},
           {"0.2.0", R"({"ip4":{"ip":"192.0.2.2/24","routes":[{"dst":"bad"}]}})", "ip4.routes[0].dst", "bad"},
           {"1.0.0", R"(["not","an","object"])", "JSON object", ""},
       }) {
    CAPTURE(c.text);
    auto d = parse(c.text);
    auto r = cni::decode_result(d, c.version);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().cni_code == cni_code::kDecode);
    CHECK(contains(r.error().msg, c.field));
    CHECK(contains(r.error().msg, c.value));
    CHECK(contains(r.error().msg, "decode CNI " + c.version + " result"));
  }
}

TEST_CASE("1.1.0-only fields are not read from 0.4.0 results and not written to 1.0.0") {
  auto r = decode(R"({"interfaces":[{"name":"eth0","mtu":9000,"sandbox":"/x"}],"routes":[{"dst":"0.0.0.0/0","table":5}]})", "0.4.0");
  CHECK_FALSE(r.interfaces[0].mtu_bytes.has_value());
  CHECK_FALSE(r.routes[0].table.has_value());
  auto r11 = decode(R"({"interfaces":[{"name":"eth0","mtu":9000,"sandbox":"/x"}],"routes":[{"dst":"0.0.0.0/0","table":5}]})", "1.1.0");
  CHECK(encode(r11, "1.0.0") ==
        R"({"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/x"}],"routes":[{"dst":"0.0.0.0/0"}],"dns":{}})");
  CHECK(encode(r11, "1.1.0") ==
        R"({"cniVersion":"1.1.0","interfaces":[{"name":"eth0","mtu":9000,"sandbox":"/x"}],"routes":[{"dst":"0.0.0.0/0","table":5}],"dns":{}})");
}

TEST_CASE("error JSON shape: cniVersion, code, msg, details") {
  CHECK(cni::encode_error(Error{cni_code::kInvalidConfig, 0, "bridge: \"mtu\" must be a number", "got \"big\""}, "1.0.0") ==
        R"({"cniVersion":"1.0.0","code":7,"msg":"bridge: \"mtu\" must be a number","details":"got \"big\""})");
  // errno text goes to msg; empty details are omitted.
  CHECK(cni::encode_error(Error{cni_code::kKernel, ENOENT, "open /run/netns/x", ""}, "0.4.0") ==
        R"({"cniVersion":"0.4.0","code":100,"msg":"open /run/netns/x: No such file or directory"})");
  // No version known yet: the newest.
  auto d = parse(cni::encode_error(Error{cni_code::kDecode, 0, "bad stdin", ""}, ""));
  CHECK(std::string(d["cniVersion"].GetString()) == "1.1.0");
  CHECK(d["code"].GetUint() == 6);
}

TEST_CASE("VERSION answer lists every supported version") {
  CHECK(cni::encode_version_info("1.0.0") ==
        R"({"cniVersion":"1.0.0","supportedVersions":["0.1.0","0.2.0","0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]})");
}

TEST_CASE("runtimeConfig keys are matched case-insensitively (containerd capitalises them)") {
  CHECK(cni::canonical_runtime_key("PortMappings") == "portMappings");
  CHECK(cni::canonical_runtime_key("portmappings") == "portMappings");
  CHECK(cni::canonical_runtime_key("HostIP") == "hostIP");
  CHECK(cni::canonical_runtime_key("HOSTPORT") == "hostPort");
  CHECK(cni::canonical_runtime_key("cnideviceinfofile") == "CNIDeviceInfoFile");
  CHECK(cni::canonical_runtime_key("InfinibandGUID") == "infinibandGUID");
  CHECK(cni::canonical_runtime_key("IO.Kubernetes.CRI.Pod-Annotations") == "io.kubernetes.cri.pod-annotations");
  CHECK(cni::canonical_runtime_key("IngressBurst") == "ingressBurst");
  CHECK(cni::canonical_runtime_key("somethingElse") == "somethingElse");

  auto rc = parse(
      R"({"PortMappings":[{"HostPort":8080,"ContainerPort":80,"Protocol":"tcp","HostIP":"192.0.2.1"}],)"
      R"("Bandwidth":{"IngressRate":1000000,"IngressBurst":8000,"EgressRate":2000000,"EgressBurst":16000},)"
      R"("IPs":["192.0.2.5/24"],"MAC":"02:00:00:00:00:05","Custom":{"HostPort":1},"CgroupPath":"/kubepods"})");
  auto out = cni::canonicalize_runtime_config(rc);
  CHECK(json::dump(out) ==
        R"({"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp","hostIP":"192.0.2.1"}],)"
        R"("bandwidth":{"ingressRate":1000000,"ingressBurst":8000,"egressRate":2000000,"egressBurst":16000},)"
        R"("ips":["192.0.2.5/24"],"mac":"02:00:00:00:00:05","Custom":{"HostPort":1},"cgroupPath":"/kubepods"})");
  // The input is untouched.
  CHECK(rc.HasMember("PortMappings"));
}
