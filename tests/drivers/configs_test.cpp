// Configuration validation of the macvlan, host-device and tuning drivers: invalid configs are
// refused with CNI code 7 and a message naming the key and value by the driver's parse, before
// any kernel access (the context given here has no sockets, namespace or journal: touching them
// would crash the test).
#include <doctest/doctest.h>

#include <string>

#include "drivers/driver.hpp"
#include "drivers/undo.hpp"
#include "tests/support/driver_harness.hpp"

using namespace plumb;

namespace {

/// Parses `conf_json` with the driver of `type` and runs its add (with an empty context) when
/// parse passes; returns the error text.
std::string add_error(std::string_view type, const std::string& conf_json, bool with_prev = false) {
  REQUIRE(drivers::find(type) != nullptr);
  auto conf = json::parse(conf_json, "test config");
  REQUIRE(conf);
  json::set_string(*conf, "type", type, conf->GetAllocator());
  drivers::Context ctx;
  ctx.network = "net-x";
  ctx.ifname = "net1";
  cni::CniResult prev;
  auto r = test::add_plugin(ctx, *conf, with_prev ? &prev : nullptr);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kInvalidConfig);
  return r.error().text();
}

bool has(const std::string& text, const std::string& needle) {
  INFO("error: ", text, "; expected to contain: ", needle);
  return text.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("the three drivers are registered") {
  CHECK(drivers::find("macvlan") != nullptr);
  CHECK(drivers::find("host-device") != nullptr);
  CHECK(drivers::find("tuning") != nullptr);
  // Their undo operations are known to the journal's reader.
  json::Document op;
  op.Parse(R"({"op": "host-device.restore", "name": "eth1", "ifname": "net1", "index": 3, "mtu": 1500})");
  CHECK(drivers::undo::decode(op, "test").has_value());
  op.Parse(R"({"op": "tuning.restore", "ifname": "net1", "sysctl": {}})");
  CHECK(drivers::undo::decode(op, "test").has_value());
}

TEST_CASE("macvlan config: bad mode, master name, mtu and mac are named") {
  CHECK(has(add_error("macvlan", R"({"master": "eth0", "mode": "source"})"), "\"source\""));
  CHECK(has(add_error("macvlan", R"({"master": "eth0", "mode": "Bridge"})"), "net-x.mode \"Bridge\""));
  CHECK(has(add_error("macvlan", R"({"master": "a/b"})"), "net-x.master \"a/b\""));
  CHECK(has(add_error("macvlan", R"({"master": "eth0", "mtu": -1})"), "net-x.mtu -1"));
  CHECK(has(add_error("macvlan", R"({"master": "eth0", "mtu": "big"})"), "mtu"));
  CHECK(has(add_error("macvlan", R"({"master": "eth0", "mac": "02:zz:00:00:00:01"})"), "02:zz:00:00:00:01"));
  CHECK(has(add_error("macvlan", R"({"master": "eth0", "runtimeConfig": {"mac": "nope"}})"), "\"nope\""));
  CHECK(has(add_error("macvlan", R"({"master": "eth0", "linkInContainer": "yes"})"), "linkInContainer"));
}

TEST_CASE("host-device config: exactly one selector, and safe sysfs paths") {
  CHECK(has(add_error("host-device", R"({})"), "exactly one"));
  CHECK(has(add_error("host-device", R"({"device": "eth1", "hwaddr": "02:00:00:00:00:01"})"), "got 2"));
  // deviceID replaces pciBusID but is still a selector next to device.
  CHECK(has(add_error("host-device", R"({"pciBusID": "0000:00:01.0", "runtimeConfig": {"deviceID": "0000:00:02.0"}, "device": "eth1"})"),
            "got 2"));
  CHECK(has(add_error("host-device", R"({"hwaddr": "not-a-mac"})"), "net-x.hwaddr \"not-a-mac\""));
  CHECK(has(add_error("host-device", R"({"kernelpath": "/etc/passwd"})"), "net-x.kernelpath \"/etc/passwd\""));
  CHECK(has(add_error("host-device", R"({"kernelpath": "/sys/devices/../../etc"})"), "/sys/devices/../../etc"));
  CHECK(has(add_error("host-device", R"({"kernelpath": "sys/devices/pci0000:00"})"), "absolute"));
  CHECK(has(add_error("host-device", R"({"pciBusID": "../../../etc"})"), "net-x.pciBusID \"../../../etc\""));
  CHECK(has(add_error("host-device", R"({"runtimeConfig": {"deviceID": ".."}})"), "runtimeConfig.deviceID \"..\""));
  CHECK(has(add_error("host-device", R"({"device": "bad/name"})"), "net-x.device \"bad/name\""));
}

TEST_CASE("tuning config: chained only; sysctl keys under net/ only; values typed") {
  CHECK(has(add_error("tuning", R"({"mtu": 1300})", /*with_prev=*/false), "prevResult"));
  CHECK(has(add_error("tuning", R"({"sysctl": {"kernel.hostname": "x"}})", true), "\"kernel.hostname\" is not under net/"));
  CHECK(has(add_error("tuning", R"({"sysctl": {"net/../kernel/hostname": "x"}})", true), "net/../kernel/hostname"));
  CHECK(has(add_error("tuning", R"({"sysctl": {"/proc/sys/net/ipv4/ip_forward": "1"}})", true), "/proc/sys/net/ipv4/ip_forward"));
  CHECK(has(add_error("tuning", R"({"sysctl": {"netfilter.x": "1"}})", true), "netfilter.x"));
  CHECK(has(add_error("tuning", R"({"sysctl": {"net.ipv4.ip_forward": 1}})", true), "must be a string"));
  CHECK(has(add_error("tuning", R"({"mtu": 70000})", true), "net-x.mtu 70000"));
  CHECK(has(add_error("tuning", R"({"txQLen": -5})", true), "net-x.txQLen -5"));
  CHECK(has(add_error("tuning", R"({"mac": "02:00:00:00:00"})", true), "\"02:00:00:00:00\""));
  CHECK(has(add_error("tuning", R"({"args": {"cni": {"mac": "xx"}}})", true), "net-x.args.cni.mac \"xx\""));
  CHECK(has(add_error("tuning", R"({"promisc": "on"})", true), "promisc"));
}
