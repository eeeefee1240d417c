// The typed undo journal's reader (drivers/undo.cpp): a record's undo list is checked whole before
// anything of it runs; an operation this binary does not know is a newer plumb's (kNewerRecord), a
// malformed one is damage (kDecode); both name the record file and the operation.
#include <doctest/doctest.h>

#include <string>

#include "drivers/undo.hpp"
#include "engine/base/json.hpp"

using namespace plumb;

namespace {

json::Document list(const std::string& text) {
  auto d = json::parse(text, "test");
  REQUIRE(d);
  return std::move(*d);
}

}  // namespace

TEST_CASE("check passes a list of known, well-formed operations") {
  CHECK(drivers::undo::check(list(R"([{"op":"link_del","where":"node","name":"veth1"},{"op":"masq_del","ip":"192.0.2.2"}])"),
                             "/state/containers/c:eth0/0-eth0.json"));
  CHECK(drivers::undo::check(list("[]"), "r"));
}

TEST_CASE("an unknown operation is a newer plumb's, named with the record file") {
  const std::string rec = "/state/containers/c:eth0/1-net1.json";
  auto st = drivers::undo::check(list(R"([{"op":"link_del","where":"node","name":"v"},{"op":"teleport.restore"}])"), rec);
  REQUIRE_FALSE(st);
  CHECK(st.error().cni_code == cni_code::kNewerRecord);
  CHECK(st.error().msg.find(rec) == 0);
  CHECK(st.error().msg.find("\"teleport.restore\"") != std::string::npos);
}

TEST_CASE("a malformed operation or list is damage, named with the record file and the field") {
  const std::string rec = "/state/containers/c:eth0/0-eth0.json";
  for (const char* bad : {R"([{"op":"link_del","where":"node"}])", R"([{"op":"link_del","where":"node","name":7}])",
                          R"([{"where":"node"}])", R"(["link_del"])", R"({"op":"link_del"})"}) {
    CAPTURE(bad);
    auto st = drivers::undo::check(list(bad), rec);
    REQUIRE_FALSE(st);
    CHECK(st.error().cni_code == cni_code::kDecode);
    CHECK(st.error().msg.find(rec) == 0);
  }
  auto missing = drivers::undo::check(list(R"([{"op":"link_del","where":"node"}])"), rec);
  CHECK(missing.error().msg.find("\"name\"") != std::string::npos);
}
