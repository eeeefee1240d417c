// State records (engine/state): verifiable as a whole (format 3's integrity trailer), strictly
// typed in every format, read only from regular files and never through a link; every kind of
// damage is reported by path while the intact records of the key are still read; keys are
// (container ID, CNI_IFNAME); records of older plumbs (one directory per container) still belong
// to the key their index-0 record names.
#include "engine/state/state.hpp"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>

#include "tests/support/state_record.hpp"
#include "tests/support/syscall_count.hpp"
#include "tests/support/temp_dir.hpp"

using namespace plumb;
using plumb::test::put;
using plumb::test::record;
using plumb::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto pos = s.find(from);
  REQUIRE(pos != std::string::npos);
  return s.replace(pos, from.size(), to);
}

/// The one intact record `dir` holds for `key` (a test failure when there is not exactly one).
state::AttachmentRecord read_one(const state::StateDir& dir, const state::Key& key) {
  auto got = dir.read(key);
  REQUIRE(got);
  REQUIRE(got->records.size() == 1);
  return std::move(got->records[0]);
}

}  // namespace

TEST_CASE("format 3 round-trips and ends with its integrity trailer") {
  auto r = record("abc", "eth0", 2, "net2");
  r.selection = "default/blue";
  r.result.Parse(R"({"cniVersion":"1.1.0"})");
  const std::string text = state::encode(r);
  CHECK(text.find(R"(,"integrity":{"length":)") != std::string::npos);
  CHECK(text.ends_with("\"}}"));
  auto back = state::decode(text, "test");
  REQUIRE(back);
  CHECK(back->format == 3);
  CHECK(back->cni_ifname == "eth0");
  CHECK(back->index == 2);
  CHECK(back->selection == "default/blue");
  CHECK(json::dump(back->undo) == json::dump(r.undo));
}

TEST_CASE("format 3's bytes (golden): every member in order, the embedded documents as written, the trailer last") {
  // Pinned so that a change to how records are written (encode streams them) cannot change what
  // older plumbs and the damaged-record checks read.
  state::AttachmentRecord r;
  r.container_id = "c\"1";
  r.cni_ifname = "eth0";
  r.index = 2;
  r.ifname = "net2";
  r.network = "blue";
  r.selection = "default/blue";
  r.is_default = true;
  r.pod_namespace = "default";
  r.pod_name = "p\u00e9";
  r.netns = "/run/netns/x";
  r.phase = "ready";
  r.ipam_owner = "owner";
  r.disable_check = true;
  r.disable_gc = true;
  r.config.Parse(R"([{"type":"bridge","n":1.5,"neg":-3,"big":18446744073709551615,"esc":"a\tb\u0001"}])");
  r.result.Parse(R"({"cniVersion":"1.1.0","ips":[]})");
  r.status.Parse(R"({"name":"x","default":false})");
  r.undo.Parse(R"([{"op":"link_del","where":"node","name":"veth1","rollbackOnly":true}])");
  CHECK(state::encode(r) == R"json({"format":3,"containerID":"c\"1","cniIfname":"eth0","index":2,"ifname":"net2","network":"blue","selection":"default/blue","default":true,"podNamespace":"default","podName":"pé","netns":"/run/netns/x","phase":"ready","ipamOwner":"owner","disableCheck":true,"disableGC":true,"config":[{"type":"bridge","n":1.5,"neg":-3,"big":18446744073709551615,"esc":"a\tb\u0001"}],"result":{"cniVersion":"1.1.0","ips":[]},"status":{"name":"x","default":false},"undo":[{"op":"link_del","where":"node","name":"veth1","rollbackOnly":true}],"integrity":{"length":522,"fnv1a64":"3fed3eff3bed4433"}})json");
  state::AttachmentRecord adding;  // while adding: null documents, an empty undo list
  adding.container_id = "c";
  adding.ifname = "eth0";
  adding.network = "n";
  CHECK(state::encode(adding) == R"json({"format":3,"containerID":"c","cniIfname":"","index":0,"ifname":"eth0","network":"n","selection":"","default":false,"podNamespace":"","podName":"","netns":"","phase":"adding","config":null,"result":null,"status":null,"undo":[],"integrity":{"length":227,"fnv1a64":"d50d971836fc17bf"}})json");
}

TEST_CASE("a format-3 record that is not whole is damaged, whatever was changed") {
  const std::string text = state::encode(record("abc", "eth0", 0, "eth0"));
  const std::vector<std::pair<std::string, std::string>> damaged = {
      {"truncated", text.substr(0, text.size() / 2)},
      {"an undo entry dropped", replace(text, R"({"op":"link_del","where":"node","name":"veth1"},)", "")},
      {"a value edited", replace(text, "\"veth1\"", "\"veth2\"")},
      {"the trailer removed", text.substr(0, text.find(",\"integrity\"")) + "}"},
      {"garbage", "\x01\x02not json"},
      {"empty", ""},
  };
  for (const auto& [what, bad] : damaged) {
    CAPTURE(what);
    auto r = state::decode(bad, "/s/containers/abc:eth0/0-eth0.json");
    REQUIRE_FALSE(r);
    CHECK(r.error().cni_code == cni_code::kDecode);
    CHECK(r.error().msg.find("/s/containers/abc:eth0/0-eth0.json") != std::string::npos);
  }
}

TEST_CASE("every format is strictly typed: the undo list must be a list, fields their type") {
  // Format 2 (no trailer, as main wrote them): accepted when well typed...
  const std::string v2 = R"({"format":2,"containerID":"c","index":0,"ifname":"eth0","network":"n","phase":"ready",)"
                         R"("config":[],"result":null,"status":null,"undo":[]})";
  CHECK(state::decode(v2, "p"));
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {R"("undo":[])", R"("undo":"x")"},
           {R"("undo":[])", R"("undo":{})"},
           {R"("index":0)", R"("index":"0")"},
           {R"("phase":"ready")", R"("phase":"gone")"},
           {R"("config":[])", R"("config":7)"},
           {R"("format":2,)", R"("format":"2",)"},
           {R"("ifname":"eth0",)", ""},
       }) {
    CAPTURE(to);
    auto r = state::decode(replace(v2, from, to), "rec");
    REQUIRE_FALSE(r);
    CHECK(r.error().cni_code == cni_code::kDecode);
    CHECK(r.error().msg.find("rec") != std::string::npos);
  }
  auto newer = state::decode(replace(v2, R"("format":2)", R"("format":4)"), "rec");
  REQUIRE_FALSE(newer);
  CHECK(newer.error().cni_code == cni_code::kNewerRecord);
  // Nesting beyond the records' bound is a decode error, not a crash.
  auto deep = state::decode(replace(v2, R"("result":null)", R"("result":)" + std::string(200, '[') + std::string(200, ']')), "rec");
  REQUIRE_FALSE(deep);
  CHECK(deep.error().msg.find("nested deeper than 128") != std::string::npos);
}

TEST_CASE("read() returns the intact records of a key and every damaged one by path") {
  TempDir t;
  state::StateDir dir(t.path);
  const state::Key key{"c1", "eth0"};
  for (int i = 0; i < 6; ++i) {
    auto r = record("c1", "eth0", i, "net" + std::to_string(i));
    REQUIRE(dir.write(r));
  }
  const std::string d = t.path + "/containers/c1:eth0/";
  put(d + "1-net1.json", "");                                   // empty
  fs::remove(d + "2-net2.json");
  REQUIRE(::mkfifo((d + "2-net2.json").c_str(), 0600) == 0);   // a FIFO: must not block
  fs::remove(d + "3-net3.json");
  fs::create_directory(d + "3-net3.json");                      // a directory
  put(t.path + "/elsewhere.json", slurp(d + "4-net4.json"));
  fs::remove(d + "4-net4.json");
  fs::create_symlink(t.path + "/elsewhere.json", d + "4-net4.json");  // a link, even to a valid record
  fs::remove(d + "5-net5.json");
  if (::mknod((d + "5-net5.json").c_str(), S_IFCHR | 0600, makedev(1, 5)) != 0) put(d + "5-net5.json", "{");  // endless, or truncated
  put(d + "0-net0.json.tmp.0123456789abcdef", "a killed writer's");
  auto got = dir.read(key);
  REQUIRE(got);
  REQUIRE(got->records.size() == 1);
  CHECK(got->records[0].index == 0);
  CHECK(got->records[0].origin == d + "0-net0.json");
  REQUIRE(got->damaged.size() == 5);
  for (const auto& dmg : got->damaged) {
    CAPTURE(dmg.error.text());
    CHECK(dmg.error.cni_code == cni_code::kDecode);
    CHECK(dmg.error.text().find(dmg.path) != std::string::npos);
  }
  CHECK_FALSE(fs::exists(d + "0-net0.json.tmp.0123456789abcdef"));
  CHECK(slurp(t.path + "/elsewhere.json").size() > 10);

  // Quarantine moves a damaged record out of the key, keeping it; the key is then gone.
  for (const auto& dmg : got->damaged) {
    auto moved = dir.quarantine(key, dmg.path);
    REQUIRE(moved);
    CHECK(moved->starts_with(t.path + "/quarantine/c1:eth0/"));
    CHECK_FALSE(fs::exists(fs::symlink_status(dmg.path)));
  }
  REQUIRE(dir.remove(got->records[0]));
  CHECK(dir.read(key)->empty());
  CHECK_FALSE(fs::exists(t.path + "/containers/c1:eth0"));
  CHECK(fs::exists(t.path + "/quarantine/c1:eth0/4-net4.json"));
}

TEST_CASE("a record in the wrong place is damaged: another container's, another interface's, another name's") {
  TempDir t;
  state::StateDir dir(t.path);
  auto mine = record("c1", "eth0", 0, "eth0");
  REQUIRE(dir.write(mine));
  auto other = record("c2", "eth0", 1, "net1");
  put(t.path + "/containers/c1:eth0/1-net1.json", state::encode(other));
  auto renamed = record("c1", "eth0", 2, "net2");
  put(t.path + "/containers/c1:eth0/3-net3.json", state::encode(renamed));
  auto got = dir.read({"c1", "eth0"});
  REQUIRE(got);
  CHECK(got->records.size() == 1);
  CHECK(got->damaged.size() == 2);
}

TEST_CASE("keys are (container ID, CNI_IFNAME); a legacy directory belongs to the ifname of its index-0 record") {
  TempDir t;
  state::StateDir dir(t.path);
  auto a = record("c1", "eth0", 0, "eth0");
  auto b = record("c1", "eth1", 0, "eth1");
  REQUIRE(dir.write(a));
  REQUIRE(dir.write(b));
  CHECK(dir.read({"c1", "eth0"})->records.size() == 1);
  CHECK(dir.read({"c1", "eth1"})->records.size() == 1);
  // main's layout: containers/<id>/<index>-<ifname>.json, format 2, no cniIfname.
  const std::string v2 = R"({"format":2,"containerID":"old","index":0,"ifname":"eth0","network":"n","phase":"ready",)"
                         R"("config":[],"result":null,"status":null,"undo":[]})";
  put(t.path + "/containers/old/0-eth0.json", v2);
  put(t.path + "/containers/old/1-net1.json", replace(replace(v2, R"("index":0)", R"("index":1)"), R"("ifname":"eth0")", R"("ifname":"net1")"));
  auto legacy = dir.read({"old", "eth0"});
  REQUIRE(legacy);
  CHECK(legacy->records.size() == 2);
  CHECK(legacy->records[1].cni_ifname == "eth0");
  CHECK(dir.read({"old", "eth1"})->empty());  // DEL with another ifname leaves them
  auto keys = dir.keys();
  REQUIRE(keys);
  CHECK(*keys == std::vector<state::Key>{{"c1", "eth0"}, {"c1", "eth1"}, {"old", "eth0"}});
  CHECK(dir.has_records("old"));
  CHECK_FALSE(dir.has_records("c"));

  // Locks of a legacy container include the older plumb's lock; release removes both when empty.
  auto lock = dir.lock({"old", "eth0"});
  REQUIRE(lock);
  CHECK(lock->legacy.has_value());
  for (auto& r : legacy->records) REQUIRE(dir.remove(r));
  dir.release(*lock, {"old", "eth0"});
  CHECK_FALSE(fs::exists(t.path + "/locks/old"));
  CHECK_FALSE(fs::exists(t.path + "/locks/old:eth0"));
  CHECK_FALSE(fs::exists(t.path + "/containers/old"));
}

TEST_CASE("an empty record directory (an ADD killed after making it) holds no records: release() removes it") {
  TempDir t;
  state::StateDir dir(t.path);
  fs::create_directories(t.path + "/containers/c1:eth0");
  auto live = record("c2", "eth0", 0, "eth0");
  REQUIRE(dir.write(live));
  CHECK_FALSE(dir.has_records("c1"));  // the cluster IPAM's GC releases c1's addresses
  CHECK(dir.has_records("c2"));
  auto keys = dir.keys();
  REQUIRE(keys);
  CHECK(*keys == std::vector<state::Key>{{"c1", "eth0"}, {"c2", "eth0"}});  // GC visits it
  {
    auto lock = dir.lock({"c1", "eth0"});  // dropped at the end of the block, as a verb's
    REQUIRE(lock);
    CHECK(dir.read({"c1", "eth0"})->empty());
    dir.release(*lock, {"c1", "eth0"});
  }
  CHECK_FALSE(fs::exists(t.path + "/containers/c1:eth0"));
  CHECK_FALSE(fs::exists(t.path + "/locks/c1:eth0"));
  CHECK(dir.read({"c2", "eth0"})->records.size() == 1);
  // A directory holding something else than records is kept, and counts.
  put(t.path + "/containers/c3:eth0/notes", "x");
  CHECK(dir.has_records("c3"));
  auto lock3 = dir.lock({"c3", "eth0"});
  REQUIRE(lock3);
  dir.release(*lock3, {"c3", "eth0"});
  CHECK(fs::exists(t.path + "/containers/c3:eth0/notes"));
}

TEST_CASE("links planted in the state directory are refused by path, their targets untouched") {
  TempDir t;
  state::StateDir dir(t.path + "/state");
  fs::create_directories(t.path + "/state/locks");
  fs::create_directories(t.path + "/elsewhere");
  fs::create_symlink(t.path + "/victim", t.path + "/state/locks/c1:eth0");
  auto lock = dir.lock({"c1", "eth0"});
  REQUIRE_FALSE(lock);
  CHECK(lock.error().msg.find(t.path + "/state/locks/c1:eth0") != std::string::npos);
  CHECK_FALSE(fs::exists(t.path + "/victim"));
  fs::create_directories(t.path + "/state/containers");
  fs::create_symlink(t.path + "/elsewhere", t.path + "/state/containers/c2:eth0");
  auto r = record("c2", "eth0", 0, "eth0");
  CHECK_FALSE(dir.write(r));
  CHECK(fs::is_empty(t.path + "/elsewhere"));
  auto got = dir.read({"c2", "eth0"});
  REQUIRE(got);
  REQUIRE(got->damaged.size() == 1);
  CHECK(got->damaged[0].path == t.path + "/state/containers/c2:eth0");
}

TEST_CASE("write() keeps the key's directory open, and follows it when the directory was removed") {
  TempDir t;
  state::StateDir dir(t.path);
  const state::Key key{"c1", "eth0"};
  auto first = record("c1", "eth0", 0, "net0");
  first.phase = "adding";
  REQUIRE(dir.write(first));
  first.phase = "ready";
  REQUIRE(dir.write(first));  // the second version goes through the directory kept open
  REQUIRE(dir.read(key)->records.size() == 1);
  // The last record removed, the directory goes with it; the next record must land in a new
  // directory at the same path, not in the removed one the first writes held open.
  REQUIRE(dir.remove(first));
  REQUIRE_FALSE(fs::exists(t.path + "/containers/c1:eth0"));
  auto second = record("c1", "eth0", 1, "net1");
  REQUIRE(dir.write(second));
  CHECK(read_one(dir, key).ifname == "net1");
  CHECK(fs::exists(t.path + "/containers/c1:eth0/1-net1.json"));
  // A directory removed behind this process's back (as a test, since the key's lock keeps other
  // plumb processes out) is followed the same way.
  fs::remove_all(t.path + "/containers/c1:eth0");
  auto third = record("c1", "eth0", 2, "net2");
  REQUIRE(dir.write(third));
  CHECK(fs::exists(t.path + "/containers/c1:eth0/2-net2.json"));
}

TEST_CASE("write() writes a key's later versions through the directory its first version opened") {
  TempDir t;
  state::StateDir dir(t.path);
  auto rec = record("c1", "eth0", 0, "net0");
  rec.phase = "adding";
  REQUIRE(dir.write(rec));
  // Moved aside (as a test only: under the key's lock no plumb process moves it), the directory
  // still open receives the next version; a write that opened the path again would make a new one.
  fs::rename(t.path + "/containers/c1:eth0", t.path + "/containers/moved");
  auto second = record("c1", "eth0", 1, "net1");
  REQUIRE(dir.write(second));
  CHECK(fs::exists(t.path + "/containers/moved/1-net1.json"));
  CHECK_FALSE(fs::exists(t.path + "/containers/c1:eth0"));
}

TEST_CASE("a version that cannot be written leaves the record's previous one, and the next write works (a file size limit cuts it short)") {
  TempDir t;
  state::StateDir dir(t.path);
  auto rec = record("c1", "eth0", 0, "eth0");
  rec.phase = "adding";
  const std::string path = t.path + "/containers/c1:eth0/0-eth0.json";
  REQUIRE(dir.write(rec));  // the first version
  rec.network = "second";
  REQUIRE(dir.write(rec));  // through the spare, whose descriptors are now held
  const std::string before = slurp(path);
  // The next version is longer than the limit allows (SIGXFSZ ignored: the write returns short,
  // then EFBIG); it must not reach the record.
  rec.network = std::string(4096, 'x');
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);
  rlimit tight = old;
  tight.rlim_cur = before.size() + 100;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &tight) == 0);
  auto st = dir.write(rec);
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &old) == 0);
  ::signal(SIGXFSZ, old_handler);
  REQUIRE_FALSE(st);
  CHECK(st.error().msg.find(t.path + "/containers/c1:eth0/") != std::string::npos);
  CHECK(slurp(path) == before);
  CHECK(read_one(dir, {"c1", "eth0"}).network == "second");
  // The descriptors were dropped with the failure: the next versions are written whole.
  rec.network = "third";
  REQUIRE(dir.write(rec));
  // Not damaged: nothing of the failed version is left in it.
  CHECK(read_one(dir, {"c1", "eth0"}).network == "third");
  rec.phase = "ready";
  REQUIRE(dir.write(rec));
  CHECK(read_one(dir, {"c1", "eth0"}).phase == "ready");
  CHECK_FALSE(fs::exists(path + ".spare"));
}

TEST_CASE("a second pod's directory, records, spares and lock file are recycled: its ADD and DEL make and free no inode") {
  TempDir t;
  auto inode = [](const fs::path& p) {
    struct stat st {};
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    CHECK(S_ISREG(st.st_mode));
    CHECK(st.st_nlink == 1);
    return st.st_ino;
  };
  auto inode_of_dir = [](const fs::path& p) {
    struct stat st {};
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    CHECK(S_ISDIR(st.st_mode));
    CHECK(fs::is_empty(p) == (p.parent_path().filename() == "recycled"));
    return st.st_ino;
  };
  // One pod's life as an ADD and DEL write it (each in a process of its own: a StateDir of its
  // own): the lock, each record's versions (the first, one through the spare, the complete one);
  // the inodes of its files while it lives; then the records removed and the lock released.
  auto pod = [&](const std::string& cid) {
    state::StateDir dir(t.path);
    const state::Key key{cid, "eth0"};
    auto lock = dir.lock(key);
    REQUIRE(lock);
    for (int i = 0; i < 3; ++i) {
      auto r = record(cid, "eth0", i, "net" + std::to_string(i));
      r.phase = "adding";
      REQUIRE(dir.write(r));
      r.network = "intent";
      REQUIRE(dir.write(r));
      r.phase = "ready";
      REQUIRE(dir.write(r));
    }
    std::set<ino_t> live{inode_of_dir(t.path + "/containers/" + key.name())};
    for (const auto& e : fs::recursive_directory_iterator(t.path)) {
      if (e.is_regular_file() && e.path().parent_path().filename() != "recycled") live.insert(inode(e.path()));
    }
    state::StateDir del(t.path);
    auto got = del.read(key);
    REQUIRE(got);
    CHECK(got->records.size() == 3);
    for (const auto& r : got->records) REQUIRE(del.remove(r));
    del.release(*lock, key);
    return live;
  };
  auto pooled = [&] {
    std::set<ino_t> out;
    for (const auto& e : fs::directory_iterator(t.path + "/recycled")) {
      out.insert(e.is_directory() ? inode_of_dir(e.path()) : inode(e.path()));
    }
    return out;
  };
  CHECK(pod("first").size() == 5);  // its directory, three records and the lock file
  // The first pod's six inodes: its directory, three records, the lock file, and one spare (each
  // complete version leaves the one it replaced, which the next record's first version takes).
  const std::set<ino_t> after_first = pooled();
  CHECK(after_first.size() == 6);
  const std::set<ino_t> second = pod("second");
  CHECK(second.size() == 5);
  for (ino_t i : second) CHECK(after_first.contains(i));
  CHECK(pooled() == after_first);
  CHECK(fs::is_empty(t.path + "/locks"));
  CHECK(fs::is_empty(t.path + "/containers"));
}

TEST_CASE("members of a newer plumb's record this plumb does not know are kept when it rewrites the record") {
  auto r = record("c1", "eth0", 0, "net0");
  const std::string plain = state::encode(r);
  CHECK(plain.find("portalState") == std::string::npos);
  auto whole = state::decode(plain, "rec");
  REQUIRE(whole);
  whole->extra.SetObject();
  auto value = json::parse(R"({"open":[1,2]})", "v");
  REQUIRE(value);
  whole->extra.AddMember("portalState", json::Value(*value, whole->extra.GetAllocator()), whole->extra.GetAllocator());
  auto again = state::decode(state::encode(*whole), "rec");
  REQUIRE(again);
  REQUIRE(again->extra.IsObject());
  CHECK(json::dump(again->extra) == R"({"portalState":{"open":[1,2]}})");
  CHECK(state::encode(*again) == state::encode(*whole));
  CHECK_FALSE(state::decode(plain, "rec")->extra.IsObject());  // none: nothing added
}

namespace {

/// Two files in `root`'s pool (recycled/, as a previous pod's DEL leaves them), which a record's
/// first version and its spare take.
void pool_two(const std::string& root) {
  put(root + "/recycled/1", "x");
  put(root + "/recycled/2", "y");
}

/// The descriptors this process has open.
size_t open_fds() {
  return static_cast<size_t>(std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator{}));
}

}  // namespace

TEST_CASE("an ADD's record versions after its second open no file: both files stay open from the first version on") {
  TempDir t;
  // Pooled files (the files a previous pod's DEL recycled): the first version is written into one.
  put(t.path + "/recycled/1", "an old record, longer than the new one will be ...............................");
  put(t.path + "/recycled/2", "x");
  state::StateDir dir(t.path);
  auto rec = record("c1", "eth0", 0, "eth0");
  rec.phase = "adding";
  REQUIRE(dir.write(rec));  // the first version: the pooled file it was written into stays open
  rec.network = "v2";
  REQUIRE(dir.write(rec));  // through the spare: now both files are open
  const size_t held = open_fds();
  for (int v = 3; v <= 5; ++v) {
    rec.network = "v" + std::to_string(v);
    REQUIRE(dir.write(rec));
    CHECK(open_fds() == held);
    CHECK(read_one(dir, {"c1", "eth0"}).network == rec.network);
  }
  rec.phase = "ready";
  REQUIRE(dir.write(rec));
  CHECK(open_fds() == held - 2);  // the complete record closes both
  CHECK_FALSE(fs::exists(t.path + "/containers/c1:eth0/0-eth0.json.spare"));
  CHECK(read_one(dir, {"c1", "eth0"}).phase == "ready");
}

TEST_CASE(
    "a key's directory removed between two versions written through held files: the next version lands in a new one") {
  TempDir t;
  pool_two(t.path);
  state::StateDir dir(t.path);
  auto rec = record("c1", "eth0", 0, "eth0");
  rec.phase = "adding";
  for (int v = 1; v <= 3; ++v) {
    rec.network = "v" + std::to_string(v);
    REQUIRE(dir.write(rec));
  }
  // Behind this process's back (a test only: the key's lock keeps plumb processes out): the files
  // the next version would be swapped through are gone with their directory.
  fs::remove_all(t.path + "/containers/c1:eth0");
  for (const char* v : {"v4", "v5"}) {  // the first into the new directory, the next through it
    rec.network = v;
    REQUIRE(dir.write(rec));
    CHECK(read_one(dir, {"c1", "eth0"}).network == v);
  }
}

TEST_CASE(
    "release() after remove() took the key's directory away frees the key; a record written again since keeps it") {
  TempDir t;
  pool_two(t.path);
  state::StateDir dir(t.path);
  const state::Key key{"c1", "eth0"};
  const std::string lock_path = t.path + "/locks/c1:eth0";
  {
    auto lock = dir.lock(key);
    REQUIRE(lock);
    auto rec = record("c1", "eth0", 0, "eth0");
    REQUIRE(dir.write(rec));
    REQUIRE(dir.remove(rec));
    REQUIRE_FALSE(fs::exists(t.path + "/containers/c1:eth0"));
    // Written again after its directory went: the key has a record, which release() must see.
    auto again = record("c1", "eth0", 1, "net1");
    REQUIRE(dir.write(again));
    dir.release(*lock, key);
    CHECK(fs::exists(lock_path));
    const auto got = read_one(dir, key);
    CHECK(got.ifname == "net1");
    REQUIRE(dir.remove(got));
    dir.release(*lock, key);  // nothing left now: the lock file and the directory go
  }
  CHECK_FALSE(fs::exists(lock_path));
  CHECK_FALSE(fs::exists(t.path + "/containers/c1:eth0"));
  CHECK(dir.read(key)->empty());
}
