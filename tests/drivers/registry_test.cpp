// drivers/registry: types found in the table, and their undo operations known to the journal's
// reader.
#include <doctest/doctest.h>

#include "drivers/driver.hpp"
#include "drivers/undo.hpp"
#include "engine/base/json.hpp"

using namespace plumb;

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
