// A daemon worker's invocations of engine/state one after another: the state directory's
// directories are kept across invocations while their names still name them, and let go of (the
// new ones used) when they were moved, removed or replaced.
#include <doctest/doctest.h>

#include <filesystem>
#include <optional>
#include <string>

#include "engine/state/state.hpp"
#include "tests/support/state_record.hpp"
#include "tests/support/syscall_count.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/worker_invocations.hpp"

using namespace plumb;
using plumb::test::put;
using plumb::test::record;
using plumb::test::TempDir;
namespace fs = std::filesystem;

namespace {

/// One pod's ADD and DEL through a StateDir of `root` (one invocation of a worker): its key
/// locked, its record written (an intent, then complete), removed, and the key released.
void pod_add_del(const std::string& root, const std::string& cid) {
  state::StateDir dir(root);
  const state::Key key{cid, "eth0"};
  auto lock = dir.lock(key);
  REQUIRE(lock);
  auto rec = record(cid, "eth0", 0, "eth0");
  rec.phase = "adding";
  REQUIRE(dir.write(rec));
  rec.phase = "ready";
  REQUIRE(dir.write(rec));
  REQUIRE(dir.remove(rec));
  dir.release(*lock, key);
}

/// One pod's ADD through a StateDir of `root`: its key locked and its complete record written.
void pod_add(const std::string& root, const std::string& cid) {
  state::StateDir dir(root);
  auto lock = dir.lock({cid, "eth0"});
  REQUIRE(lock);
  auto rec = record(cid, "eth0", 0, "eth0");
  REQUIRE(dir.write(rec));
}

}  // namespace

TEST_CASE("a daemon worker's later invocation opens none of the state directory's directories again") {
  TempDir t;
  for (int i = 1; i <= 8; ++i) put(t.path + "/recycled/" + std::to_string(i), "x");
  fs::create_directory(t.path + "/recycled/9");  // a key's directory, for the first to claim
  fs::create_directory(t.path + "/locks");
  fs::create_directory(t.path + "/containers");
  plumb::test::WorkerInvocations worker;
  const long first = plumb::test::count_syscalls("openat", [&] { pod_add_del(t.path, "c1"); });
  worker.next();
  const long second = plumb::test::count_syscalls("openat", [&] { pod_add_del(t.path, "c2"); });
  // The root, locks/, recycled/ (and its listing) and containers/: opened by the first only.
  INFO("openat: first ", first, ", second ", second);
  CHECK(first - second == 5);
  worker.next();
  const long third = plumb::test::count_syscalls("openat", [&] { pod_add_del(t.path, "c3"); });
  CHECK(third == second);
  CHECK_FALSE(fs::exists(t.path + "/containers/c3:eth0"));
  CHECK_FALSE(fs::exists(t.path + "/locks/c3:eth0"));
}

TEST_CASE(
    "a worker's state directory moved away and made again between invocations: the next writes into the new one") {
  TempDir t;
  const std::string root = t.path + "/state";
  plumb::test::WorkerInvocations worker;
  pod_add(root, "c1");
  worker.next();
  fs::rename(root, t.path + "/moved");  // the administrator's
  pod_add(root, "c2");
  CHECK(fs::exists(root + "/containers/c2:eth0/0-eth0.json"));
  CHECK(fs::exists(root + "/locks/c2:eth0"));
  CHECK_FALSE(fs::exists(t.path + "/moved/containers/c2:eth0"));
  CHECK_FALSE(fs::exists(t.path + "/moved/locks/c2:eth0"));
  // Removed whole: the next invocation makes it again.
  worker.next();
  fs::remove_all(root);
  pod_add(root, "c3");
  CHECK(fs::exists(root + "/containers/c3:eth0/0-eth0.json"));
  // One subdirectory replaced (the root kept): its new one is used.
  worker.next();
  fs::rename(root + "/locks", t.path + "/moved-locks");
  fs::create_directory(root + "/locks");
  pod_add(root, "c4");
  CHECK(fs::exists(root + "/locks/c4:eth0"));
  CHECK_FALSE(fs::exists(t.path + "/moved-locks/c4:eth0"));
}

TEST_CASE(
    "a key's lock holds the locks directory it was taken in, not a descriptor of its own; released, its file goes") {
  TempDir t;
  state::StateDir dir(t.path);
  const state::Key key{"c1", "eth0"};
  std::optional<state::KeyLock> lock;
  CHECK(plumb::test::count_syscalls("fcntl", [&] { lock = *dir.lock(key); }) == 0);
  fs::rename(t.path + "/locks", t.path + "/locks.moved");  // behind its back: the lock's directory goes with it
  dir.release(*lock, key);
  CHECK_FALSE(fs::exists(t.path + "/locks.moved/c1:eth0"));
}
