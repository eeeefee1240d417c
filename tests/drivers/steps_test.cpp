// The typed steps and their executors (drivers/steps.cpp): each step's inverse as the journal
// records it (golden JSON, no kernel); a driver run with a RecordingExecutor: its steps and their
// inverses asserted while the kernel is left untouched (a private node, read only); and the undo
// operations that invert the steps, run against the kernel.
#include "drivers/steps.hpp"

#include <doctest/doctest.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include "drivers/undo.hpp"
#include "engine/base/json.hpp"
#include "engine/base/netns.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/route.hpp"
#include "engine/kernel/rule.hpp"
#include "engine/kernel/tun.hpp"
#include "engine/netlink/socket.hpp"
#include "tests/support/driver_harness.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;

namespace {

IpPrefix prefix(const char* text) {
  auto p = IpPrefix::parse(text);
  REQUIRE(p);
  return *p;
}

/// The inverse of `step` as the journal would record it ("" when none), and whether it is
/// rollback-only.
std::pair<std::string, bool> recorded(drivers::Context& ctx, const drivers::steps::Step& step) {
  auto inv = drivers::steps::inverse_of(ctx, step);
  REQUIRE(inv);
  if (!*inv) return {"", false};
  return {json::dump(drivers::undo::encode((*inv)->op)), (*inv)->rollback_only};
}

}  // namespace

TEST_CASE("each step's inverse: the operation the journal records, rollback-only where the change is shared") {
  drivers::Context ctx;
  CHECK(recorded(ctx, drivers::steps::AddNodeAddress{7, "brs", prefix("198.51.100.1/24"), true, true}) ==
        std::pair<std::string, bool>{
            R"({"op":"addr_del","ifname":"brs","prefix":"198.51.100.1/24","ifUnknown":"skip"})", true});
  CHECK(
      recorded(ctx, drivers::steps::AddNodeAddress{7, "brs", prefix("198.51.100.1/24"), true, true, "brs", "veth1"}) ==
      std::pair<std::string, bool>{R"({"op":"addr_del","ifname":"brs","prefix":"198.51.100.1/24","bridge":"brs",)"
                                   R"("port":"veth1","ifUnknown":"skip"})",
                                   true});
  CHECK(recorded(ctx, drivers::steps::AddNodeAddress{7, "brs", prefix("2001:db8::1/64"), true, false}) ==
        std::pair<std::string, bool>{R"({"op":"addr_del","ifname":"brs","prefix":"2001:db8::1/64","ifUnknown":"skip"})",
                                     false});
  CHECK(recorded(ctx, drivers::steps::RemoveNodeAddress{7, "brs", prefix("198.51.100.200/24")}) ==
        std::pair<std::string, bool>{
            R"({"op":"addr_restore","ifname":"brs","prefix":"198.51.100.200/24","ifUnknown":"skip"})", true});
  link::BridgeSpec br{"brs", 0, std::nullopt, false};
  CHECK(recorded(ctx, drivers::steps::CreateBridge{br}) ==
        std::pair<std::string, bool>{R"({"op":"bridge_del_if_unused","name":"brs"})", true});
  CHECK(recorded(ctx, drivers::steps::FlushConntrack{}) == std::pair<std::string, bool>{"", false});
}

TEST_CASE(
    "a pod link's creation records its deletion in the pod, by group when made in one; a pod sysctl records none") {
  drivers::Context ctx;
  link::MacvlanSpec mv;
  mv.name = "net1";
  mv.group = link::kPodLinkGroup;
  CHECK(recorded(ctx, drivers::steps::CreatePodLink{"net1", link::kPodLinkGroup, false, mv}) ==
        std::pair<std::string, bool>{R"({"op":"link_del","where":"pod","name":"net1","group":1886154082})", false});
  CHECK(recorded(ctx, drivers::steps::CreatePodLink{"net1", std::nullopt, true, drivers::steps::DummyLink{}}) ==
        std::pair<std::string, bool>{R"({"op":"link_del","where":"pod","name":"net1"})", false});
  CHECK(recorded(ctx, drivers::steps::WritePodSysctl{"net/ipv6/conf/net1/ndisc_notify", "1"}) ==
        std::pair<std::string, bool>{"", false});
}

TEST_CASE("a pod tap's creation records its deletion; setting up a pod link records one only when it renames it") {
  drivers::Context ctx;
  CHECK(
      recorded(ctx, drivers::steps::CreatePodTap{tun::TapSpec{"tap1a2b3c4d", false, std::nullopt, std::nullopt}, ""}) ==
      std::pair<std::string, bool>{R"({"op":"link_del","where":"pod","name":"tap1a2b3c4d"})", false});
  link::LinkChange rename;
  rename.name = "tap1";
  rename.mtu_bytes = 1400;
  CHECK(recorded(ctx, drivers::steps::SetUpPodLink{9, rename}) ==
        std::pair<std::string, bool>{R"({"op":"link_del","where":"pod","name":"tap1"})", false});
  link::LinkChange up;
  up.up = true;
  up.master_index = 3;
  CHECK(recorded(ctx, drivers::steps::SetUpPodLink{9, up}) == std::pair<std::string, bool>{"", false});
}

TEST_CASE("steps on an attachment's own links and node forwarding record nothing: the link's deletion covers them") {
  drivers::Context ctx;
  using drivers::steps::Ns;
  route::Route r;
  r.dst = prefix("198.51.100.5/32");
  r.oif = 4;
  link::LinkChange up;
  up.up = true;
  for (const drivers::steps::Step& step : std::vector<drivers::steps::Step>{
           drivers::steps::SetUpNodeLink{4, up},
           drivers::steps::AddOwnLinkAddress{Ns::kNode, 4, prefix("198.51.100.1/32"), true},
           drivers::steps::AddOwnLinkRoute{Ns::kNode, r, true}, drivers::steps::RemoveOwnLinkRoute{Ns::kPod, r},
           drivers::steps::WriteNodeLinkSysctl{"net/ipv6/conf/veth1/accept_ra", "0"},
           drivers::steps::EnableForwarding{AF_INET}}) {
    CAPTURE(drivers::steps::name_of(step));
    CHECK(recorded(ctx, step) == std::pair<std::string, bool>{"", false});
  }
}

TEST_CASE("a bridge's own changes record nothing; the VLAN gateway veth records its deletion, rollback only") {
  drivers::Context ctx;
  link::LinkChange up;
  up.up = true;
  for (const drivers::steps::Step& step : std::vector<drivers::steps::Step>{
           drivers::steps::SetUpBridge{3, "brs", up}, drivers::steps::SetBridgePort{4, true, true},
           drivers::steps::SetPortVlans{4, "veth1", {1}, {{100, true, true}, {200, false, false}}}}) {
    CAPTURE(drivers::steps::name_of(step));
    CHECK(recorded(ctx, step) == std::pair<std::string, bool>{"", false});
  }
  const link::VethSpec gw{"vetha1b2c3d4", "brs.100", -1, 1500, std::nullopt, std::nullopt};
  CHECK(recorded(ctx, drivers::steps::CreateSharedVeth{gw}) ==
        std::pair<std::string, bool>{R"({"op":"link_del","where":"node","name":"brs.100"})", true});
}

TEST_CASE(
    "calls record before they run: a pod veth pair its host end's deletion, an IPAM its release (none when "
    "announced), a delegated plugin its DEL with the exact config") {
  drivers::Context ctx;
  ctx.network = "default-net";
  ctx.ifname = "eth0";
  ctx.cni_args = {{"K8S_POD_NAME", "p"}};
  auto encoded = [&](const drivers::steps::Call& call) -> std::pair<std::string, bool> {
    auto inv = drivers::steps::inverse_of(ctx, call);
    if (!inv) return {"", false};
    return {json::dump(drivers::undo::encode(inv->op)), inv->rollback_only};
  };
  link::VethSpec veth{"veth4ba7bfd8", "eth0", -1, 0, std::nullopt, std::nullopt};
  CHECK(encoded(drivers::steps::CreatePodVeth{veth}) ==
        std::pair<std::string, bool>{R"({"op":"link_del","where":"node","name":"veth4ba7bfd8"})", false});

  auto conf = json::parse(R"({"type": "bridge", "ipam": {"type": "host-local", "dataDir": "/run/plumb-test-ipam",
    "ranges": [[{"subnet": "203.0.113.0/24"}]]}})",
                          "test");
  REQUIRE(conf);
  auto use = drivers::parse_ipam(*conf, drivers::ParseInput{"default-net", "eth0", {}});
  REQUIRE(use);
  // The state-v3 fixture's ipam_release (0-eth0), its dataDir aside.
  CHECK(encoded(drivers::steps::AllocateAddresses{&*use, {}, false}) ==
        std::pair<std::string, bool>{
            R"({"op":"ipam_release","ipam":{"type":"host-local","dataDir":"/run/plumb-test-ipam",)"
            R"("ranges":[[{"subnet":"203.0.113.0/24"}]]},"network":"default-net","ifname":"eth0"})",
            false});
  CHECK(encoded(drivers::steps::AllocateAddresses{&*use, {}, true}) == std::pair<std::string, bool>{"", false});
  // A delegated IPAM (a type plumb does not implement, found in binDir): its DEL with the whole
  // plugin config (CNI IPAM delegation).
  auto whole = json::parse(R"({"type": "bridge", "ipam": {"type": "true"}})", "test");
  REQUIRE(whole);
  drivers::ParseInput in{"default-net", "eth0", {}};
  in.plugin_search.dirs = {"/bin"};
  auto delegated = drivers::parse_ipam(*whole, in);
  REQUIRE_MESSAGE(delegated, delegated.error().text());
  CHECK(encoded(drivers::steps::AllocateAddresses{&*delegated, {}, false}) ==
        std::pair<std::string, bool>{R"({"op":"delegate.del","type":"true","config":{"type":"bridge","ipam":)"
                                     R"({"type":"true"}},"ifname":"eth0","args":")" +
                                         cni::delegate_args(ctx.cni_args) + R"("})",
                                     false});

  auto plugin = json::parse(R"({"cniVersion": "1.0.0", "type": "foreign", "key": 1})", "test");
  REQUIRE(plugin);
  drivers::steps::RunPlugin run{"foreign",
                                "/opt/cni/bin/foreign",
                                {"ADD", "ctr", "/run/netns/p", "eth0", "K=V"},
                                "{}",
                                "1.0.0",
                                drivers::undo::DelegateDel{"foreign", json::clone(*plugin), "eth0", "K=V"}};
  CHECK(encoded(std::move(run)) ==
        std::pair<std::string, bool>{R"({"op":"delegate.del","type":"foreign","config":{"cniVersion":"1.0.0",)"
                                     R"("type":"foreign","key":1},"ifname":"eth0","args":"K=V"})",
                                     false});
}

TEST_CASE("sbr's source rules record the one sbr.restore the caller built, covering its later route steps") {
  drivers::Context ctx;
  drivers::steps::AddSourceRules rules;
  rules.rules = {rule::Rule{prefix("198.51.100.3/32"), 4242}};
  rules.restore.rules = {"198.51.100.3/32 4242"};
  CHECK(recorded(ctx, rules) ==
        std::pair<std::string, bool>{
            R"({"op":"sbr.restore","rules":["198.51.100.3/32 4242"],"tables":[],"mainRoutes":[]})", false});
}

TEST_CASE("moving a node device into the pod records its restore with its node name, index, MTU and MAC") {
  drivers::Context ctx;
  link::LinkInfo dev;
  dev.index = 11;
  dev.name = "hd0";
  dev.hwaddr = {0x02, 0xdd, 0, 0, 0, 0x01};
  dev.mtu_bytes = 1500;
  CHECK(
      recorded(ctx, drivers::steps::MoveLinkIntoPod{dev, "net2"}) ==
      std::pair<std::string, bool>{
          R"({"op":"host-device.restore","name":"hd0","ifname":"net2","index":11,"mtu":1500,"mac":"02:dd:00:00:00:01"})",
          false});
}

TEST_CASE("admitting a pod in the firewall records its removal; isolating a bridge records the release of its claim") {
  drivers::Context ctx;
  nft::FirewallPod pod;
  pod.container_id = "ctr-v3";
  pod.ifname = "eth0";
  pod.admin_chain = "CNI-ADMIN";
  pod.addresses = {IpAddr::parse("203.0.113.3").value()};
  CHECK(
      recorded(ctx, drivers::steps::AddFirewallPod{pod}) ==
      std::pair<std::string, bool>{
          R"({"op":"firewall.remove","containerID":"ctr-v3","ifname":"eth0","addresses":["203.0.113.3"],"adminChain":"CNI-ADMIN"})",
          false});
  CHECK(recorded(ctx, drivers::steps::IsolateBridge{"brs", true, "ctr-v3", "eth0"}) ==
        std::pair<std::string, bool>{R"({"op":"firewall.release_bridge","bridge":"brs","isolated":true,)"
                                     R"("containerID":"ctr-v3","ifname":"eth0","ifUnknown":"skip"})",
                                     false});
}

TEST_CASE("joining a VRF records its release, whether the step creates the VRF or finds it") {
  drivers::Context ctx;
  for (std::optional<uint32_t> table : {std::optional<uint32_t>{}, std::optional<uint32_t>{100}}) {
    CHECK(recorded(ctx, drivers::steps::JoinPodVrf{"red", table, 5, "net1"}) ==
          std::pair<std::string, bool>{R"({"op":"vrf.release","vrf":"red","ifname":"net1"})", false});
  }
}

TEST_CASE("bandwidth's map entries record the one bandwidth.remove; its clsact, filters and fq record nothing more") {
  drivers::Context ctx;
  drivers::undo::BandwidthRemove remove;
  remove.bpffs_dir = "/sys/fs/bpf/plumb";
  remove.host = "veth4ba7bfd8";
  remove.ifindex = 7;
  remove.owner = 11849446052501764177U;
  remove.hooks = {"host-ingress", "host-egress"};
  remove.clsact = true;
  remove.abi = 2;
  remove.pins = "/sys/fs/bpf/plumb/bandwidth_v2";
  CHECK(recorded(ctx, drivers::steps::WriteBandwidthEntries{nullptr, {}, remove.owner, false, remove}) ==
        std::pair<std::string, bool>{
            R"({"op":"bandwidth.remove","bpffsDir":"/sys/fs/bpf/plumb","host":"veth4ba7bfd8","ifindex":7,)"
            R"("owner":11849446052501764177,"hooks":["host-ingress","host-egress"],"clsact":true,"fq":false,)"
            R"("abi":2,"pins":"/sys/fs/bpf/plumb/bandwidth_v2"})",
            false});
  using drivers::steps::Ns;
  CHECK(recorded(ctx, drivers::steps::AddClsact{Ns::kNode, 7}) == std::pair<std::string, bool>{"", false});
  CHECK(recorded(ctx, drivers::steps::AttachShapingFilter{Ns::kNode, 7, tc::Hook::Ingress, 3, "plumb_bw", 0}) ==
        std::pair<std::string, bool>{"", false});
  CHECK(recorded(ctx, drivers::steps::SetRootFq{Ns::kPod, 2}) == std::pair<std::string, bool>{"", false});
}

TEST_CASE("the undo operations of the steps read back what they wrote; a bad prefix is damage naming the field") {
  for (const char* text :
       {R"({"op":"addr_del","ifname":"brs","prefix":"198.51.100.1/24","ifUnknown":"skip"})",
        R"({"op":"addr_restore","ifname":"brs","prefix":"2001:db8::1/64","ifUnknown":"skip"})",
        R"({"op":"sysctl_restore","key":"net/ipv4/conf/brs/route_localnet","value":"0","ifUnknown":"skip"})"}) {
    CAPTURE(text);
    auto v = json::parse(text, "test");
    REQUIRE(v);
    auto op = drivers::undo::decode(*v, "rec.json");
    REQUIRE(op);
    CHECK(json::dump(drivers::undo::encode(*op)) == text);
  }
  auto bad = json::parse(R"({"op":"addr_del","ifname":"brs","prefix":"198.51.100.1/33"})", "test");
  REQUIRE(bad);
  auto op = drivers::undo::decode(*bad, "rec.json");
  REQUIRE_FALSE(op);
  CHECK(op.error().cni_code == cni_code::kDecode);
  CHECK(op.error().text().find("rec.json") != std::string::npos);
  CHECK(op.error().text().find("\"prefix\"") != std::string::npos);
}

TEST_CASE(
    "portmap with a RecordingExecutor: route_localnet, the mappings and the UDP flush as steps with their inverses; "
    "the node untouched") {
  test::Node node;
  REQUIRE(test::sh("ip link add brs type bridge && ip link set brs up").exit_code == 0);
  auto nl = netlink::Socket::open();
  REQUIRE(nl);
  drivers::steps::RecordingExecutor rec;
  drivers::Context ctx;
  ctx.container_id = "ctr-rec";
  ctx.ifname = "eth0";
  ctx.network = "rec-net";
  ctx.node = &*nl;
  ctx.executor = &rec;
  cni::CniResult prev;
  prev.cni_version = "1.1.0";
  prev.interfaces = {{"brs", "", std::nullopt, "", "", ""}, {"eth0", "", std::nullopt, "/run/netns/x", "", ""}};
  prev.ips = {{prefix("198.51.100.5/24"), std::nullopt, 1}};
  auto conf = json::parse(R"({"type": "portmap", "runtimeConfig": {"portMappings": [
    {"hostPort": 8053, "containerPort": 53, "protocol": "udp"}]}})",
                          "test");
  REQUIRE(conf);
  auto r = test::add_plugin(ctx, *conf, &prev);
  REQUIRE_MESSAGE(r, r.error().text());

  const auto& made = rec.made();
  REQUIRE(made.size() == 3);
  CHECK(made[0].step == "write_node_sysctl");
  REQUIRE(made[0].inverse);
  CHECK(json::dump(drivers::undo::encode(made[0].inverse->op)) ==
        R"({"op":"sysctl_restore","key":"net/ipv4/conf/brs/route_localnet","value":"0","ifUnknown":"skip"})");
  CHECK(made[0].inverse->rollback_only);
  CHECK(made[1].step == "add_port_mappings");
  REQUIRE(made[1].inverse);
  CHECK(
      json::dump(drivers::undo::encode(made[1].inverse->op)) ==
      R"({"op":"portmap.remove","containerID":"ctr-rec","ifname":"eth0","mappings":[{"protocol":"udp","hostPort":8053,)"
      R"("podIP":"198.51.100.5","containerPort":53}],"snat":["198.51.100.5"],"masqAll":[]})");
  CHECK_FALSE(made[1].inverse->rollback_only);
  CHECK(made[2].step == "flush_conntrack");
  CHECK_FALSE(made[2].inverse);
  // Recorded, not applied.
  CHECK(test::read_file("/proc/sys/net/ipv4/conf/brs/route_localnet") == "0\n");
  CHECK(test::sh("nft list ruleset").out.empty());
}

namespace {

/// The node of the tuning cases: a bridge brs in the private node, which stands for the pod; a
/// Context whose pod side is the node and whose executor records.
struct TuningNode {
  test::Node node;
  netlink::Socket nl;
  netns::Netns self;
  drivers::steps::RecordingExecutor rec;
  drivers::Context ctx;

  TuningNode() : nl(open_socket()), self(open_self()) {
    ctx.pod = &nl;
    ctx.pod_ns = &self;
    ctx.executor = &rec;
  }

  /// The one step made: tune_pod_link, with tuning.restore of brs's values before it as inverse;
  /// brs itself untouched (recorded, not applied).
  void check_one_restore_recorded() {
    REQUIRE(rec.made().size() == 1);
    CHECK(rec.made()[0].step == "tune_pod_link");
    REQUIRE(rec.made()[0].inverse);
    CHECK(
        json::dump(drivers::undo::encode(rec.made()[0].inverse->op)) ==
        R"({"op":"tuning.restore","ifname":"brs","sysctl":{"net/ipv4/conf/brs/arp_filter":"0"},"mtu":1500,"promisc":false})");
    CHECK(test::read_file("/proc/sys/net/ipv4/conf/brs/arp_filter") == "0\n");
    CHECK(test::sh("ip -o link show brs").out.find("mtu 1500") != std::string::npos);
  }

 private:
  // Called after `node` is constructed (members in declaration order): brs is the node's.
  static netlink::Socket open_socket() {
    REQUIRE(test::sh("ip link add brs type bridge").exit_code == 0);
    auto nl = netlink::Socket::open();
    REQUIRE(nl);
    return std::move(*nl);
  }
  static netns::Netns open_self() {
    auto self = netns::Netns::open("/proc/self/ns/net");
    REQUIRE(self);
    return std::move(*self);
  }
};

}  // namespace

TEST_CASE_FIXTURE(TuningNode,
                  "tuning a pod link records the previous values of exactly what it changes; recorded, not applied") {
  auto brs = link::get(nl, "brs");
  REQUIRE(brs);
  REQUIRE(*brs);
  drivers::steps::TunePodLink tune{(*brs)->index, "brs", {{"net/ipv4/conf/brs/arp_filter", "1"}}, {}};
  tune.change.mtu_bytes = 1400;
  tune.change.promisc = true;
  REQUIRE(drivers::steps::run(ctx, tune));
  check_one_restore_recorded();
  CHECK_FALSE(rec.made()[0].inverse->rollback_only);
}

TEST_CASE_FIXTURE(
    TuningNode, "tuning with a RecordingExecutor: its one step and tuning.restore recorded; the interface untouched") {
  ctx.container_id = "ctr-rec";
  ctx.ifname = "brs";  // the private node stands for the pod
  ctx.network = "rec-net";
  ctx.node = &nl;
  cni::CniResult prev;
  prev.cni_version = "1.1.0";
  prev.interfaces = {{"brs", "", std::nullopt, "/proc/self/ns/net", "", ""}};
  auto conf = json::parse(R"({"type": "tuning", "mtu": 1400, "promisc": true,
    "sysctl": {"net.ipv4.conf.IFNAME.arp_filter": "1"}})",
                          "test");
  REQUIRE(conf);
  auto r = test::add_plugin(ctx, *conf, &prev);
  REQUIRE_MESSAGE(r, r.error().text());
  check_one_restore_recorded();
}

TEST_CASE("addr_del, addr_restore and sysctl_restore against the kernel; a link gone is success") {
  test::Node node;
  REQUIRE(test::sh("ip link add brs type bridge && ip addr add 198.51.100.1/24 dev brs").exit_code == 0);
  auto nl = netlink::Socket::open();
  REQUIRE(nl);
  drivers::Context ctx;
  ctx.node = &*nl;
  auto v4 = [] { return test::sh("ip -4 -o addr show dev brs | awk '{print $4}'").out; };
  // A gateway address stays while the bridge has another attachment's port besides the
  // rolled-back one's (p1); once p1 is the only one, it goes.
  REQUIRE(test::sh("ip link add p1 type veth peer name p1b && ip link add p2 type veth peer name p2b && "
                   "ip link set p1 master brs && ip link set p2 master brs")
              .exit_code == 0);
  const drivers::undo::AddrDel gateway{"brs", prefix("198.51.100.1/24"), "brs", "p1"};
  REQUIRE(drivers::undo::run(ctx, gateway));
  CHECK(v4() == "198.51.100.1/24\n");
  REQUIRE(test::sh("ip link del p2").exit_code == 0);
  REQUIRE(drivers::undo::run(ctx, gateway));
  CHECK(v4().empty());
  REQUIRE(test::sh("ip link del p1").exit_code == 0);
  REQUIRE(
      drivers::undo::run(ctx, drivers::undo::AddrDel{"brs", prefix("198.51.100.1/24"), std::nullopt, std::nullopt}));
  REQUIRE(drivers::undo::run(ctx, gateway));  // gone: success
  REQUIRE(drivers::undo::run(ctx, drivers::undo::AddrRestore{"brs", prefix("198.51.100.200/24")}));
  REQUIRE(drivers::undo::run(ctx, drivers::undo::AddrRestore{"brs", prefix("198.51.100.200/24")}));  // there: success
  CHECK(v4() == "198.51.100.200/24\n");
  REQUIRE(drivers::undo::run(ctx, drivers::undo::SysctlRestore{"net/ipv4/conf/brs/route_localnet", "1"}));
  CHECK(test::read_file("/proc/sys/net/ipv4/conf/brs/route_localnet") == "1\n");
  REQUIRE(test::sh("ip link del brs").exit_code == 0);
  CHECK(drivers::undo::run(ctx, drivers::undo::AddrRestore{"brs", prefix("198.51.100.200/24")}));
  CHECK(drivers::undo::run(ctx, drivers::undo::SysctlRestore{"net/ipv4/conf/brs/route_localnet", "0"}));
}
