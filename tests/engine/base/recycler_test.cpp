// engine/base/recycler: a claim renames a pooled file into place (the same inode, no new one) and
// never over an existing name; recycle moves a file into the pool, or unlinks it once the pool is
// full; a pooled name that is not a lone regular file (a second link made by keep() before its
// rename, a symbolic link, a directory) is never handed out; keep() leaves the replaced version
// of a file in the pool; only empty directories are pooled and handed out as directories; a
// daemon worker keeps a shared pool and its listing across invocations while its path names it.
#include "engine/base/recycler.hpp"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>

#include "tests/support/syscall_count.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/worker_invocations.hpp"

using namespace plumb;
using plumb::test::count_syscalls;
using plumb::test::TempDir;
using plumb::test::WorkerInvocations;
namespace fs = std::filesystem;

namespace {

struct PoolFixture {
  TempDir t;
  Dir pool = open("pool");
  Dir work = open("work");

  Dir open(const std::string& name) {
    auto d = Dir::open(t.path + "/" + name, 0700);
    REQUIRE(d);
    return std::move(*d);
  }
  std::string in_work(const std::string& name) const { return work.path_of(name); }
  size_t pooled() const { return static_cast<size_t>(std::distance(fs::directory_iterator(pool.path()), fs::directory_iterator())); }
};

void put(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

struct stat lstat_of(const std::string& p) {
  struct stat st {};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st;
}

}  // namespace

TEST_CASE("recycle moves a file into the pool and a claim renames the same inode into place; an empty pool has none") {
  PoolFixture f;
  Recycler r(f.open("pool"));
  CHECK_FALSE(r.claim(f.work, "a"));  // empty pool: the caller creates
  put(f.in_work("old"), "old content");
  const ino_t ino = lstat_of(f.in_work("old")).st_ino;
  REQUIRE(r.recycle(f.work, "old"));
  CHECK_FALSE(fs::exists(f.in_work("old")));
  CHECK(f.pooled() == 1);
  REQUIRE(r.claim(f.work, "new"));
  CHECK(lstat_of(f.in_work("new")).st_ino == ino);
  CHECK(slurp(f.in_work("new")) == "old content");  // for the caller to rewrite
  CHECK(f.pooled() == 0);
  CHECK_FALSE(r.claim(f.work, "another"));
  CHECK_FALSE(fs::exists(f.in_work("another")));
  // A pool found empty is not listed on every claim; one whose known names other processes took
  // is listed again, and what they recycled meanwhile is found.
  put(f.in_work("mine"), "m");
  REQUIRE(r.recycle(f.work, "mine"));
  REQUIRE(f.pooled() == 1);
  fs::rename(fs::directory_iterator(f.pool.path())->path(), f.in_work("taken by another"));
  put(f.pool.path_of("123"), "x");
  CHECK(r.claim(f.work, "another"));
  CHECK(slurp(f.in_work("another")) == "x");
  REQUIRE(r.recycle(f.work, "missing"));  // nothing there: fine
}

TEST_CASE("a claim never replaces an existing name; the pooled file stays for the next claim") {
  PoolFixture f;
  put(f.pool.path_of("7"), "pooled");
  put(f.in_work("taken"), "mine");
  Recycler r(f.open("pool"));
  CHECK_FALSE(r.claim(f.work, "taken"));
  CHECK(slurp(f.in_work("taken")) == "mine");
  CHECK(f.pooled() == 1);
  CHECK(r.claim(f.work, "free"));
  CHECK(slurp(f.in_work("free")) == "pooled");
}

TEST_CASE("a full pool unlinks what is recycled; so does a file of two links or a link") {
  PoolFixture f;
  Recycler r(f.open("pool"), /*max_files=*/2);
  for (const char* n : {"a", "b", "c"}) put(f.in_work(n), n);
  REQUIRE(r.recycle(f.work, "a"));
  REQUIRE(r.recycle(f.work, "b"));
  REQUIRE(r.recycle(f.work, "c"));
  CHECK(f.pooled() == 2);
  CHECK_FALSE(fs::exists(f.in_work("c")));
  // A file with a second link elsewhere is not pooled: the other name keeps it, and a claim
  // could otherwise write into it.
  Recycler roomy(f.open("pool"));
  put(f.in_work("linked"), "shared");
  REQUIRE(::link(f.in_work("linked").c_str(), f.in_work("other").c_str()) == 0);
  REQUIRE(roomy.recycle(f.work, "linked"));
  CHECK(f.pooled() == 2);
  CHECK(slurp(f.in_work("other")) == "shared");
  fs::create_symlink(f.in_work("other"), f.in_work("lnk"));
  REQUIRE(roomy.recycle(f.work, "lnk"));
  CHECK(f.pooled() == 2);
  CHECK_FALSE(fs::is_symlink(f.in_work("lnk")));
  CHECK(slurp(f.in_work("other")) == "shared");
}

TEST_CASE("keep() leaves the version a rename replaces in the pool; a claim before that rename does not take the live file") {
  PoolFixture f;
  Recycler r(f.open("pool"));
  put(f.in_work("rec"), "version 1");
  put(f.in_work("rec.spare"), "version 2");
  const ino_t v1 = lstat_of(f.in_work("rec")).st_ino;
  r.keep(f.work, "rec");
  CHECK(lstat_of(f.in_work("rec")).st_nlink == 2);
  // A claim between keep() and the rename (another process's) sees two links and drops its name.
  Recycler other(f.open("pool"));
  CHECK_FALSE(other.claim(f.work, "grabbed"));
  CHECK_FALSE(fs::exists(f.in_work("grabbed")));
  CHECK(lstat_of(f.in_work("rec")).st_nlink == 1);
  CHECK(slurp(f.in_work("rec")) == "version 1");
  // The usual order: keep(), then the rename over the file; the old version is pooled.
  r.keep(f.work, "rec");
  fs::rename(f.in_work("rec.spare"), f.in_work("rec"));
  CHECK(slurp(f.in_work("rec")) == "version 2");
  REQUIRE(r.claim(f.work, "next.spare"));
  CHECK(lstat_of(f.in_work("next.spare")).st_ino == v1);
  CHECK(lstat_of(f.in_work("next.spare")).st_nlink == 1);
}

TEST_CASE("a pooled name that is not a regular file is never handed out") {
  PoolFixture f;
  put(f.in_work("target"), "not to be written");
  fs::create_symlink(f.in_work("target"), f.pool.path_of("1"));
  fs::create_directory(f.pool.path_of("2"));
  Recycler r(f.open("pool"));
  CHECK_FALSE(r.claim(f.work, "spare"));
  CHECK_FALSE(fs::exists(fs::symlink_status(f.in_work("spare"))));
  CHECK(slurp(f.in_work("target")) == "not to be written");
  // Listed as a regular file, then replaced by a link before the claim: removed on the way.
  put(f.pool.path_of("3"), "x");
  Recycler listed(f.open("pool"));
  put(f.in_work("seed"), "seed");
  REQUIRE(listed.recycle(f.work, "seed"));  // lists the pool: "3" is a candidate
  fs::remove(f.pool.path_of("3"));
  fs::create_symlink(f.in_work("target"), f.pool.path_of("3"));
  std::set<std::string> claimed;
  while (listed.claim(f.work, "s" + std::to_string(claimed.size()))) claimed.insert("s" + std::to_string(claimed.size()));
  for (const auto& c : claimed) {
    CHECK(fs::is_regular_file(fs::symlink_status(f.in_work(c))));
    CHECK(slurp(f.in_work(c)) == "seed");
  }
  CHECK(claimed.size() == 1);
  CHECK_FALSE(fs::exists(fs::symlink_status(f.pool.path_of("3"))));  // removed on the way
  CHECK_FALSE(fs::exists(fs::symlink_status(f.in_work("s1"))));
  CHECK(slurp(f.in_work("target")) == "not to be written");
}

TEST_CASE("an empty directory is recycled and claimed as one; a directory with entries is never pooled nor handed out") {
  PoolFixture f;
  Recycler r(f.open("pool"));
  fs::create_directory(f.in_work("full"));
  put(f.in_work("full") + "/record", "kept");
  CHECK_FALSE(r.recycle_dir(f.work, "full"));
  CHECK(slurp(f.in_work("full") + "/record") == "kept");
  CHECK_FALSE(r.recycle_dir(f.work, "missing"));
  put(f.in_work("file"), "x");
  CHECK_FALSE(r.recycle_dir(f.work, "file"));
  CHECK_FALSE(r.claim_dir(f.work, "key"));  // none pooled
  fs::create_directory(f.in_work("empty"));
  const ino_t ino = lstat_of(f.in_work("empty")).st_ino;
  REQUIRE(r.recycle_dir(f.work, "empty"));
  CHECK_FALSE(fs::exists(f.in_work("empty")));
  CHECK_FALSE(r.claim(f.work, "a file"));  // a pooled directory is no file
  REQUIRE(r.claim_dir(f.work, "key"));
  CHECK(lstat_of(f.in_work("key")).st_ino == ino);
  CHECK(fs::is_empty(f.in_work("key")));
  CHECK(f.pooled() == 0);
  // A pooled directory that got an entry (someone wrote into it) stays in the pool.
  fs::create_directory(f.pool.path_of("9"));
  put(f.pool.path_of("9") + "/stray", "s");
  Recycler fresh(f.open("pool"));
  CHECK_FALSE(fresh.claim_dir(f.work, "other"));
  CHECK_FALSE(fs::exists(f.in_work("other")));
  CHECK(slurp(f.pool.path_of("9") + "/stray") == "s");
}

TEST_CASE("place() writes a pooled file before naming it; a taken name leaves both files as they were; a killed placer's file is pooled") {
  PoolFixture f;
  // place()'s answer: true placed, false taken, nullopt no pooled file (the caller creates).
  auto place = [&](Recycler& r, const std::string& name, const std::string& data, mode_t mode) {
    auto placed = r.place(f.work, name, data, mode);
    REQUIRE(placed);
    return *placed;
  };
  Recycler r(f.open("pool"));
  CHECK(place(r, "ip", "owner", 0644) == std::nullopt);
  put(f.pool.path_of("5"), "a much longer previous content");
  put(f.in_work("taken"), "holder");
  Recycler listed(f.open("pool"));
  CHECK(place(listed, "taken", "intruder", 0644) == std::optional<bool>(false));
  CHECK(slurp(f.in_work("taken")) == "holder");
  CHECK(f.pooled() == 1);  // the written file went back to the pool
  CHECK(place(listed, "ip", "owner", 0644) == std::optional<bool>(true));
  CHECK(slurp(f.in_work("ip")) == "owner");  // only the new bytes, the old tail cut
  CHECK((lstat_of(f.in_work("ip")).st_mode & 07777) == 0644);
  CHECK(f.pooled() == 0);
  // A placer killed between its claim and its last rename leaves "claimed.<pid>" in the pool: a
  // pooled file like any other, even for a process that now has that pid.
  put(f.pool.path_of("claimed." + std::to_string(::getpid())), "left by a killed placer");
  Recycler after(f.open("pool"));
  CHECK(place(after, "ip2", "mine", 0600) == std::optional<bool>(true));
  CHECK(slurp(f.in_work("ip2")) == "mine");
  CHECK(f.pooled() == 0);
}

TEST_CASE("shared(): one Recycler per pool path until release_shared(), which forgets them but not the pooled files") {
  PoolFixture f;
  Recycler& a = Recycler::shared(f.work, "shared-pool");
  CHECK(&Recycler::shared(f.work, "shared-pool") == &a);  // a second store of the dataDir: the same listing
  CHECK(&Recycler::shared(f.work, "other-pool") != &a);
  struct stat st = lstat_of(f.in_work("shared-pool"));
  CHECK(S_ISDIR(st.st_mode));
  CHECK((st.st_mode & 07777) == 0700);
  put(f.in_work("released"), "x");
  const ino_t ino = lstat_of(f.in_work("released")).st_ino;
  REQUIRE(a.recycle(f.work, "released"));
  Recycler::release_shared();
  // A fresh Recycler of the same pool (the next invocation) lists it again and finds the file.
  Recycler& b = Recycler::shared(f.work, "shared-pool");
  REQUIRE(b.claim(f.work, "again"));
  CHECK(lstat_of(f.in_work("again")).st_ino == ino);
  Recycler::release_shared();
}

TEST_CASE("emptiness is read whole: a directory of one long-named entry, or of many, is never pooled") {
  PoolFixture f;
  Recycler r(f.open("pool"));
  fs::create_directory(f.in_work("long"));
  put(f.in_work("long") + "/" + std::string(255, 'n'), "kept");
  CHECK_FALSE(r.recycle_dir(f.work, "long"));
  fs::create_directory(f.in_work("many"));
  for (int i = 0; i < 100; ++i) put(f.in_work("many") + "/" + std::string(200, 'a') + std::to_string(i), "x");
  CHECK_FALSE(r.recycle_dir(f.work, "many"));
  CHECK(f.pooled() == 0);
  // A missing name is recycled as nothing: no error, nothing pooled.
  CHECK(r.recycle(f.work, "missing"));
  CHECK(f.pooled() == 0);
}

TEST_CASE("a worker's shared() pool is opened and listed once: a later invocation opens nothing to claim") {
  PoolFixture f;
  WorkerInvocations worker;
  fs::create_directory(f.in_work("shared-pool"));
  for (int i = 1; i <= 4; ++i) put(f.work.path_of("shared-pool") + "/" + std::to_string(i), "x");
  const std::string parent = f.t.path + "/work";
  auto invocation = [&](const std::string& name) {
    return count_syscalls("openat", [&] { REQUIRE(Recycler::shared(parent, "shared-pool").claim(f.work, name)); });
  };
  // The first opens the parent, the pool and a listing of it; the second only checks the path.
  CHECK(invocation("a") == 3);
  worker.next();
  CHECK(invocation("b") == 0);
  worker.next();
  CHECK(count_syscalls("newfstatat", [&] { (void)Recycler::shared(parent, "shared-pool"); }) == 1);
  CHECK(fs::exists(f.in_work("a")));
  CHECK(fs::exists(f.in_work("b")));
}

TEST_CASE("a worker's pool removed and made again between invocations: the next claims from the new one") {
  PoolFixture f;
  WorkerInvocations worker;
  const std::string pool = f.work.path_of("shared-pool");
  fs::create_directory(pool);
  for (int i = 1; i <= 3; ++i) put(pool + "/" + std::to_string(i), "old");
  REQUIRE(Recycler::shared(f.work, "shared-pool").claim(f.work, "a"));
  worker.next();
  // The administrator's: the old pool moved away (its files still there) and a new one made.
  fs::rename(pool, f.in_work("moved-pool"));
  fs::create_directory(pool);
  put(pool + "/7", "new");
  Recycler& r = Recycler::shared(f.work, "shared-pool");
  REQUIRE(r.claim(f.work, "b"));
  CHECK(slurp(f.in_work("b")) == "new");
  CHECK(f.pooled() == 0);  // (f.pool is another directory: nothing of it was touched)
  put(f.in_work("gone"), "g");
  REQUIRE(r.recycle(f.work, "gone"));
  CHECK(std::distance(fs::directory_iterator(pool), fs::directory_iterator()) == 1);
  CHECK(std::distance(fs::directory_iterator(f.in_work("moved-pool")), fs::directory_iterator()) == 2);  // untouched
}

TEST_CASE(
    "two workers' kept listings of one pool: both claim, never the same file, and each finds what the other recycled") {
  PoolFixture f;
  WorkerInvocations worker;
  for (int i = 1; i <= 4; ++i) put(f.pool.path_of(std::to_string(i)), "x");
  Recycler a(f.open("pool"));
  Recycler b(f.open("pool"));
  std::set<ino_t> claimed;
  auto claim = [&](Recycler& r, const std::string& name) {
    if (!r.claim(f.work, name)) return false;
    CHECK(claimed.insert(lstat_of(f.in_work(name)).st_ino).second);  // a file no other claim got
    return true;
  };
  // Both list the same four names first (a claim of a name that exists lists the pool, moves
  // nothing); then each claim tries the name the other took last, which fails to move.
  put(f.in_work("taken"), "t");
  CHECK_FALSE(a.claim(f.work, "taken"));
  CHECK_FALSE(b.claim(f.work, "taken"));
  CHECK(claim(a, "a1"));
  CHECK(claim(b, "b1"));
  CHECK(claim(a, "a2"));
  CHECK(claim(b, "b2"));
  CHECK_FALSE(claim(a, "a3"));
  CHECK_FALSE(claim(b, "b3"));
  CHECK(claimed.size() == 4);
  CHECK(f.pooled() == 0);
  // A's next invocation recycles a file; B's next claims it: a listing from an earlier invocation
  // that runs out is listed again once.
  worker.next();
  REQUIRE(a.recycle(f.work, "a1"));
  worker.next();
  claimed.clear();
  CHECK(claim(b, "b4"));
  CHECK(f.pooled() == 0);
}
