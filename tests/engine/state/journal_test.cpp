// State records and the write-ahead undo log (no privileges).
#include "engine/state/journal.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "engine/state/state.hpp"
#include "tests/support/temp_dir.hpp"

using namespace plumb;

using plumb::test::TempDir;

namespace {
json::Document op(const char* name) {
  json::Document d(rapidjson::kObjectType);
  json::set_string(d, "op", name, d.GetAllocator());
  return d;
}

/// A record of container `cid`, interface eth0 (key "<cid>:eth0").
state::AttachmentRecord record_of(const char* cid) {
  state::AttachmentRecord r;
  r.container_id = cid;
  r.cni_ifname = "eth0";
  r.ifname = "eth0";
  return r;
}
}  // namespace

TEST_CASE("the journal persists each intent before returning, and unwind runs newest first") {
  TempDir t;
  state::StateDir dir(t.path);
  state::AttachmentRecord r = record_of("c1");
  txn::Journal j(dir, r);
  REQUIRE(j.will(op("first")));
  const state::Key key{"c1", "eth0"};
  auto found = dir.read(key);
  REQUIRE(found);
  REQUIRE(found->records.size() == 1);
  CHECK(found->records[0].undo.Size() == 1);
  REQUIRE(j.will(op("shared"), /*rollback_only=*/true));
  REQUIRE(j.will(op("second")));
  found = dir.read(key);
  auto* on_disk = &found->records;
  REQUIRE((*on_disk)[0].undo.Size() == 3);

  std::vector<std::string> ran;
  auto exec = [&](const json::Value& o) -> Status {
    ran.push_back(o["op"].GetString());
    return {};
  };
  REQUIRE(txn::unwind((*on_disk)[0].undo, /*complete=*/false, exec));
  CHECK(ran == std::vector<std::string>{"second", "shared", "first"});
  ran.clear();
  REQUIRE(txn::unwind((*on_disk)[0].undo, /*complete=*/true, exec));
  CHECK(ran == std::vector<std::string>{"second", "first"});  // rollback-only skipped after a completed ADD

  REQUIRE(dir.remove(r));
  CHECK(dir.read(key)->empty());
  CHECK_FALSE(std::filesystem::exists(t.path + "/containers/c1:eth0"));
}

TEST_CASE("will_later is persisted by the next intent or by flush, not before") {
  TempDir t;
  state::StateDir dir(t.path);
  state::AttachmentRecord r = record_of("c1");
  const state::Key key{"c1", "eth0"};
  txn::Journal j(dir, r);
  auto on_disk = [&]() -> std::vector<std::string> {
    auto found = dir.read(key);
    REQUIRE(found);
    std::vector<std::string> ops;
    if (found->records.empty()) return ops;
    for (auto& o : found->records[0].undo.GetArray()) ops.push_back(o["op"].GetString());
    return ops;
  };
  j.will_later(op("release"));
  CHECK(on_disk().empty());  // registered, not written
  REQUIRE(j.will(op("link")));
  CHECK(on_disk() == std::vector<std::string>{"release", "link"});  // one write for both
  auto inode = [&] {
    struct stat st {};
    REQUIRE(::stat((t.path + "/containers/c1:eth0/0-eth0.json").c_str(), &st) == 0);
    return st.st_ino;
  };
  const auto before = inode();
  REQUIRE(j.flush());  // nothing pending: no write (a write swaps another file in)
  CHECK(inode() == before);
  j.will_later(op("later"));
  CHECK(on_disk() == std::vector<std::string>{"release", "link"});
  REQUIRE(j.flush());
  CHECK(inode() != before);
  CHECK(on_disk() == std::vector<std::string>{"release", "link", "later"});
  REQUIRE(dir.remove(r));
}

TEST_CASE("unwind tries every operation and reports the first failure") {
  json::Document undo;
  undo.Parse(R"([{"op":"a"},{"op":"b"},{"op":"c"}])");
  std::vector<std::string> ran;
  auto st = txn::unwind(undo, true, [&](const json::Value& o) -> Status {
    std::string name = o["op"].GetString();
    ran.push_back(name);
    if (name != "b") return fail(cni_code::kKernel, "failed " + name);
    return {};
  });
  REQUIRE_FALSE(st);
  CHECK(st.error().msg == "failed c");
  CHECK(ran == std::vector<std::string>{"c", "b", "a"});
}

TEST_CASE("a journal whose state write fails refuses the change (read-only state directory)") {
  if (geteuid() == 0) {
    // root ignores directory permissions: use a path under a regular file instead.
    TempDir t;
    std::string file = t.path + "/not-a-dir";
    FILE* f = fopen(file.c_str(), "w");
    fclose(f);
    state::StateDir dir(file);
    state::AttachmentRecord r;
    r.container_id = "c";
    r.ifname = "eth0";
    txn::Journal j(dir, r);
    auto st = j.will(op("x"));
    REQUIRE_FALSE(st);
    CHECK(st.error().msg.find("record intent") != std::string::npos);
    CHECK(r.undo.Size() == 0);
    // An intent registered for later fails the same way when it is flushed.
    j.will_later(op("later"));
    auto flushed = j.flush();
    REQUIRE_FALSE(flushed);
    CHECK(flushed.error().msg.find("record intent") != std::string::npos);
  } else {
    TempDir t;
    chmod(t.path.c_str(), 0500);
    state::StateDir dir(t.path);
    state::AttachmentRecord r;
    r.container_id = "c";
    r.ifname = "eth0";
    txn::Journal j(dir, r);
    CHECK_FALSE(j.will(op("x")));
    CHECK(r.undo.Size() == 0);
    chmod(t.path.c_str(), 0700);
  }
}

TEST_CASE("key locks exclude each other across processes") {
  TempDir t;
  state::StateDir dir(t.path);
  auto lock = dir.lock({"c1", "eth0"});
  REQUIRE(lock);
  pid_t pid = fork();
  if (pid == 0) {
    // The child must not get the lock while the parent holds it: try non-blocking via flock.
    int fd = open((t.path + "/locks/c1:eth0").c_str(), O_RDWR);
    _exit(flock(fd, LOCK_EX | LOCK_NB) == 0 ? 1 : 0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
