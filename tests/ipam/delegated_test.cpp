// ipam/delegated: an "ipam" type plumb does not implement, inside one of plumb's own drivers, is
// run with the CNI IPAM delegation protocol — here Debian's reference host-local binary copied
// under the foreign type name "ref-host-local" (a type plumb never implements natively), through
// the real plumb binary: the address is the reference plugin's, in its own data directory; DEL
// after the NAD is deleted releases it; a SIGKILLed ADD leaves nothing held after DEL. And the
// test-only foreign plugin as IPAM receives the whole plugin config and the attachment's CNI_*.
// And `ipam: {type: "dhcp"}`: Debian's reference dhcp plugin and its daemon (private socket)
// lease an address from busybox's udhcpd in a server namespace on the node's bridge; DEL releases
// it (a pool of one address serves the next pod only once the lease is released).
#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "tests/support/child_process.hpp"
#include "tests/support/foreign_plugin.hpp"
#include "tests/support/pod_fixture.hpp"

using plumb::test::ForeignBin;
using plumb::test::ip_json;
using plumb::test::ipv4_of;
using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;
using plumb::test::sh;

namespace {

std::set<std::string> held(const std::string& dir) {
  std::set<std::string> out;
  for (auto& f : plumb::test::address_files(dir)) out.insert(std::filesystem::path(f).filename().string());
  return out;
}

/// NAD default/blue: a native bridge whose IPAM is Debian's host-local copied as ref-host-local,
/// its data in `data` (returned).
std::string reference_host_local_nad(const PodFixture& fx, const ForeignBin& bin, const std::string& data) {
  bin.install_reference("host-local", "ref-host-local");
  fx.add_nad("default", "blue", R"({"cniVersion": "1.0.0", "name": "blue", "type": "bridge", "bridge": "br-blue",
    "ipam": {"type": "ref-host-local", "dataDir": ")" + data + R"(", "ranges": [[{"subnet": "198.51.100.0/24"}]]}})");
  return data;
}

}  // namespace

TEST_CASE("the reference host-local (copied as ref-host-local) as a native bridge's IPAM: ADD, CHECK, DEL after the NAD is gone") {
  Node node;
  PodFixture fx(node);
  ForeignBin bin(node);
  const std::string data = reference_host_local_nad(fx, bin, node.dir() + "/ref-ipam");
  fx.add_pod("default", "web", "blue");
  std::string pod = node.add_netns("web");
  const std::string conf = fx.config(bin.bin_dir_key());
  Proc add = fx.run("ADD", "ctr-web", pod, "default", "web", conf);
  INFO("ADD: ", add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(ipv4_of("web", "net1") == "198.51.100.2/24");
  CHECK(held(data) == std::set<std::string>{"198.51.100.2"});
  CHECK(plumb::test::read_file(data + "/blue/198.51.100.2").rfind("ctr-web", 0) == 0);
  CHECK(fx.run("CHECK", "ctr-web", pod, "default", "web", conf).exit_code == 0);

  std::filesystem::remove(fx.store() + "/nads/default-blue.yaml");
  Proc del = fx.run("DEL", "ctr-web", pod, "default", "web", conf);
  INFO("DEL: ", del.out, del.err);
  REQUIRE(del.exit_code == 0);
  CHECK(held(data).empty());
  CHECK(ip_json("link show type veth").Size() == 0);
}

TEST_CASE("a delegated IPAM gets the whole plugin config and the attachment's CNI_IFNAME (IPAM delegation protocol)") {
  Node node;
  PodFixture fx(node);
  ForeignBin bin(node);
  bin.install_fake("fake-ipam");
  // As an IPAM the fake plugin only records and returns an address: podIfname names a veth it
  // builds aside, so the bridge's own net1 is untouched.
  fx.add_nad("default", "blue", R"({"cniVersion": "1.0.0", "name": "blue", "type": "bridge", "bridge": "br-blue", "ipam": )" +
                                    bin.fake_plugin(R"("podIfname": "aside0", "address": "198.51.100.77/24")", "fake-ipam") + "}");
  fx.add_pod("default", "web", "blue");
  std::string pod = node.add_netns("web");
  Proc add = fx.run("ADD", "ctr-web", pod, "default", "web", fx.config(bin.bin_dir_key()));
  INFO("ADD: ", add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(ipv4_of("web", "net1") == "198.51.100.77/24");
  auto adds = bin.calls("ADD");
  REQUIRE(adds.size() == 1);
  CHECK(std::string(adds[0].stdin["type"].GetString()) == "bridge");  // the plugin's config, not just "ipam"
  CHECK(std::string(adds[0].stdin["name"].GetString()) == "blue");
  CHECK(std::string(adds[0].stdin["ipam"]["type"].GetString()) == "fake-ipam");
  CHECK(std::string(adds[0].env["CNI_IFNAME"].GetString()) == "net1");
  CHECK(std::string(adds[0].env["CNI_COMMAND"].GetString()) == "ADD");
  REQUIRE(fx.run("DEL", "ctr-web", pod, "default", "web", fx.config(bin.bin_dir_key())).exit_code == 0);
  auto dels = bin.calls("DEL");
  REQUIRE(dels.size() == 1);
  CHECK(std::string(dels[0].stdin["type"].GetString()) == "bridge");
  CHECK(std::string(dels[0].env["CNI_IFNAME"].GetString()) == "net1");
}

TEST_CASE("SIGKILL at every intent of an ADD whose IPAM is delegated (plumb-faulty): DEL releases the address") {
  Node node;
  PodFixture fx(node);
  ForeignBin bin(node);
  const std::string data = reference_host_local_nad(fx, bin, node.dir() + "/ref-ipam");
  fx.add_pod("default", "crash", "blue");
  std::string pod = node.add_netns("crash");
  const std::string conf = fx.config(bin.bin_dir_key());
  unsigned killed = 0;
  for (unsigned step = 1; step < 40; ++step) {
    CAPTURE(step);
    Proc add = fx.run_with(plumb::test::plumb_faulty_binary(), {{"PLUMB_FAULT_AFTER_STEP", std::to_string(step)}}, "ADD",
                           "ctr-crash", pod, "default", "crash", conf);
    Proc del = fx.run("DEL", "ctr-crash", pod, "default", "crash", conf);
    INFO(del.out, del.err);
    REQUIRE(del.exit_code == 0);
    CHECK(held(data).empty());
    CHECK(ip_json("link show type veth").Size() == 0);
    if (add.exit_code == 0) break;
    REQUIRE(add.exit_code == 128 + SIGKILL);
    ++killed;
  }
  CHECK(killed >= 5);
}

namespace {

/// A DHCP server namespace on a node bridge, and the reference dhcp plugin's daemon on the node:
/// bridge br-dhcp (the NAD's, made here so the server's port exists before the first pod),
/// veth dh0 (bridge port) / dh1 (192.0.2.1/24 in namespace dhcp-srv) where busybox's udhcpd
/// serves exactly one address, 192.0.2.100; `dhcp daemon` with its socket in the node's
/// directory. Both processes are children of the test, stopped by pid.
struct DhcpSetup {
  explicit DhcpSetup(Node& n) : node(n), sock(n.dir() + "/dhcp.sock"), leases(n.dir() + "/udhcpd.leases") {
    node.add_netns("dhcp-srv");
    REQUIRE(sh("ip link add br-dhcp type bridge && ip link set br-dhcp up && "
               "ip link add dh0 type veth peer name dh1 netns dhcp-srv && ip link set dh0 master br-dhcp up && "
               "ip -n dhcp-srv addr add 192.0.2.1/24 dev dh1 && ip -n dhcp-srv link set dh1 up").exit_code == 0);
    plumb::test::write_file(leases, "");
    plumb::test::write_file(n.dir() + "/udhcpd.conf", "start 192.0.2.100\nend 192.0.2.100\nmax_leases 1\ninterface dh1\n"
                                                      "lease_file " + leases + "\npidfile " + n.dir() + "/udhcpd.pid\n"
                                                      "option subnet 255.255.255.0\noption lease 3600\n");
    server = plumb::test::start_child({"/usr/bin/nsenter", "--net=/run/netns/dhcp-srv", "/bin/busybox", "udhcpd", "-f",
                                       "-a", "100", n.dir() + "/udhcpd.conf"}, {}, n.dir() + "/udhcpd.log");
    daemon = plumb::test::start_child({"/usr/lib/cni/dhcp", "daemon", "-socketpath", sock, "-timeout", "5s"}, {},
                                      n.dir() + "/dhcp-daemon.log");
    for (int i = 0; i < 200 && !std::filesystem::exists(sock); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    REQUIRE(std::filesystem::exists(sock));
  }
  ~DhcpSetup() {
    plumb::test::stop_child(daemon);
    plumb::test::stop_child(server);
  }
  DhcpSetup(const DhcpSetup&) = delete;
  DhcpSetup& operator=(const DhcpSetup&) = delete;

  /// udhcpd's leases as `dumpleases` prints them (written out on SIGUSR1 first).
  std::string lease_table() const {
    const auto mtime = std::filesystem::last_write_time(leases);
    ::kill(server, SIGUSR1);
    for (int i = 0; i < 100 && std::filesystem::last_write_time(leases) == mtime; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return sh("busybox dumpleases -a -f " + leases).out;
  }
  std::string logs() const {
    return "udhcpd: " + plumb::test::read_file(node.dir() + "/udhcpd.log") +
           "\ndhcp daemon: " + plumb::test::read_file(node.dir() + "/dhcp-daemon.log");
  }

  Node& node;
  std::string sock;
  std::string leases;
  pid_t server = -1;
  pid_t daemon = -1;
};

std::string mac_of(const std::string& ns, const std::string& dev) {
  return ip_json("-n " + ns + " link show dev " + dev)[0]["address"].GetString();
}

}  // namespace

TEST_CASE("ipam dhcp: the reference dhcp plugin leases the pod's address from a DHCP server in a test namespace; DEL releases it") {
  Node node;
  PodFixture fx(node);
  DhcpSetup dhcp(node);
  INFO(dhcp.logs());
  fx.add_nad("default", "lan", R"({"cniVersion": "1.0.0", "name": "lan", "type": "bridge", "bridge": "br-dhcp",
    "ipam": {"type": "dhcp", "daemonSocketPath": ")" + dhcp.sock + R"("}})");
  fx.add_pod("default", "a", "lan");
  fx.add_pod("default", "b", "lan");
  const std::string conf = fx.config(R"("delegateTimeoutSeconds": 30)");

  std::string a = node.add_netns("a");
  Proc add = fx.run("ADD", "ctr-a", a, "default", "a", conf);
  INFO("ADD a: ", add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(ipv4_of("a", "net1") == "192.0.2.100/24");
  const std::string mac_a = mac_of("a", "net1");
  CHECK(dhcp.lease_table().find(mac_a) != std::string::npos);
  CHECK(fx.run("CHECK", "ctr-a", a, "default", "a", conf).exit_code == 0);

  Proc del = fx.run("DEL", "ctr-a", a, "default", "a", conf);
  INFO("DEL a: ", del.out, del.err);
  REQUIRE(del.exit_code == 0);
  CHECK(link_names("a") == std::set<std::string>{"lo"});

  // The server has one address: pod b (another MAC, another client) gets it only because a's
  // DEL released the lease.
  std::string b = node.add_netns("b");
  add = fx.run("ADD", "ctr-b", b, "default", "b", conf);
  INFO("ADD b: ", add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(ipv4_of("b", "net1") == "192.0.2.100/24");
  const std::string mac_b = mac_of("b", "net1");
  CHECK(mac_b != mac_a);
  std::string table = dhcp.lease_table();
  CHECK(table.find(mac_b) != std::string::npos);
  CHECK(table.find(mac_a) == std::string::npos);
  CHECK(fx.run("DEL", "ctr-b", b, "default", "b", conf).exit_code == 0);
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
}
