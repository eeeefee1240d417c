// The spine end to end against the real kernel, each case in a fresh private node namespace:
// the plumb binary is run exactly as a runtime runs it, and kernel state is read back
// independently through iproute2 (`ip -j`) and nftables (`nft -j`).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "tests/support/pod_fixture.hpp"
#include "tests/support/netns_view.hpp"

using plumb::test::address_files;
using plumb::test::ip_json;
using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;

namespace {

std::string bridge_nad(const std::string& bridge, const std::string& subnet, const std::string& ipam_dir,
                       const std::string& extra = "") {
  return R"({"cniVersion": "0.4.0", "type": "bridge", "bridge": ")" + bridge + R"(", )" + extra +
         R"("capabilities": {"mac": true, "ips": true}, "ipam": {"type": "host-local", "dataDir": ")" + ipam_dir +
         R"(", "ranges": [[{"subnet": ")" + subnet + R"("}]]}})";
}

/// Addresses (with prefix) of one interface in a namespace, global scope only.
std::set<std::string> addrs(const std::string& ns, const std::string& ifname) {
  auto d = ip_json((ns.empty() ? std::string() : "-n " + ns + " ") + "addr show dev " + ifname);
  std::set<std::string> out;
  for (auto& l : d.GetArray()) {
    for (auto& a : l["addr_info"].GetArray()) {
      if (std::string(a["scope"].GetString()) == "global") {
        out.insert(std::string(a["local"].GetString()) + "/" + std::to_string(a["prefixlen"].GetInt()));
      }
    }
  }
  return out;
}

std::string mac_of(const std::string& ns, const std::string& ifname) {
  auto d = ip_json("-n " + ns + " link show dev " + ifname);
  return d[0]["address"].GetString();
}

std::string nft_ruleset() { return plumb::test::sh("nft list ruleset").out; }

/// The pod addresses plumb's masquerade maps hold (the elements, not the network chains).
std::string masq_elements() {
  return plumb::test::sh("nft list map inet plumb masq4 2>/dev/null; nft list map inet plumb masq6 2>/dev/null").out;
}

void setup_networks(const PodFixture& fx) {
  fx.add_nad("default", "blue", bridge_nad("br-blue", "198.51.100.0/24", fx.ipam_dir()));
  fx.add_nad("default", "green", bridge_nad("br-green", "192.0.2.0/24", fx.ipam_dir()));
}

/// The node's side of the pod of the first case: bridges with the gateway address, host veth ends
/// enslaved, the pod's address in the masquerade maps, both subnets of the dual-stack network
/// kept local (not masqueraded) in its chain.
void check_node_side() {
  auto node_links = link_names("");
  CHECK(node_links.count("plumb0") == 1);
  CHECK(node_links.count("br-blue") == 1);
  CHECK(node_links.count("br-green") == 1);
  CHECK(addrs("", "plumb0").count("203.0.113.1/24") == 1);
  auto ports = ip_json("link show master br-blue");
  CHECK(ports.Size() == 2);
  CHECK(masq_elements().find("203.0.113.") != std::string::npos);
  // Dual stack ipMasq: the network's chain keeps both subnets local (not masqueraded).
  std::string masq_chain = plumb::test::sh("nft list chain inet plumb masq-default-net").out;
  INFO("masq chain: ", masq_chain);
  CHECK(masq_chain.find("ip daddr 203.0.113.0/24 return") != std::string::npos);
  CHECK(masq_chain.find("ip6 daddr 2001:db8:0:1::/64 return") != std::string::npos);
}

/// The network-status in the store of the pod of the first case: one entry per attachment,
/// default first and only there; `net1_addr` is the address net1 got.
void check_status(const PodFixture& fx, const std::string& net1_addr) {
  std::string status = fx.status_of("default", "pod-a");
  INFO("status: ", status);
  rapidjson::Document st;
  st.Parse(status.c_str());
  REQUIRE(st.IsArray());
  REQUIRE(st.Size() == 4);
  CHECK(std::string(st[0]["name"].GetString()) == "default-net");
  CHECK(st[0]["default"].GetBool());
  CHECK(std::string(st[0]["interface"].GetString()) == "eth0");
  CHECK(std::string(st[0]["mac"].GetString()) == mac_of("pod-a", "eth0"));
  CHECK(std::string(st[1]["name"].GetString()) == "default/blue");
  CHECK(std::string(st[1]["interface"].GetString()) == "net1");
  CHECK_FALSE(st[1]["default"].GetBool());
  CHECK(std::string(st[1]["ips"][0].GetString()) + "/24" == net1_addr);
  CHECK(std::string(st[2]["name"].GetString()) == "default/green");
  CHECK(std::string(st[2]["interface"].GetString()) == "green0");
  CHECK(std::string(st[2]["mac"].GetString()) == "02:00:00:00:00:aa");
  CHECK(std::string(st[2]["ips"][0].GetString()) == "192.0.2.77");
  CHECK(std::string(st[3]["name"].GetString()) == "default/blue");
  CHECK(std::string(st[3]["interface"].GetString()) == "net3");
}

}  // namespace

TEST_CASE("ADD, CHECK and DEL of a pod with the default network and annotated networks, one of them twice") {
  Node node;
  PodFixture fx(node);
  setup_networks(fx);
  std::string pod = node.add_netns("pod-a");
  fx.add_pod("default", "pod-a",
             R"([{"name":"blue"},{"name":"green","interface":"green0","mac":"02:00:00:00:00:aa","ips":["192.0.2.77/24"]},{"name":"blue","namespace":"default"}])");

  Proc add = fx.run("ADD", "ctr-a", pod, "default", "pod-a", fx.config());
  INFO("stdout: ", add.out, "\nstderr: ", add.err);
  REQUIRE(add.exit_code == 0);

  // The result is the default network's, in the config's version.
  rapidjson::Document result;
  result.Parse(add.out.c_str());
  REQUIRE(result.IsObject());
  CHECK(std::string(result["cniVersion"].GetString()) == "1.0.0");
  REQUIRE(result["ips"].Size() == 2);
  CHECK(std::string(result["ips"][0]["address"].GetString()).rfind("203.0.113.", 0) == 0);

  // Kernel: the pod's interfaces; a name not given is net<N>, N the element's position in the
  // pod as Multus counts it (the default network is 0): the third element is net3.
  CHECK(link_names("pod-a") == std::set<std::string>{"lo", "eth0", "net1", "green0", "net3"});
  auto eth0 = addrs("pod-a", "eth0");
  CHECK(eth0.size() == 2);
  CHECK(std::any_of(eth0.begin(), eth0.end(), [](auto& a) { return a.rfind("203.0.113.", 0) == 0 && a.ends_with("/24"); }));
  CHECK(std::any_of(eth0.begin(), eth0.end(), [](auto& a) { return a.rfind("2001:db8:0:1:", 0) == 0 && a.ends_with("/64"); }));
  CHECK(addrs("pod-a", "green0") == std::set<std::string>{"192.0.2.77/24"});
  CHECK(mac_of("pod-a", "green0") == "02:00:00:00:00:aa");
  auto net1 = addrs("pod-a", "net1"), net2 = addrs("pod-a", "net3");
  REQUIRE(net1.size() == 1);
  REQUIRE(net2.size() == 1);
  CHECK(*net1.begin() != *net2.begin());
  CHECK(net1.begin()->rfind("198.51.100.", 0) == 0);

  // Routes: the default route goes via the default network's gateway on eth0.
  auto routes = ip_json("-n pod-a route show default");
  REQUIRE(routes.Size() == 1);
  CHECK(std::string(routes[0]["gateway"].GetString()) == "203.0.113.1");
  CHECK(std::string(routes[0]["dev"].GetString()) == "eth0");
  auto routes6 = ip_json("-n pod-a -6 route show default");
  REQUIRE(routes6.Size() == 1);
  CHECK(std::string(routes6[0]["gateway"].GetString()) == "2001:db8:0:1::1");

  check_node_side();
  check_status(fx, *net1.begin());

  // CHECK with the ADD result as prevResult passes; a changed MAC fails it.
  std::string check_conf = fx.config(R"("prevResult": )" + add.out);
  Proc check = fx.run("CHECK", "ctr-a", pod, "default", "pod-a", check_conf);
  INFO("check: ", check.out, check.err);
  CHECK(check.exit_code == 0);
  REQUIRE(plumb::test::sh("ip -n pod-a link set dev net1 address 02:00:00:00:01:01").exit_code == 0);
  Proc check2 = fx.run("CHECK", "ctr-a", pod, "default", "pod-a", check_conf);
  CHECK(check2.exit_code != 0);
  CHECK(check2.out.find("net1") != std::string::npos);

  // DEL removes everything it made and the status; a second DEL succeeds and changes nothing.
  Proc del = fx.run("DEL", "ctr-a", pod, "default", "pod-a", fx.config());
  INFO("del: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(link_names("pod-a") == std::set<std::string>{"lo"});
  CHECK(ip_json("link show type veth").Size() == 0);
  CHECK(address_files(fx.ipam_dir()).empty());
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
  CHECK(fx.status_of("default", "pod-a").empty());
  CHECK(masq_elements().find("203.0.113.") == std::string::npos);
  Proc del2 = fx.run("DEL", "ctr-a", pod, "default", "pod-a", fx.config());
  CHECK(del2.exit_code == 0);
}

TEST_CASE("DEL works from the state record alone: the NADs, the annotation and the netns are gone") {
  Node node;
  PodFixture fx(node);
  setup_networks(fx);
  std::string pod = node.add_netns("pod-b");
  fx.add_pod("default", "pod-b", "blue,green");
  Proc add = fx.run("ADD", "ctr-b", pod, "default", "pod-b", fx.config());
  INFO(add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(address_files(fx.ipam_dir()).size() == 4);  // v4+v6 default, blue, green

  std::filesystem::remove_all(fx.store() + "/nads");
  std::filesystem::remove_all(fx.store() + "/pods");
  std::filesystem::remove(fx.default_conflist());
  node.del_netns("pod-b");  // the runtime removed the pod's namespace before DEL
  Proc del = fx.run("DEL", "ctr-b", pod, "default", "pod-b", fx.config());
  INFO(del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(ip_json("link show type veth").Size() == 0);
  CHECK(address_files(fx.ipam_dir()).empty());
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
  CHECK(masq_elements().find("203.0.113.") == std::string::npos);
}

TEST_CASE("an ADD that fails on its third attachment leaves no link, address, IP file, nftables element or record") {
  Node node;
  PodFixture fx(node);
  setup_networks(fx);
  // The third network's pool has a single address, already taken by another pod below.
  fx.add_nad("default", "tiny", bridge_nad("br-tiny", "192.0.2.0/30", fx.ipam_dir()));
  std::string first = node.add_netns("first");
  fx.add_pod("default", "first", "tiny");
  REQUIRE(fx.run("ADD", "ctr-first", first, "default", "first", fx.config()).exit_code == 0);

  auto links_before = link_names("");
  auto ruleset_before = nft_ruleset();
  auto ips_before = address_files(fx.ipam_dir());
  auto bridge_addrs_before = addrs("", "plumb0");

  std::string pod = node.add_netns("pod-c");
  fx.add_pod("default", "pod-c", "blue,green,tiny");
  Proc add = fx.run("ADD", "ctr-c", pod, "default", "pod-c", fx.config());
  INFO(add.out, add.err);
  CHECK(add.exit_code != 0);
  rapidjson::Document err;
  err.Parse(add.out.c_str());
  REQUIRE(err.IsObject());
  CHECK(err["code"].GetInt() == 101);
  CHECK(std::string(err["msg"].GetString()).find("default/tiny") != std::string::npos);

  CHECK(link_names("pod-c") == std::set<std::string>{"lo"});
  CHECK(link_names("") == links_before);  // br-blue and br-green were created by this ADD: removed again
  CHECK(nft_ruleset() == ruleset_before);
  CHECK(address_files(fx.ipam_dir()) == ips_before);
  CHECK(addrs("", "plumb0") == bridge_addrs_before);
  CHECK(PodFixture::files_under(fx.state() + "/containers/ctr-c:eth0").empty());
  CHECK(fx.status_of("default", "pod-c").empty());

  // The runtime's DEL after the failed ADD succeeds.
  CHECK(fx.run("DEL", "ctr-c", pod, "default", "pod-c", fx.config()).exit_code == 0);
}

TEST_CASE("20 pods added concurrently get 20 distinct IPs") {
  Node node;
  PodFixture fx(node);
  constexpr int kPods = 20;
  std::vector<std::string> paths;
  for (int i = 0; i < kPods; ++i) paths.push_back(node.add_netns("p" + std::to_string(i)));
  std::string conf = fx.config();
  std::vector<pid_t> pids;
  for (int i = 0; i < kPods; ++i) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      Proc p = fx.run("ADD", "ctr" + std::to_string(i), paths[static_cast<size_t>(i)], "default", "p" + std::to_string(i), conf);
      if (p.exit_code != 0) std::fprintf(stderr, "ADD %d failed: %s %s\n", i, p.out.c_str(), p.err.c_str());
      _exit(p.exit_code == 0 ? 0 : 1);
    }
    pids.push_back(pid);
  }
  int failures = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  CHECK(failures == 0);
  std::set<std::string> seen;
  for (int i = 0; i < kPods; ++i) {
    auto a = addrs("p" + std::to_string(i), "eth0");
    for (auto& x : a) {
      if (x.find('.') != std::string::npos) seen.insert(x);
    }
  }
  CHECK(seen.size() == kPods);
  CHECK(ip_json("link show master plumb0").Size() == kPods);
}

TEST_CASE("an invalid selection annotation is ignored with a warning, or fails the ADD with strictAnnotations") {
  Node node;
  PodFixture fx(node);
  setup_networks(fx);
  std::string pod = node.add_netns("pod-d");
  fx.add_pod("default", "pod-d", R"([{"name":"blue","mac":"zz:00:00:00:00:01"}])");

  Proc add = fx.run("ADD", "ctr-d", pod, "default", "pod-d", fx.config());
  INFO(add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(add.err.find("zz:00:00:00:00:01") != std::string::npos);  // the warning names the value
  CHECK(link_names("pod-d") == std::set<std::string>{"lo", "eth0"});
  REQUIRE(fx.run("DEL", "ctr-d", pod, "default", "pod-d", fx.config()).exit_code == 0);

  Proc strict = fx.run("ADD", "ctr-d", pod, "default", "pod-d", fx.config(R"("strictAnnotations": true)"));
  CHECK(strict.exit_code != 0);
  CHECK(strict.out.find("zz:00:00:00:00:01") != std::string::npos);
  CHECK(link_names("pod-d") == std::set<std::string>{"lo"});
}

TEST_CASE("an unknown NAD, a missing capability under strictAnnotations and a reused interface name fail before any change") {
  Node node;
  PodFixture fx(node);
  setup_networks(fx);
  fx.add_nad("default", "nocap", R"({"cniVersion":"1.0.0","type":"bridge","bridge":"br-nocap"})");
  std::string pod = node.add_netns("pod-e");
  auto before = link_names("");
  struct Case {
    const char* annotation;
    const char* must_name;
  } cases[] = {
      {"missing-net", "default/missing-net"},
      {R"([{"name":"nocap","mac":"02:00:00:00:00:01"}])", "mac"},
      {R"([{"name":"blue","interface":"eth0"}])", "eth0"},
  };
  for (auto& c : cases) {
    fx.add_pod("default", "pod-e", c.annotation);
    Proc add = fx.run("ADD", "ctr-e", pod, "default", "pod-e", fx.config(R"("strictAnnotations": true)"));
    INFO(c.annotation, " -> ", add.out);
    CHECK(add.exit_code != 0);
    CHECK(add.out.find(c.must_name) != std::string::npos);
    CHECK(link_names("pod-e") == std::set<std::string>{"lo"});
    CHECK(link_names("") == before);
  }
}

TEST_CASE("results are given in the config's CNI version, 0.2.0 and 1.1.0 alike") {
  Node node;
  PodFixture fx(node);
  std::string pod = node.add_netns("pod-f");
  Proc add = fx.run("ADD", "ctr-f", pod, "default", "pod-f", fx.config("", "0.2.0"));
  INFO(add.out, add.err);
  REQUIRE(add.exit_code == 0);
  rapidjson::Document r;
  r.Parse(add.out.c_str());
  REQUIRE(r.IsObject());
  CHECK(std::string(r["cniVersion"].GetString()) == "0.2.0");
  CHECK(r.HasMember("ip4"));
  CHECK(r.HasMember("ip6"));
  CHECK_FALSE(r.HasMember("interfaces"));
  REQUIRE(fx.run("DEL", "ctr-f", pod, "default", "pod-f", fx.config("", "0.2.0")).exit_code == 0);

  Proc add11 = fx.run("ADD", "ctr-g", pod, "default", "pod-f", fx.config("", "1.1.0"));
  REQUIRE(add11.exit_code == 0);
  r.Parse(add11.out.c_str());
  CHECK(std::string(r["cniVersion"].GetString()) == "1.1.0");
  CHECK(r["interfaces"].Size() == 3);
  // ADD must fail when the interface already exists in the netns.
  Proc again = fx.run("ADD", "ctr-h", pod, "default", "pod-f", fx.config("", "1.1.0"));
  CHECK(again.exit_code != 0);
  CHECK(again.out.find("eth0") != std::string::npos);
  CHECK(fx.run("DEL", "ctr-g", pod, "default", "pod-f", fx.config("", "1.1.0")).exit_code == 0);
}

TEST_CASE("a capability the NAD does not declare (mac, ips) is dropped with a warning, as Multus drops it; the rest attaches") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("default", "nocap", R"({"cniVersion":"1.0.0","type":"bridge","bridge":"br-nocap","ipam":{"type":"host-local","dataDir":")" +
                                     fx.ipam_dir() + R"(","ranges":[[{"subnet":"192.0.2.0/24"}]]}})");
  std::string pod = node.add_netns("pod-n");
  fx.add_pod("default", "pod-n", R"([{"name":"nocap","mac":"02:00:00:00:00:01","ips":["192.0.2.77/24"]}])");
  Proc add = fx.run("ADD", "ctr-n", pod, "default", "pod-n", fx.config());
  INFO(add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(add.err.find("the selection asks for \"mac\" but no plugin of the network declares the \"mac\" capability: ignored") !=
        std::string::npos);
  CHECK(add.err.find("the selection asks for \"ips\"") != std::string::npos);
  CHECK(plumb::test::ipv4_of("pod-n", "net1") == "192.0.2.2/24");  // the pool's first address, not the one asked for
  CHECK(plumb::test::link_detail("pod-n", "net1")["address"].GetString() != std::string("02:00:00:00:00:01"));
  REQUIRE(fx.run("DEL", "ctr-n", pod, "default", "pod-n", fx.config()).exit_code == 0);
}
