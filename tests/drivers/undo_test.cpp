// The typed undo journal's reader (drivers/undo.cpp): a record's undo list is checked whole before
// anything of it runs; an operation this binary does not know is a newer plumb's (kNewerRecord), a
// malformed one is damage (kDecode); both name the record file and the operation. And a link
// deletion bound to a link group, against the kernel in a private node. Unwinding a record
// (drivers/undo_run.cpp) keeps what a newer plumb wrote, as its "ifUnknown" says.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "drivers/undo.hpp"
#include "engine/base/json.hpp"
#include "engine/kernel/link.hpp"
#include "tests/support/driver_harness.hpp"
#include "tests/support/pod_fixture.hpp"
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

namespace {

/// A scratch directory with files "a" and "b" (what two devinfo_remove operations remove), and
/// the undo list `middle` placed between their operations.
struct TwoFiles {
  std::string dir;
  TwoFiles() {
    char tmpl[] = "/tmp/plumb-undo-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    for (const char* f : {"a", "b"}) test::write_file(dir + "/" + f, "{}");
  }
  ~TwoFiles() { std::filesystem::remove_all(dir); }
  TwoFiles(const TwoFiles&) = delete;
  TwoFiles& operator=(const TwoFiles&) = delete;
  json::Document undo(const std::string& middle) const {
    return list(R"([{"op":"devinfo_remove","path":")" + dir + R"(/a"},)" + middle + R"(,{"op":"devinfo_remove","path":")" + dir + R"(/b"}])");
  }
  bool has(const char* f) const { return std::filesystem::exists(dir + "/" + f); }
};

}  // namespace

TEST_CASE("unwind keeps a newer plumb's operation: one that may be skipped alone, one that may not with everything before it") {
  drivers::Context ctx;
  const std::string rec = "/state/containers/c:eth0/0-eth0.json";
  SUBCASE("ifUnknown: skip: both known operations run, the unknown one is kept verbatim") {
    TwoFiles f;
    const std::string unknown = R"({"op":"teleport.restore","ifUnknown":"skip","portal":7})";
    auto undo = f.undo(unknown);
    drivers::undo::Kept kept;
    REQUIRE(drivers::undo::unwind(ctx, undo, true, rec, &kept));
    CHECK_FALSE(f.has("a"));
    CHECK_FALSE(f.has("b"));
    CHECK(json::dump(kept.entries) == "[" + unknown + "]");
    CHECK(kept.unknown == std::vector<std::string>{"teleport.restore"});
  }
  SUBCASE("no ifUnknown: what was recorded after it runs, it and what was recorded before it are kept, in order") {
    TwoFiles f;
    const std::string unknown = R"({"op":"teleport.restore","portal":7})";
    auto undo = f.undo(unknown);
    drivers::undo::Kept kept;
    REQUIRE(drivers::undo::unwind(ctx, undo, true, rec, &kept));
    CHECK(f.has("a"));
    CHECK_FALSE(f.has("b"));
    CHECK(json::dump(kept.entries) == R"([{"op":"devinfo_remove","path":")" + f.dir + R"(/a"},)" + unknown + "]");
    CHECK(kept.unknown == std::vector<std::string>{"teleport.restore"});
  }
  SUBCASE("a rollback-only unknown operation of a complete attachment would not run anyway: dropped") {
    TwoFiles f;
    auto undo = f.undo(R"({"op":"teleport.restore","rollbackOnly":true})");
    drivers::undo::Kept kept;
    REQUIRE(drivers::undo::unwind(ctx, undo, true, rec, &kept));
    CHECK_FALSE(f.has("a"));
    CHECK_FALSE(f.has("b"));
    CHECK(kept.empty());
  }
  SUBCASE("without a place to keep it, nothing runs: the newer plumb's record is refused") {
    TwoFiles f;
    auto undo = f.undo(R"({"op":"teleport.restore","ifUnknown":"skip"})");
    auto st = drivers::undo::unwind(ctx, undo, true, rec);
    REQUIRE_FALSE(st);
    CHECK(st.error().cni_code == cni_code::kNewerRecord);
    CHECK(f.has("a"));
    CHECK(f.has("b"));
  }
  SUBCASE("a malformed operation is damage still, whatever it says") {
    TwoFiles f;
    auto undo = f.undo(R"({"op":"link_del","where":"node","ifUnknown":"skip"})");
    drivers::undo::Kept kept;
    auto st = drivers::undo::unwind(ctx, undo, true, rec, &kept);
    REQUIRE_FALSE(st);
    CHECK(st.error().cni_code == cni_code::kDecode);
    CHECK(f.has("a"));
  }
}
