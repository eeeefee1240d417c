// Config validation of the host-device driver's parse (drivers/host_device.cpp): invalid configs
// are refused with CNI code 7 and a message naming the key and value, before any kernel access.
#include <doctest/doctest.h>

#include "tests/support/driver_config_errors.hpp"

using plumb::test::config_error;
using plumb::test::has;

TEST_CASE("host-device config: exactly one selector, and safe sysfs paths") {
  CHECK(has(config_error("host-device", R"({})"), "exactly one"));
  CHECK(has(config_error("host-device", R"({"device": "eth1", "hwaddr": "02:00:00:00:00:01"})"), "got 2"));
  // deviceID replaces pciBusID but is still a selector next to device.
  CHECK(has(
      config_error("host-device",
                   R"({"pciBusID": "0000:00:01.0", "runtimeConfig": {"deviceID": "0000:00:02.0"}, "device": "eth1"})"),
      "got 2"));
  CHECK(has(config_error("host-device", R"({"hwaddr": "not-a-mac"})"), "net-x.hwaddr \"not-a-mac\""));
  CHECK(has(config_error("host-device", R"({"kernelpath": "/etc/passwd"})"), "net-x.kernelpath \"/etc/passwd\""));
  CHECK(has(config_error("host-device", R"({"kernelpath": "/sys/devices/../../etc"})"), "/sys/devices/../../etc"));
  CHECK(has(config_error("host-device", R"({"kernelpath": "sys/devices/pci0000:00"})"), "absolute"));
  CHECK(has(config_error("host-device", R"({"pciBusID": "../../../etc"})"), "net-x.pciBusID \"../../../etc\""));
  CHECK(has(config_error("host-device", R"({"runtimeConfig": {"deviceID": ".."}})"), "runtimeConfig.deviceID \"..\""));
  CHECK(has(config_error("host-device", R"({"device": "bad/name"})"), "net-x.device \"bad/name\""));
}
