// Downgrade safety (cni-entry/pod/del.cpp, attach.cpp, drivers/undo_run.cpp): a record a newer
// plumb wrote, with an undo operation this plumb does not know, does not wedge the pod. DEL
// undoes what it knows, keeps the rest in the record for a plumb that knows it (as the unknown
// operation's "ifUnknown" says: "skip" keeps it alone; without it, it waits with everything
// recorded before it), logs what it kept and exits 0 (a failing DEL is retried by the runtime
// forever). A record of a format this plumb does not read is kept whole, logged, and the DEL
// exits 0 too. Records are written by hand as a newer plumb would write them: this plumb's
// record of a real pod, edited, its integrity trailer recomputed.
#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <string>

#include "engine/base/json.hpp"
#include "engine/state/state.hpp"
#include "tests/support/pod_fixture.hpp"

using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;
using plumb::test::read_file;
using plumb::test::write_file;

namespace {

/// A pod "web" (container `cid`) on the fixture's default network, and its record.
struct NewerPod {
  Node node;
  PodFixture fx{node};
  std::string cid = "newer-c";
  std::string netns;
  std::string record;
  NewerPod() {
    fx.add_pod("default", "web", "");
    netns = node.add_netns("web");
    Proc add = fx.run("ADD", cid, netns, "default", "web", fx.config());
    INFO(add.out, add.err);
    REQUIRE(add.exit_code == 0);
    record = fx.state() + "/containers/" + cid + ":eth0/0-eth0.json";
    REQUIRE(std::filesystem::exists(record));
  }
  plumb::state::AttachmentRecord read() const {
    auto rec = plumb::state::decode(read_file(record), record);
    INFO((rec ? std::string() : rec.error().text()));
    REQUIRE(rec);
    return std::move(*rec);
  }
  /// The index of the first undo operation named `op`.
  static size_t index_of(const plumb::state::AttachmentRecord& rec, const std::string& op) {
    for (size_t i = 0; i < rec.undo.Size(); ++i) {
      if (rec.undo[static_cast<rapidjson::SizeType>(i)]["op"].GetString() == op) return i;
    }
    FAIL("no undo operation " << op);
    return 0;
  }
  /// Rewrites the record with `unknown` (JSON) inserted at `at` of its undo list and a member of a
  /// newer plumb's format; returns the undo list as it was.
  std::string insert(size_t at, const std::string& unknown) const {
    plumb::state::AttachmentRecord rec = read();
    const std::string before = plumb::json::dump(rec.undo);
    auto op = plumb::json::parse(unknown, "op");
    REQUIRE(op);
    auto& a = rec.undo.GetAllocator();
    rec.undo.PushBack(plumb::json::Value(rapidjson::kNullType), a);
    for (size_t i = rec.undo.Size() - 1; i > at; --i) rec.undo[static_cast<rapidjson::SizeType>(i)] = rec.undo[static_cast<rapidjson::SizeType>(i - 1)];
    rec.undo[static_cast<rapidjson::SizeType>(at)].CopyFrom(*op, a);
    auto extra = plumb::json::parse(R"({"portalState":"open"})", "extra");
    REQUIRE(extra);
    rec.extra.CopyFrom(*extra, rec.extra.GetAllocator());
    write_file(record, plumb::state::encode(rec));
    return before;
  }
  Proc del() const { return fx.run("DEL", cid, netns, "default", "web", fx.config()); }
  /// host-local address files naming the container.
  size_t held() const {
    size_t n = 0;
    for (const auto& f : PodFixture::files_under(fx.ipam_dir())) n += read_file(f).starts_with(cid + "\r\n") ? 1 : 0;
    return n;
  }
};

}  // namespace

TEST_CASE("DEL of a record with a newer plumb's skippable operation between known ones: the known ones are undone, the unknown "
          "one kept in the record for a later plumb, logged, exit 0; again and again") {
  NewerPod p;
  const std::string unknown = R"({"op":"teleport.restore","ifUnknown":"skip","portal":"p-7"})";
  REQUIRE(p.held() == 2);
  p.insert(p.read().undo.Size() / 2, unknown);

  Proc del = p.del();
  INFO(del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(link_names("web") == std::set<std::string>{"lo"});  // the pod's interface: gone
  CHECK(p.held() == 0);                                      // its addresses: released
  // The record stays, readable, reduced to the unknown operation; the newer plumb's member kept.
  REQUIRE(std::filesystem::exists(p.record));
  auto kept = p.read();
  CHECK(plumb::json::dump(kept.undo) == "[" + unknown + "]");
  REQUIRE(kept.extra.IsObject());
  CHECK(plumb::json::dump(kept.extra) == R"({"portalState":"open"})");
  // The operator is told: which operation, which record, that a newer plumb wrote it.
  CHECK(del.err.find("\"teleport.restore\"") != std::string::npos);
  CHECK(del.err.find(p.record) != std::string::npos);
  CHECK(del.err.find("newer plumb") != std::string::npos);

  // The runtime's next DEL: the same, nothing more to undo, still exit 0; the record unchanged.
  const std::string text = read_file(p.record);
  Proc again = p.del();
  INFO(again.out, again.err);
  CHECK(again.exit_code == 0);
  CHECK(read_file(p.record) == text);
  CHECK(again.err.find("\"teleport.restore\"") != std::string::npos);
}

TEST_CASE("DEL of a record with a newer plumb's operation that may not be skipped: what was recorded after it is undone, it "
          "and everything recorded before it are kept, exit 0") {
  NewerPod p;
  const std::string unknown = R"({"op":"teleport.restore","portal":"p-7"})";
  const size_t at = NewerPod::index_of(p.read(), "ipam_release") + 1;  // the addresses wait for it
  const auto before = plumb::json::parse(p.insert(at, unknown), "undo");
  REQUIRE(before);
  REQUIRE(at < before->Size());  // something was recorded after it

  Proc del = p.del();
  INFO(del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(p.held() == 2);
  auto kept = p.read();
  REQUIRE(kept.undo.Size() == at + 1);
  for (size_t i = 0; i < at; ++i) {
    const auto k = static_cast<rapidjson::SizeType>(i);
    CHECK(plumb::json::dump(kept.undo[k]) == plumb::json::dump((*before)[k]));
  }
  CHECK(plumb::json::dump(kept.undo[static_cast<rapidjson::SizeType>(at)]) == unknown);
  CHECK(del.err.find("\"teleport.restore\"") != std::string::npos);
  CHECK(del.err.find("recorded before") != std::string::npos);
}

TEST_CASE("DEL of a record of a format this plumb does not read: kept whole, logged, exit 0") {
  NewerPod p;
  std::string text = read_file(p.record);
  const size_t at = text.find(R"("format":3)");
  REQUIRE(at != std::string::npos);
  text.replace(at, 10, R"("format":4)");
  write_file(p.record, text);

  Proc del = p.del();
  INFO(del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(read_file(p.record) == text);
  CHECK(p.held() == 2);  // nothing of it undone
  CHECK(del.err.find(p.record) != std::string::npos);
  CHECK(del.err.find("format 4") != std::string::npos);
  CHECK(p.del().exit_code == 0);
}
