// Config validation of the macvlan driver's parse (drivers/macvlan.cpp): invalid configs are
// refused with CNI code 7 and a message naming the key and value, before any kernel access.
#include <doctest/doctest.h>

#include "tests/support/driver_config_errors.hpp"

using plumb::test::config_error;
using plumb::test::has;

TEST_CASE("macvlan config: bad mode, master name, mtu and mac are named") {
  CHECK(has(config_error("macvlan", R"({"master": "eth0", "mode": "source"})"), "\"source\""));
  CHECK(has(config_error("macvlan", R"({"master": "eth0", "mode": "Bridge"})"), "net-x.mode \"Bridge\""));
  CHECK(has(config_error("macvlan", R"({"master": "a/b"})"), "net-x.master \"a/b\""));
  CHECK(has(config_error("macvlan", R"({"master": "eth0", "mtu": -1})"), "net-x.mtu -1"));
  CHECK(has(config_error("macvlan", R"({"master": "eth0", "mtu": "big"})"), "mtu"));
  CHECK(has(config_error("macvlan", R"({"master": "eth0", "mac": "02:zz:00:00:00:01"})"), "02:zz:00:00:00:01"));
  CHECK(has(config_error("macvlan", R"({"master": "eth0", "runtimeConfig": {"mac": "nope"}})"), "\"nope\""));
  CHECK(has(config_error("macvlan", R"({"master": "eth0", "linkInContainer": "yes"})"), "linkInContainer"));
}
