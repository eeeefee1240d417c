// host-local IPAM on disk: allocation/release, idempotent ADD, requested addresses, exhaustion,
// dual stack, 20 concurrent allocating processes, and interoperation with the reference plugin
// (/usr/lib/cni/host-local) on one data directory: alternately, concurrently, and releasing
// each other's allocations. Nothing here touches the network; each case still runs on a fresh
// node with its data directory under node.dir().
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/base/json.hpp"
#include "ipam/ipam.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/private_node.hpp"
#include "tests/support/seccomp_child.hpp"
#include "tests/support/syscall_count.hpp"

using namespace plumb;

namespace {

constexpr const char* kReference = "/usr/lib/cni/host-local";

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

/// Names of the address files (everything but lock and last_reserved_ip.*) in `dir`.
std::set<std::string> ip_files(const std::string& dir) {
  std::set<std::string> out;
  for (auto& f : plumb::test::address_files(dir)) out.insert(std::filesystem::path(f).filename().string());
  return out;
}

/// One host-local network on disk, driven by plumb and by the reference binary.
struct Net {
  std::string name;
  std::string data_dir;
  json::Document ipam;
  std::unique_ptr<ipam::Ipam> impl;

  Net(const std::string& name_, const std::string& data_dir_, const std::string& ipam_body) : name(name_), data_dir(data_dir_) {
    std::string text = R"({"type":"host-local","dataDir":")" + data_dir + "\"," + ipam_body + "}";
    auto d = json::parse(text, "ipam");
    REQUIRE_MESSAGE(d.has_value(), text);
    ipam = std::move(*d);
    auto m = ipam::make(ipam);
    REQUIRE_MESSAGE(m.has_value(), (m ? "" : m.error().text()));
    impl = std::move(*m);
  }

  std::string dir() const { return data_dir + "/" + name; }

  ipam::Request req(const std::string& id, const std::string& ifname = "eth0",
                    std::vector<std::pair<std::string, std::string>> cni_args = {},
                    const json::Value* rc = nullptr, const json::Value* args = nullptr) const {
    return ipam::Request{id, ifname, name, &ipam, rc, args, std::move(cni_args)};
  }

  /// plumb ADD; the single address as text ("192.0.2.2/29"), failing the test on error.
  std::vector<std::string> add(const std::string& id, const std::string& ifname = "eth0") const {
    auto r = impl->add(req(id, ifname));
    REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().text()));
    std::vector<std::string> out;
    for (auto& ip : r->ips) out.push_back(ip.address.str());
    return out;
  }

  std::string netconf() const {
    return R"({"cniVersion":"1.0.0","name":")" + name + R"(","ipam":)" + json::dump(ipam) + "}";
  }

  /// Runs the reference plugin with `command`; returns its output and exit code.
  test::Proc reference(const std::string& command, const std::string& id, const std::string& ifname = "eth0") const {
    return test::run({kReference}, {{"CNI_COMMAND", command}, {"CNI_CONTAINERID", id},
                                    {"CNI_NETNS", "/proc/self/ns/net"}, {"CNI_IFNAME", ifname},
                                    {"CNI_PATH", "/usr/lib/cni"}},
                     netconf());
  }
};

/// Addresses of a reference ADD result ("ips"[].address), empty on parse failure.
std::vector<std::string> result_ips(const std::string& out) {
  std::vector<std::string> ips;
  rapidjson::Document d;
  d.Parse(out.c_str());
  if (d.HasParseError() || !d.IsObject() || !d.HasMember("ips") || !d["ips"].IsArray()) return ips;
  for (auto& e : d["ips"].GetArray()) {
    if (e.IsObject() && e.HasMember("address") && e["address"].IsString()) ips.emplace_back(e["address"].GetString());
  }
  return ips;
}

std::string addr_of(const std::string& cidr) { return cidr.substr(0, cidr.find('/')); }

/// Runs `fn` in `n` forked children released together; each returns one line on a pipe
/// ("" on failure). Children never touch doctest.
std::vector<std::string> in_children(int n, const std::function<std::string(int)>& fn) {
  int go[2], out[2];
  REQUIRE(pipe(go) == 0);
  REQUIRE(pipe(out) == 0);
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      close(go[1]);
      close(out[0]);
      char c;
      while (read(go[0], &c, 1) < 0 && errno == EINTR) {
      }
      std::string line = std::to_string(i) + " " + fn(i) + "\n";
      ssize_t w = write(out[1], line.data(), line.size());  // < PIPE_BUF: atomic
      _exit(w == static_cast<ssize_t>(line.size()) ? 0 : 1);
    }
    pids.push_back(pid);
  }
  close(go[0]);
  close(out[1]);
  close(go[1]);  // release every child at once
  std::string all;
  char buf[4096];
  for (ssize_t r; (r = read(out[0], buf, sizeof buf)) != 0;) {
    if (r < 0 && errno == EINTR) continue;
    REQUIRE(r > 0);
    all.append(buf, static_cast<size_t>(r));
  }
  close(out[0]);
  for (pid_t p : pids) {
    int st = 0;
    REQUIRE(waitpid(p, &st, 0) == p);
    CHECK(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
  }
  std::vector<std::string> lines(static_cast<size_t>(n));
  std::istringstream in(all);
  for (std::string l; std::getline(in, l);) {
    auto sp = l.find(' ');
    int idx = std::stoi(l.substr(0, sp));
    REQUIRE(idx >= 0);
    REQUIRE(idx < n);
    lines[static_cast<size_t>(idx)] = l.substr(sp + 1);
  }
  return lines;
}

}  // namespace

TEST_CASE("host-local: allocate, check, release, round robin") {
  test::Node node;
  Net net("net1", node.dir() + "/ipam", R"("ranges":[[{"subnet":"192.0.2.0/29"}]])");

  auto r = net.impl->add(net.req("c1"));
  REQUIRE(r.has_value());
  REQUIRE(r->ips.size() == 1);
  CHECK(r->ips[0].address.str() == "192.0.2.2/29");  // .1 is the gateway
  CHECK(r->ips[0].gateway->str() == "192.0.2.1");
  CHECK_FALSE(r->ips[0].interface.has_value());
  // The reference's on-disk format, byte for byte.
  CHECK(slurp(net.dir() + "/192.0.2.2") == "c1\r\neth0");
  CHECK(slurp(net.dir() + "/last_reserved_ip.0") == "192.0.2.2");
  CHECK(exists(net.dir() + "/lock"));

  CHECK(net.impl->check(net.req("c1"), *r).has_value());
  auto other = net.impl->check(net.req("c1", "eth1"), *r);
  REQUIRE_FALSE(other.has_value());
  CHECK(other.error().msg.find("192.0.2.2") != std::string::npos);

  REQUIRE(net.impl->del(net.req("c1")).has_value());
  CHECK_FALSE(exists(net.dir() + "/192.0.2.2"));
  auto gone = net.impl->check(net.req("c1"), *r);
  REQUIRE_FALSE(gone.has_value());
  CHECK(gone.error().msg.find("192.0.2.2") != std::string::npos);
  CHECK(net.impl->del(net.req("c1")).has_value());  // DEL is idempotent

  // Round robin: the next ADD continues after last_reserved_ip, not at the freed .2.
  CHECK(net.add("c2") == std::vector<std::string>{"192.0.2.3/29"});
  CHECK(net.add("c3") == std::vector<std::string>{"192.0.2.4/29"});
  CHECK(net.add("c4") == std::vector<std::string>{"192.0.2.5/29"});
  CHECK(net.add("c5") == std::vector<std::string>{"192.0.2.6/29"});
  // Wraps past the broadcast address and the gateway to the freed .2.
  CHECK(net.add("c6") == std::vector<std::string>{"192.0.2.2/29"});
  CHECK(ip_files(net.dir()) == std::set<std::string>{"192.0.2.2", "192.0.2.3", "192.0.2.4", "192.0.2.5", "192.0.2.6"});
}

TEST_CASE("host-local: a released address file is recycled: the next reservation is that inode, written before it is named; the reference sees only address files") {
  test::Node node;
  Net net("net1", node.dir() + "/ipam", R"("ranges":[[{"subnet":"192.0.2.0/29"}]])");
  const std::string pool = node.dir() + "/ipam/.plumb-recycled";
  auto inode = [](const std::string& p) {
    struct stat st {};
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    return st.st_ino;
  };
  REQUIRE(net.add("c1") == std::vector<std::string>{"192.0.2.2/29"});
  const ino_t first = inode(net.dir() + "/192.0.2.2");
  REQUIRE(net.impl->del(net.req("c1")).has_value());
  CHECK_FALSE(exists(net.dir() + "/192.0.2.2"));
  CHECK(std::distance(std::filesystem::directory_iterator(pool), std::filesystem::directory_iterator()) == 1);
  REQUIRE(net.add("c2", "net7") == std::vector<std::string>{"192.0.2.3/29"});
  CHECK(inode(net.dir() + "/192.0.2.3") == first);
  CHECK(slurp(net.dir() + "/192.0.2.3") == "c2\r\nnet7");  // the old owner's bytes gone
  CHECK(std::filesystem::is_empty(pool));
  CHECK(ip_files(net.dir()) == std::set<std::string>{"192.0.2.3"});
  // The reference releases and allocates beside it, reading the same directory.
  auto ref = net.reference("DEL", "c2", "net7");
  CHECK_MESSAGE(ref.exit_code == 0, ref.out);
  CHECK(ip_files(net.dir()).empty());
  ref = net.reference("ADD", "c3");
  CHECK_MESSAGE(ref.exit_code == 0, ref.out);
  CHECK(result_ips(ref.out) == std::vector<std::string>{"192.0.2.4/29"});
}

TEST_CASE("host-local: a link planted at the reserve temp file is never written through (removed where it is used)") {
  test::Node node;
  Net net("net1", node.dir() + "/ipam", R"("ranges":[[{"subnet":"192.0.2.0/29"}]])");
  REQUIRE(net.add("c1") == std::vector<std::string>{"192.0.2.2/29"});  // the network's directory exists
  const std::string victim = node.dir() + "/victim";
  { std::ofstream(victim) << "precious"; }
  std::filesystem::create_symlink(victim, net.dir() + "/.plumb-reserve");
  // Unnamed files (O_TMPFILE): the temporary name is not used at all.
  CHECK(net.add("c2") == std::vector<std::string>{"192.0.2.3/29"});
  CHECK(slurp(net.dir() + "/192.0.2.3") == "c2\r\neth0");
  CHECK(std::filesystem::is_symlink(net.dir() + "/.plumb-reserve"));
  // A filesystem without unnamed files (seccomp in a child): the link is removed, then the
  // temporary file made in its place (one name per network: the reservation holds the lock).
  CHECK(test::in_child_refusing(test::Refuse::kUnnamedFiles, [&] {
    auto r = net.impl->add(net.req("c3"));
    return r && r->ips.size() == 1 && r->ips[0].address.str() == "192.0.2.4/29";
  }));
  CHECK(slurp(net.dir() + "/192.0.2.4") == "c3\r\neth0");
  CHECK(slurp(victim) == "precious");
  size_t links = 0;
  for (const auto& e : std::filesystem::directory_iterator(net.dir())) links += e.is_symlink() ? 1 : 0;
  CHECK(links == 0);
  CHECK_FALSE(std::filesystem::exists(net.dir() + "/.plumb-reserve"));
}

TEST_CASE("host-local: repeated ADD returns the addresses already held") {
  test::Node node;
  Net net("net1", node.dir() + "/ipam", R"("subnet":"192.0.2.0/24","routes":[{"dst":"0.0.0.0/0"}])");
  auto first = net.add("c1");
  CHECK(net.add("c1") == first);
  CHECK(net.add("c1") == first);
  CHECK(ip_files(net.dir()).size() == 1);
  // Another interface of the same container is another attachment.
  auto eth1 = net.add("c1", "eth1");
  CHECK(eth1 != first);
  CHECK(ip_files(net.dir()).size() == 2);
  // Routes come back as configured.
  auto r = net.impl->add(net.req("c1"));
  REQUIRE(r.has_value());
  REQUIRE(r->routes.size() == 1);
  CHECK(r->routes[0].dst.str() == "0.0.0.0/0");
  // DEL of eth0 leaves eth1's address alone.
  REQUIRE(net.impl->del(net.req("c1", "eth0")).has_value());
  CHECK(ip_files(net.dir()) == std::set<std::string>{addr_of(eth1[0])});
}

TEST_CASE("host-local: requested addresses (CNI_ARGS IP, args.cni.ips, runtimeConfig.ips)") {
  test::Node node;
  Net net("net1", node.dir() + "/ipam",
          R"("ranges":[[{"subnet":"192.0.2.0/24"}],[{"subnet":"2001:db8::/64"}]])");

  auto r = net.impl->add(net.req("c1", "eth0", {{"IgnoreUnknown", "1"}, {"IP", "192.0.2.50,2001:db8::50"}}));
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().text()));
  REQUIRE(r->ips.size() == 2);
  CHECK(r->ips[0].address.str() == "192.0.2.50/24");
  CHECK(r->ips[1].address.str() == "2001:db8::50/64");

  // Taken by c1: an error naming the address, and nothing left behind for c2.
  json::Document rc = *json::parse(R"({"ips":["192.0.2.50/24"]})", "rc");
  auto taken = net.impl->add(net.req("c2", "eth0", {}, &rc));
  REQUIRE_FALSE(taken.has_value());
  CHECK(taken.error().cni_code == cni_code::kIpamExhausted);
  CHECK(taken.error().msg.find("192.0.2.50") != std::string::npos);
  CHECK(ip_files(net.dir()) == std::set<std::string>{"192.0.2.50", "2001:db8::50"});

  // Dual stack rollback: v4 free, v6 taken -> the v4 address is released again.
  json::Document args = *json::parse(R"({"cni":{"ips":["192.0.2.60","2001:db8::50"]}})", "args");
  auto half = net.impl->add(net.req("c3", "eth0", {}, nullptr, &args));
  REQUIRE_FALSE(half.has_value());
  CHECK(half.error().cni_code == cni_code::kIpamExhausted);
  CHECK(half.error().msg.find("2001:db8::50") != std::string::npos);
  CHECK_FALSE(exists(net.dir() + "/192.0.2.60"));

  // Outside every range, and the gateway.
  auto outside = net.impl->add(net.req("c4", "eth0", {{"IP", "198.51.100.7"}}));
  REQUIRE_FALSE(outside.has_value());
  CHECK(outside.error().cni_code == cni_code::kIpamExhausted);
  CHECK(outside.error().msg.find("198.51.100.7") != std::string::npos);
  auto gw = net.impl->add(net.req("c4", "eth0", {{"IP", "192.0.2.1"}}));
  REQUIRE_FALSE(gw.has_value());
  CHECK(gw.error().cni_code == cni_code::kIpamExhausted);
  CHECK(gw.error().msg.find("192.0.2.1") != std::string::npos);
  CHECK(gw.error().msg.find("gateway") != std::string::npos);

  // args.cni.ips alone works; the other family is allocated normally.
  json::Document args2 = *json::parse(R"({"cni":{"ips":["192.0.2.70"]}})", "args");
  auto ok = net.impl->add(net.req("c5", "eth0", {}, nullptr, &args2));
  REQUIRE(ok.has_value());
  CHECK(ok->ips[0].address.str() == "192.0.2.70/24");
  CHECK(ok->ips[1].address.addr.family == AF_INET6);
  CHECK(slurp(net.dir() + "/192.0.2.70") == "c5\r\neth0");

  // A malformed request is a config error naming its source.
  auto bad = net.impl->add(net.req("c6", "eth0", {{"IP", "192.0.2.x"}}));
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().cni_code == cni_code::kInvalidConfig);
  CHECK(bad.error().msg.find("CNI_ARGS IP") != std::string::npos);
}

TEST_CASE("host-local: exhaustion names the range") {
  test::Node node;
  Net small("net30", node.dir() + "/ipam", R"("subnet":"192.0.2.0/30")");
  CHECK(small.add("a") == std::vector<std::string>{"192.0.2.2/30"});  // .0 network, .1 gateway, .3 broadcast
  auto full = small.impl->add(small.req("b"));
  REQUIRE_FALSE(full.has_value());
  CHECK(full.error().cni_code == cni_code::kIpamExhausted);
  CHECK(full.error().msg.find("no free address in 192.0.2.0/30 (192.0.2.1-192.0.2.2)") != std::string::npos);
  CHECK(ip_files(small.dir()).size() == 1);
  // Freeing makes room again.
  REQUIRE(small.impl->del(small.req("a")).has_value());
  CHECK(small.add("b") == std::vector<std::string>{"192.0.2.2/30"});

  Net part("net24", node.dir() + "/ipam", R"("ranges":[[{"subnet":"192.0.2.0/24","rangeStart":"192.0.2.252"}]])");
  for (int i = 0; i < 3; ++i) part.add("c" + std::to_string(i));
  auto e = part.impl->add(part.req("c9"));
  REQUIRE_FALSE(e.has_value());
  CHECK(e.error().msg.find("no free address in 192.0.2.0/24 (192.0.2.252-192.0.2.254)") != std::string::npos);
}

TEST_CASE("host-local: dual stack takes one address per range set") {
  test::Node node;
  Net net("dual", node.dir() + "/ipam",
          R"("ranges":[[{"subnet":"192.0.2.0/24","gateway":"192.0.2.254"}],[{"subnet":"2001:db8:1::/64"}]])");
  auto r = net.impl->add(net.req("c1"));
  REQUIRE(r.has_value());
  REQUIRE(r->ips.size() == 2);
  CHECK(r->ips[0].address.str() == "192.0.2.1/24");
  CHECK(r->ips[0].gateway->str() == "192.0.2.254");
  CHECK(r->ips[1].address.str() == "2001:db8:1::2/64");
  CHECK(r->ips[1].gateway->str() == "2001:db8:1::1");
  CHECK(slurp(net.dir() + "/2001:db8:1::2") == "c1\r\neth0");
  CHECK(slurp(net.dir() + "/last_reserved_ip.0") == "192.0.2.1");
  CHECK(slurp(net.dir() + "/last_reserved_ip.1") == "2001:db8:1::2");
  CHECK(net.impl->check(net.req("c1"), *r).has_value());
  REQUIRE(net.impl->del(net.req("c1")).has_value());
  CHECK(ip_files(net.dir()).empty());
}

TEST_CASE("host-local: DEL of unknown containers, bad network names, legacy files") {
  test::Node node;
  const std::string data = node.dir() + "/ipam";
  Net net("net1", data, R"("subnet":"192.0.2.0/24")");
  CHECK(net.impl->del(net.req("nobody")).has_value());
  CHECK_FALSE(exists(net.dir()));  // DEL creates nothing

  for (const char* bad : {"..", ".", "a/b", "../escape"}) {
    ipam::Request rq = net.req("c1");
    rq.network_name = bad;
    auto r = net.impl->add(rq);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().cni_code == cni_code::kInvalidConfig);
    CHECK_FALSE(net.impl->del(rq).has_value());
  }
  CHECK_FALSE(exists(node.dir() + "/escape"));
  CHECK_FALSE(exists(data));

  // A file written by an old plugin (ID only, no ifname) is released by DEL of that ID.
  auto c2 = net.add("c2");
  {
    std::ofstream f(net.dir() + "/192.0.2.200");
    f << "legacy-id";
  }
  REQUIRE(net.impl->del(net.req("legacy-id")).has_value());
  CHECK(ip_files(net.dir()) == std::set<std::string>{addr_of(c2[0])});
}

TEST_CASE("host-local: resolvConf feeds dns") {
  test::Node node;
  std::string rc = node.dir() + "/resolv.conf";
  {
    std::ofstream f(rc);
    f << "nameserver 192.0.2.53\nsearch example.test\noptions ndots:3\n";
  }
  Net net("net1", node.dir() + "/ipam", R"("subnet":"192.0.2.0/24","resolvConf":")" + rc + "\"");
  auto r = net.impl->add(net.req("c1"));
  REQUIRE(r.has_value());
  CHECK(r->dns.nameservers == std::vector<std::string>{"192.0.2.53"});
  CHECK(r->dns.search == std::vector<std::string>{"example.test"});
  CHECK(r->dns.options == std::vector<std::string>{"ndots:3"});
}

TEST_CASE("host-local: 20 concurrent processes get 20 distinct addresses") {
  test::Node node;
  Net net("conc", node.dir() + "/ipam", R"("subnet":"192.0.2.0/24")");
  auto lines = in_children(20, [&](int i) -> std::string {
    auto r = net.impl->add(net.req("c" + std::to_string(i)));
    if (!r || r->ips.size() != 1) return "ERR " + (r ? std::string("count") : r.error().text());
    return r->ips[0].address.addr.str();
  });
  std::set<std::string> ips;
  for (size_t i = 0; i < lines.size(); ++i) {
    INFO("child ", i, ": ", lines[i]);
    CHECK(lines[i].rfind("192.0.2.", 0) == 0);
    ips.insert(lines[i]);
    CHECK(slurp(net.dir() + "/" + lines[i]) == "c" + std::to_string(i) + "\r\neth0");
  }
  CHECK(ips.size() == 20);
  CHECK(ip_files(net.dir()) == ips);
}

TEST_CASE("host-local: interoperates with the reference plugin on one data directory") {
  test::Node node;
  REQUIRE(exists(kReference));
  Net net("interop", node.dir() + "/ipam", R"("ranges":[[{"subnet":"192.0.2.0/26"}]])");

  // Alternate: reference, plumb, reference, plumb. Round robin carries across both.
  auto p = net.reference("ADD", "ref1");
  INFO("reference: ", p.out, p.err);
  REQUIRE(p.exit_code == 0);
  CHECK(result_ips(p.out) == std::vector<std::string>{"192.0.2.2/26"});
  CHECK(net.add("plumb1") == std::vector<std::string>{"192.0.2.3/26"});
  p = net.reference("ADD", "ref2");
  REQUIRE(p.exit_code == 0);
  CHECK(result_ips(p.out) == std::vector<std::string>{"192.0.2.4/26"});
  CHECK(net.add("plumb2") == std::vector<std::string>{"192.0.2.5/26"});
  // Same bytes on disk from both writers.
  CHECK(slurp(net.dir() + "/192.0.2.2") == "ref1\r\neth0");
  CHECK(slurp(net.dir() + "/192.0.2.3") == "plumb1\r\neth0");

  // plumb's repeated ADD finds what the reference allocated; CHECK both ways.
  CHECK(net.add("ref2") == std::vector<std::string>{"192.0.2.4/26"});
  p = net.reference("CHECK", "plumb1");
  CHECK(p.exit_code == 0);

  // Each releases the other's allocations.
  REQUIRE(net.impl->del(net.req("ref1")).has_value());
  CHECK_FALSE(exists(net.dir() + "/192.0.2.2"));
  p = net.reference("DEL", "plumb1");
  CHECK(p.exit_code == 0);
  CHECK_FALSE(exists(net.dir() + "/192.0.2.3"));
  CHECK(ip_files(net.dir()) == std::set<std::string>{"192.0.2.4", "192.0.2.5"});

  // Concurrently: 8 reference processes and 8 plumb processes on the same directory.
  constexpr int kEach = 8;
  auto lines = in_children(2 * kEach, [&](int i) -> std::string {
    std::string id = (i % 2 ? "cp" : "cr") + std::to_string(i);
    if (i % 2 == 0) {
      auto pr = net.reference("ADD", id);
      auto ips = result_ips(pr.out);
      if (pr.exit_code != 0 || ips.size() != 1) return "ERR reference " + pr.out + pr.err;
      return addr_of(ips[0]);
    }
    auto r = net.impl->add(net.req(id));
    if (!r || r->ips.size() != 1) return "ERR plumb " + (r ? std::string("count") : r.error().text());
    return r->ips[0].address.addr.str();
  });
  std::set<std::string> ips{"192.0.2.4", "192.0.2.5"};
  for (size_t i = 0; i < lines.size(); ++i) {
    INFO("child ", i, ": ", lines[i]);
    REQUIRE(lines[i].rfind("192.0.2.", 0) == 0);
    CHECK(ips.insert(lines[i]).second);  // never given out twice
    std::string id = (i % 2 ? "cp" : "cr") + std::to_string(i);
    CHECK(slurp(net.dir() + "/" + lines[i]) == id + "\r\neth0");
  }
  CHECK(ips.size() == 2 + 2 * kEach);
  CHECK(ip_files(net.dir()) == ips);

  // Cross release: the reference frees plumb's, plumb frees the reference's.
  for (int i = 0; i < 2 * kEach; ++i) {
    std::string id = (i % 2 ? "cp" : "cr") + std::to_string(i);
    if (i % 2) {
      auto d = net.reference("DEL", id);
      CHECK(d.exit_code == 0);
    } else {
      CHECK(net.impl->del(net.req(id)).has_value());
    }
  }
  CHECK(ip_files(net.dir()) == std::set<std::string>{"192.0.2.4", "192.0.2.5"});
  p = net.reference("DEL", "ref2");
  CHECK(p.exit_code == 0);
  CHECK(net.impl->del(net.req("plumb2")).has_value());
  CHECK(ip_files(net.dir()).empty());
}

TEST_CASE("host-local: plumb and the reference both wait for flock on <dataDir>/<network>/lock") {
  test::Node node;
  Net net("locked", node.dir() + "/ipam", R"("subnet":"192.0.2.0/24")");
  REQUIRE(net.add("first") == std::vector<std::string>{"192.0.2.2/24"});  // creates dir and lock file
  int lock = open((net.dir() + "/lock").c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(lock >= 0);

  // While this process holds the lock, neither allocator may finish an ADD.
  for (bool reference : {false, true}) {
    INFO("allocator: ", (reference ? "reference" : "plumb"));
    REQUIRE(flock(lock, LOCK_EX) == 0);
    std::string id = reference ? "waits-ref" : "waits-plumb";
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      bool ok = reference ? net.reference("ADD", id).exit_code == 0 : net.impl->add(net.req(id)).has_value();
      _exit(ok ? 0 : 1);
    }
    usleep(500 * 1000);
    int st = 0;
    CHECK(waitpid(pid, &st, WNOHANG) == 0);  // still blocked on the lock
    CHECK(ip_files(net.dir()).size() == (reference ? 2u : 1u));
    REQUIRE(flock(lock, LOCK_UN) == 0);
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
    CHECK(ip_files(net.dir()).size() == (reference ? 3u : 2u));
  }
  close(lock);
}

TEST_CASE("host-local: plumb's fast paths: a first allocation reads no file, a DEL with the held addresses reads only theirs") {
  test::Node node;
  Net net("fast", node.dir() + "/ipam", R"("ranges":[[{"subnet":"192.0.2.0/24"}],[{"subnet":"2001:db8:1::/64"}]])");
  auto first = net.impl->add(net.req("c1"));
  REQUIRE(first.has_value());
  // first_allocation: the caller vouches that c1/eth0 holds nothing, so no look-up happens and a
  // second address of each family is taken (without it, the held ones come back).
  ipam::Request vouched = net.req("c1");
  vouched.first_allocation = true;
  auto second = net.impl->add(vouched);
  REQUIRE(second.has_value());
  REQUIRE(second->ips.size() == 2);
  CHECK(second->ips[0].address.addr != first->ips[0].address.addr);
  CHECK(second->ips[1].address.addr != first->ips[1].address.addr);
  CHECK(ip_files(net.dir()).size() == 4);

  // DEL with the held addresses removes exactly their files (one per range set: no scan), so the
  // other pair of c1/eth0 stays; a DEL without them scans and removes it.
  ipam::Request del = net.req("c1");
  del.held = {second->ips[0].address.addr, second->ips[1].address.addr};
  REQUIRE(net.impl->del(del).has_value());
  CHECK(ip_files(net.dir()) == std::set<std::string>{first->ips[0].address.addr.str(), first->ips[1].address.addr.str()});
  // A held address whose file names another owner is not removed, and the scan runs.
  auto other = net.add("c2");
  ipam::Request wrong = net.req("c1");
  wrong.held = {*IpAddr::parse(addr_of(other[0]))};
  REQUIRE(net.impl->del(wrong).has_value());
  CHECK(ip_files(net.dir()) == std::set<std::string>{addr_of(other[0]), addr_of(other[1])});

  // last_reserved_ip is rewritten in place, cut to the new address's length.
  json::Document longer = *json::parse(R"({"ips":["192.0.2.100/24"]})", "rc");
  REQUIRE(net.impl->add(net.req("c3", "eth0", {}, &longer)).has_value());
  CHECK(slurp(net.dir() + "/last_reserved_ip.0") == "192.0.2.100");
  json::Document shorter = *json::parse(R"({"ips":["192.0.2.9/24"]})", "rc");
  REQUIRE(net.impl->add(net.req("c4", "eth0", {}, &shorter)).has_value());
  CHECK(slurp(net.dir() + "/last_reserved_ip.0") == "192.0.2.9");
}

TEST_CASE("host-local: an empty address file (an allocator killed between creating and writing it) is reclaimed by the allocation that meets it; a DEL with the held addresses looks at no other file") {
  test::Node node;
  Net net("leftover", node.dir() + "/ipam", R"("ranges":[[{"subnet":"192.0.2.0/24"}]])");
  auto first = net.add("c1");  // 192.0.2.2: the directory, its lock and last_reserved_ip.0 exist
  REQUIRE(first == std::vector<std::string>{"192.0.2.2/24"});
  // Two crash leftovers: empty files at the next candidate and further on.
  { std::ofstream(net.dir() + "/192.0.2.3"); }
  { std::ofstream(net.dir() + "/192.0.2.9"); }
  REQUIRE(slurp(net.dir() + "/192.0.2.3").empty());

  // The DEL of c1 with its held address removes that file and looks at nothing else: the
  // leftovers stay (a DEL that stats every file of the network costs more with every pod).
  ipam::Request del = net.req("c1");
  del.held = {*IpAddr::parse("192.0.2.2")};
  REQUIRE(net.impl->del(del).has_value());
  CHECK(ip_files(net.dir()) == std::set<std::string>{"192.0.2.3", "192.0.2.9"});

  // The next allocation's candidate is 192.0.2.3: the empty file is nobody's, so it is taken.
  ipam::Request vouched = net.req("c2");
  vouched.first_allocation = true;
  auto second = net.impl->add(vouched);
  REQUIRE_MESSAGE(second.has_value(), (second ? "" : second.error().text()));
  REQUIRE(second->ips.size() == 1);
  CHECK(second->ips[0].address.addr.str() == "192.0.2.3");
  CHECK(slurp(net.dir() + "/192.0.2.3") == "c2\r\neth0");  // the reference's format
  // A file with an owner is never reclaimed: the allocation after it moves on.
  auto third = net.add("c3");
  CHECK(third == std::vector<std::string>{"192.0.2.4/24"});
  CHECK(slurp(net.dir() + "/192.0.2.9").empty());  // not met yet: still there
}

TEST_CASE(
    "host-local: a store opens its network's directory by path, never the data directory on its own: an ADD opens 4 "
    "files (last_reserved_ip once), a DEL 3") {
  test::Node node;
  Net net("opens", node.dir() + "/ipam", R"("ranges":[[{"subnet":"192.0.2.0/24"}]])");
  // A first pod makes the directory, its lock, last_reserved_ip.0 and the recycled files' pool.
  auto warm = net.impl->add(net.req("c0"));
  REQUIRE(warm.has_value());
  ipam::Request warm_del = net.req("c0");
  warm_del.held = {warm->ips[0].address.addr};
  REQUIRE(net.impl->del(warm_del).has_value());

  ipam::Request add = net.req("c1");
  add.first_allocation = true;
  cni::CniResult got;
  const long add_opens = test::count_syscalls("openat", [&] {
    auto r = net.impl->add(add);
    REQUIRE(r.has_value());
    got = *r;
  });
  ipam::Request del = net.req("c1");
  del.held = {got.ips[0].address.addr};
  const long del_opens = test::count_syscalls("openat", [&] { REQUIRE(net.impl->del(del).has_value()); });
  // ADD: <dataDir>/<network>, its lock, last_reserved_ip.0 (read, then rewritten through the same
  // descriptor), the recycled file written before it is named. DEL: the directory, its lock, the
  // held address's file.
  CHECK(add_opens == 4);
  CHECK(del_opens == 3);
  CHECK(ip_files(net.dir()).empty());

  // Rewritten through that descriptor, last_reserved_ip.0 holds the new address alone: a longer
  // content is cut (the reference reads the whole file as the address).
  { std::ofstream(net.dir() + "/last_reserved_ip.0") << "192.0.2.100   \n"; }
  ipam::Request next = net.req("c2");
  next.first_allocation = true;
  auto r = net.impl->add(next);
  REQUIRE(r.has_value());
  CHECK(r->ips[0].address.addr.str() == "192.0.2.101");
  CHECK(slurp(net.dir() + "/last_reserved_ip.0") == "192.0.2.101");
}
