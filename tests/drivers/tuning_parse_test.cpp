// Config validation of the tuning driver's parse (drivers/tuning.cpp): invalid configs are refused
// with CNI code 7 and a message naming the key and value, before any kernel access.
#include <doctest/doctest.h>

#include "tests/support/driver_config_errors.hpp"

using plumb::test::config_error;
using plumb::test::has;

TEST_CASE("tuning config: chained only; sysctl keys under net/ only; values typed") {
  CHECK(has(config_error("tuning", R"({"mtu": 1300})", /*with_prev=*/false), "prevResult"));
  CHECK(has(config_error("tuning", R"({"sysctl": {"kernel.hostname": "x"}})", true),
            "\"kernel.hostname\" is not under net/"));
  CHECK(has(config_error("tuning", R"({"sysctl": {"net/../kernel/hostname": "x"}})", true), "net/../kernel/hostname"));
  CHECK(has(config_error("tuning", R"({"sysctl": {"/proc/sys/net/ipv4/ip_forward": "1"}})", true),
            "/proc/sys/net/ipv4/ip_forward"));
  CHECK(has(config_error("tuning", R"({"sysctl": {"netfilter.x": "1"}})", true), "netfilter.x"));
  CHECK(has(config_error("tuning", R"({"sysctl": {"net.ipv4.ip_forward": 1}})", true), "must be a string"));
  CHECK(has(config_error("tuning", R"({"mtu": 70000})", true), "net-x.mtu 70000"));
  CHECK(has(config_error("tuning", R"({"txQLen": -5})", true), "net-x.txQLen -5"));
  CHECK(has(config_error("tuning", R"({"mac": "02:00:00:00:00"})", true), "\"02:00:00:00:00\""));
  CHECK(has(config_error("tuning", R"({"args": {"cni": {"mac": "xx"}}})", true), "net-x.args.cni.mac \"xx\""));
  CHECK(has(config_error("tuning", R"({"promisc": "on"})", true), "promisc"));
}
