// The typed undo journal's reader (drivers/undo.cpp): a record's undo list is checked whole before
// anything of it runs; an operation this binary does not know is a newer plumb's (kNewerRecord), a
// malformed one is damage (kDecode); both name the record file and the operation. And a link
// deletion bound to a link group, against the kernel in a private node.
#include <doctest/doctest.h>

#include <string>

#include "drivers/undo.hpp"
#include "engine/base/json.hpp"
#include "engine/kernel/link.hpp"
#include "tests/support/driver_harness.hpp"
#include "tests/support/private_node.hpp"

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

TEST_CASE("link_del with a group deletes a pod link only if it is in that group; without one, by name; a missing link is success") {
  test::Node node;
  const std::string pod = node.add_netns("lgrp");
  auto pod_ns = netns::Netns::open(pod);
  REQUIRE(pod_ns);
  auto pod_nl = netlink::Socket::open_in(pod_ns->fd());
  REQUIRE(pod_nl);
  drivers::Context ctx;
  ctx.pod_ns = &*pod_ns;
  ctx.pod = &*pod_nl;
  auto exists = [&] { return test::sh("ip -n lgrp link show dev net1").exit_code == 0; };
  const std::string group = std::to_string(link::kPodLinkGroup);
  const auto guarded = list(R"({"op":"link_del","where":"pod","name":"net1","group":)" + group + "}");
  const auto by_name = list(R"({"op":"link_del","where":"pod","name":"net1"})");

  REQUIRE(test::sh("ip -n lgrp link add net1 type veth peer name net1p").exit_code == 0);  // someone else's: the default group
  CHECK(test::run_undo(ctx, guarded));
  CHECK(exists());
  REQUIRE(test::sh("ip -n lgrp link set dev net1 group " + group).exit_code == 0);  // as plumb creates it
  CHECK(test::run_undo(ctx, guarded));
  CHECK_FALSE(exists());
  CHECK(test::run_undo(ctx, guarded));  // gone: nothing to do

  REQUIRE(test::sh("ip -n lgrp link add net1 type veth peer name net1p").exit_code == 0);
  CHECK(test::run_undo(ctx, by_name));  // a record of a plumb before the group: by name
  CHECK_FALSE(exists());
}
