// DEL with the pod's devices deleted in one RTM_DELLINK (cni-entry/pod/teardown_batch.cpp),
// through the real binaries against the real kernel in a private node namespace per case: the
// devices plumb makes in a pod are in its link group, one DEL removes all of them (veth node ends
// with them), a device of the group that is not the container's is left alone, a shaped veth's
// bandwidth teardown leaves its tc objects to the device's deletion, and a DEL killed at any of
// its steps leaves records from which the next DEL finishes the job.
#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <signal.h>

#include <set>
#include <string>

#include "engine/kernel/link.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/syscall_count.hpp"

using plumb::test::ip_json;
using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;

namespace {

const std::string kGroup = std::to_string(plumb::link::kPodLinkGroup);

/// A node with a bridge network and a macvlan network (on mst0, one end of a veth pair: this
/// kernel has no dummy driver) besides the fixture's default network, and pod `name` selecting both.
std::string setup(Node& node, const PodFixture& fx, const std::string& name) {
  REQUIRE(plumb::test::sh("ip link add mst0 type veth peer name mst1 && ip link set mst0 up && ip link set mst1 up").exit_code == 0);
  auto ipam = [&](const std::string& subnet) {
    return R"({"type": "host-local", "dataDir": ")" + fx.ipam_dir() + R"(", "ranges": [[{"subnet": ")" + subnet + R"("}]]})";
  };
  fx.add_nad("default", "blue", R"({"cniVersion": "1.0.0", "type": "bridge", "bridge": "br-blue", "ipam": )" + ipam("198.51.100.0/24") + "}");
  fx.add_nad("default", "mv", R"({"cniVersion": "1.0.0", "type": "macvlan", "master": "mst0", "mode": "bridge", "ipam": )" +
                                  ipam("192.0.2.0/24") + "}");
  fx.add_pod("default", name, "blue,mv");
  return node.add_netns(name);
}

/// Pod interface name -> its link group, from iproute2.
std::map<std::string, std::string> groups(const std::string& ns) {
  std::map<std::string, std::string> out;
  auto d = ip_json("-n " + ns + " -d link show");
  for (auto& l : d.GetArray()) out[l["ifname"].GetString()] = l.HasMember("group") ? l["group"].GetString() : "";
  return out;
}

/// The host end of the default network's veth, from an ADD's result (its interfaces[1]).
std::string host_veth(const std::string& result_json) {
  rapidjson::Document d;
  d.Parse(result_json.c_str());
  REQUIRE((d.IsObject() && d.HasMember("interfaces") && d["interfaces"].IsArray() && d["interfaces"].Size() > 1));
  return d["interfaces"][1]["name"].GetString();
}

/// Nothing of the pod is left: no pod interface, no node end, no address file, no record.
void check_clean(const PodFixture& fx, const std::set<std::string>& node_links, const std::string& ns) {
  CHECK(link_names(ns) == std::set<std::string>{"lo"});
  CHECK(link_names("") == node_links);
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
  for (auto& f : plumb::test::address_files(fx.ipam_dir())) FAIL_CHECK(("address still held: " + f));
}

/// Runs a DEL and counts its rtnetlink requests (every send on a NETLINK_ROUTE socket, in the
/// node's namespace or the pod's, by the plumb process it runs).
long del_rtnetlink_requests(const PodFixture& fx, const std::string& container, const std::string& pod,
                            const std::string& name, const std::string& config) {
  Proc del;
  const long requests =
      plumb::test::count_rtnetlink_sends([&] { del = fx.run("DEL", container, pod, "default", name, config); });
  INFO(del.out, del.err);
  REQUIRE(del.exit_code == 0);
  return requests;
}

}  // namespace

TEST_CASE("a batched DEL makes two rtnetlink requests: the group check's link dump and the group deletion") {
  // Each device the group deletion removed (veth node ends with their pod ends) needs no request
  // of its own after it.
  Node node;
  PodFixture fx(node);
  const std::string pod = setup(node, fx, "p5");
  REQUIRE(fx.run("ADD", "ctr-5", pod, "default", "p5", fx.config()).exit_code == 0);
  std::set<std::string> without_pod;
  for (auto& l : link_names("")) {
    if (l.rfind("veth", 0) != 0) without_pod.insert(l);
  }
  CHECK(del_rtnetlink_requests(fx, "ctr-5", pod, "p5", fx.config()) == 2);
  check_clean(fx, without_pod, "p5");
}

TEST_CASE("a pod's devices are in plumb's link group; one DEL removes them all, their node ends with them") {
  Node node;
  PodFixture fx(node);
  const std::string pod = setup(node, fx, "p1");
  REQUIRE(fx.run("ADD", "ctr-1", pod, "default", "p1", fx.config()).exit_code == 0);
  auto g = groups("p1");
  CHECK(g["eth0"] == kGroup);
  CHECK(g["net1"] == kGroup);
  CHECK(g["net2"] == kGroup);
  CHECK(g["lo"] != kGroup);
  const auto node_links = link_names("");  // with the host ends of eth0 and net1
  Proc del = fx.run("DEL", "ctr-1", pod, "default", "p1", fx.config());
  INFO(del.out, del.err);
  REQUIRE(del.exit_code == 0);
  std::set<std::string> without_pod;
  for (auto& l : node_links) {
    if (l.rfind("veth", 0) != 0) without_pod.insert(l);
  }
  CHECK(without_pod.size() + 2 == node_links.size());
  check_clean(fx, without_pod, "p1");
}

TEST_CASE("a device of the group that is not the container's is left alone, and the pod's go one by one") {
  Node node;
  PodFixture fx(node);
  const std::string pod = setup(node, fx, "p2");
  REQUIRE(fx.run("ADD", "ctr-2", pod, "default", "p2", fx.config()).exit_code == 0);
  REQUIRE(plumb::test::sh("ip -n p2 link add extra0 group " + kGroup + " type veth peer name extra1").exit_code == 0);
  Proc del = fx.run("DEL", "ctr-2", pod, "default", "p2", fx.config());
  INFO(del.out, del.err);
  REQUIRE(del.exit_code == 0);
  CHECK(link_names("p2") == std::set<std::string>{"lo", "extra0", "extra1"});
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
}

TEST_CASE(
    "bandwidth on the default network's veth: the batched DEL changes no qdisc or filter and looks no device up, the "
    "device's deletion takes them; its map entries go") {
  Node node;
  PodFixture fx(node);
  plumb::test::PrivateBpffs bpf(node);
  plumb::test::write_file(fx.default_conflist(), R"({"cniVersion": "1.0.0", "name": "default-net", "plugins": [
    {"type": "bridge", "bridge": "plumb0", "isGateway": true, "ipam": {"type": "host-local", "dataDir": ")" + fx.ipam_dir() +
                                                     R"(", "ranges": [[{"subnet": "203.0.113.0/24"}]]}},
    {"type": "bandwidth", "capabilities": {"bandwidth": true}}]})");
  const std::string pod = setup(node, fx, "p4");
  const std::string config = fx.config(R"("bpffsDir": ")" + bpf.dir() + R"(/plumb", "runtimeConfig": {"bandwidth":
      {"ingressRate": 8000000, "ingressBurst": 80000, "egressRate": 8000000, "egressBurst": 80000}})");
  Proc add = fx.run("ADD", "ctr-4", pod, "default", "p4", config);
  INFO(add.out, add.err);
  REQUIRE(add.exit_code == 0);
  REQUIRE(plumb::test::sh("ip link add mon0 type veth peer name mon1").exit_code == 0);  // the monitor's control
  const std::string state_map = "bpftool -j map dump pinned " + bpf.dir() + "/plumb/bandwidth_v2/state";
  REQUIRE(plumb::test::sh(state_map).out.find("\"key\"") != std::string::npos);  // the pod's entries
  REQUIRE(plumb::test::sh("tc filter show ingress dev " + host_veth(add.out)).out.find("bpf") != std::string::npos);  // shaped
  // Every qdisc and filter change of the node namespace while the DEL runs, as tc reports it:
  // between two marks made by hand (a clsact qdisc added and deleted on mon0, then on mon1), which
  // the monitor reports in order. The first seen: subscribed before the DEL starts; the second
  // seen: the DEL's notifications read.
  const std::string log = node.dir() + "/tc-monitor.log";
  pid_t monitor = plumb::test::start_child({"/usr/sbin/tc", "monitor"}, {}, log);
  REQUIRE(monitor > 0);
  auto mark = [&](const std::string& dev) {
    const std::string seen = "deleted qdisc clsact ffff: dev " + dev + " ";
    return plumb::test::eventually([&] {
      if (plumb::test::read_file(log).find(seen) != std::string::npos) return true;
      (void)plumb::test::sh("tc qdisc add dev " + dev + " clsact && tc qdisc del dev " + dev + " clsact");
      return plumb::test::read_file(log).find(seen) != std::string::npos;
    });
  };
  REQUIRE(mark("mon0"));
  const long rtnetlink_requests = del_rtnetlink_requests(fx, "ctr-4", pod, "p4", config);
  REQUIRE(mark("mon1"));
  const std::string whole = plumb::test::read_file(log);
  plumb::test::stop_child(monitor);
  CHECK(rtnetlink_requests == 2);  // the group check's link dump and the group deletion
  INFO(whole);
  const size_t after_first = whole.find('\n', whole.rfind("deleted qdisc clsact ffff: dev mon0 "));
  const size_t second = whole.find("qdisc clsact ffff: dev mon1 ");
  REQUIRE(after_first < second);
  const std::string during_del = whole.substr(after_first, second - after_first);
  // The device's deletion reports its filter chains deleted (the kernel's, not a request): the
  // window holds the DEL.
  CHECK(during_del.find("deleted chain dev " + host_veth(add.out) + " ") != std::string::npos);
  CHECK(during_del.find("deleted filter") == std::string::npos);
  CHECK(during_del.find("deleted qdisc") == std::string::npos);
  CHECK(plumb::test::sh(state_map).out.find("\"key\"") == std::string::npos);
  CHECK(link_names("p4") == std::set<std::string>{"lo"});
  CHECK(link_names("").count("mon0") == 1);
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
}

TEST_CASE("SIGKILL after each step of a batched DEL (plumb-faulty): the records stay until the devices are gone, the next DEL finishes") {
  Node node;
  PodFixture fx(node);
  const std::string pod = setup(node, fx, "p3");
  REQUIRE(fx.run("ADD", "ctr-3", pod, "default", "p3", fx.config()).exit_code == 0);
  REQUIRE(fx.run("DEL", "ctr-3", pod, "default", "p3", fx.config()).exit_code == 0);
  const auto node_links = link_names("");  // the shared bridges now exist
  unsigned killed = 0;
  for (unsigned step = 1; step < 10; ++step) {
    CAPTURE(step);
    REQUIRE(fx.run("ADD", "ctr-3", pod, "default", "p3", fx.config()).exit_code == 0);
    Proc del = fx.run_with(plumb::test::plumb_faulty_binary(), {{"PLUMB_FAULT_AFTER_STEP", std::to_string(step)}}, "DEL",
                           "ctr-3", pod, "default", "p3", fx.config());
    if (del.exit_code == 0) {  // past the last step: the DEL completed
      check_clean(fx, node_links, "p3");
      break;
    }
    REQUIRE(del.exit_code == 128 + SIGKILL);
    ++killed;
    const size_t records = PodFixture::files_under(fx.state() + "/containers").size();
    if (step == 1) {  // everything but the links undone: devices and records all there
      CHECK(link_names("p3") == std::set<std::string>{"lo", "eth0", "net1", "net2"});
      CHECK(records == 3);
    } else if (step == 2) {  // the group deleted with one message: no device left, every record kept
      CHECK(link_names("p3") == std::set<std::string>{"lo"});
      CHECK(link_names("") == node_links);
      CHECK(records == 3);
    }
    Proc again = fx.run("DEL", "ctr-3", pod, "default", "p3", fx.config());
    INFO(again.out, again.err);
    REQUIRE(again.exit_code == 0);
    check_clean(fx, node_links, "p3");
  }
  CHECK(killed == 5);  // after the undo pass, after the group, after each of the three records
}
