// engine/base/file: Dir never follows a symbolic link planted where plumb reads or writes, never
// blocks on a FIFO, bounds what it reads, and creates with the modes asked for whatever the
// umask; read_file refuses what is not a regular file; write_via_spare swaps a file with its spare;
// create_whole (and write_atomic of a new file) link an unnamed file, or fall back to a named
// temporary on a filesystem without unnamed files (reached through a seccomp filter).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "engine/base/file.hpp"
#include "tests/support/seccomp_child.hpp"
#include "tests/support/temp_dir.hpp"

using namespace plumb;
using plumb::test::TempDir;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void put(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

mode_t mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

/// A directory of its own holding record "rec.json" and its spare (write_via_spare's tests).
struct SpareFixture {
  TempDir t;
  Result<Dir> dir = Dir::open(t.path + "/owned", 0700);
  std::string path = dir ? dir->path_of("rec.json") : std::string();
  std::string spare = path + ".spare";
  SpareFixture() { REQUIRE(dir); }
};

ino_t inode_of(const std::string& p) {
  struct stat st {};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_ino;
}

/// The names in directory `path`.
std::set<std::string> names_in(const std::string& path) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(path)) out.insert(e.path().filename().string());
  return out;
}

/// A temporary directory with the file "victim" ("precious": what a planted link points at,
/// never to be written) and the directory "owned" opened as a Dir.
struct Owned {
  TempDir t;
  std::string victim = t.path + "/victim";
  Dir dir;
  Owned() {
    put(victim, "precious");
    auto d = Dir::open(t.path + "/owned", 0700);
    REQUIRE(d);
    dir = std::move(*d);
  }
};

/// Sets the umask for one scope.
struct Umask {
  mode_t old;
  explicit Umask(mode_t m) : old(::umask(m)) {}
  ~Umask() { ::umask(old); }
};

}  // namespace

TEST_CASE("a link planted where Dir writes, reads, locks or descends is refused by name, and its target is untouched") {
  Owned owned;
  const std::string& victim = owned.victim;
  const TempDir& t = owned.t;
  Dir* dir = &owned.dir;
  for (const char* name : {"record.json", "lock", "sub"}) REQUIRE(::symlink(victim.c_str(), (dir->path() + "/" + name).c_str()) == 0);
  REQUIRE(::symlink(t.path.c_str(), (dir->path() + "/subdir").c_str()) == 0);

  auto read = dir->read("record.json", "state record", 1024);
  REQUIRE_FALSE(read);
  CHECK(read.error().sys_errno == ELOOP);
  CHECK(read.error().msg.find(dir->path() + "/record.json") != std::string::npos);
  auto lock = dir->open_lock("lock");
  REQUIRE_FALSE(lock);
  CHECK(lock.error().sys_errno == ELOOP);
  auto sub = dir->sub("subdir", 0700);
  REQUIRE_FALSE(sub);
  CHECK(sub.error().msg.find(dir->path() + "/subdir") != std::string::npos);
  auto excl = dir->create_exclusive("sub", "x", {.mode = 0444});
  REQUIRE_FALSE(excl);
  CHECK(excl.error().sys_errno == EEXIST);
  auto replaced = dir->write_atomic("record.json", "new", {.mode = 0600});
  REQUIRE_FALSE(replaced);
  CHECK(replaced.error().sys_errno == ELOOP);
  CHECK(replaced.error().msg.find(dir->path() + "/record.json") != std::string::npos);
  CHECK(slurp(victim) == "precious");
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir->path())) ++entries;
  CHECK(entries == 4);  // the planted links only: no temporary file left
  // The directory itself, as the last component of a path, is not followed either.
  REQUIRE(::symlink((t.path + "/owned").c_str(), (t.path + "/alias").c_str()) == 0);
  auto alias = Dir::open(t.path + "/alias");
  REQUIRE_FALSE(alias);
  CHECK(alias.error().sys_errno == ELOOP);
}

TEST_CASE("a FIFO, a directory or a device where a file should be is refused without blocking; size is bounded") {
  TempDir t;
  auto dir = Dir::open(t.path);
  REQUIRE(dir);
  REQUIRE(::mkfifo((t.path + "/fifo").c_str(), 0600) == 0);
  REQUIRE(::mkdir((t.path + "/dir").c_str(), 0700) == 0);
  for (const char* name : {"fifo", "dir"}) {
    CAPTURE(name);
    auto r = dir->read(name, "record", 1024);
    REQUIRE_FALSE(r);
    CHECK(r.error().sys_errno == EINVAL);
    CHECK(r.error().details.find("not a regular file") == 0);
    auto p = read_file(t.path + "/" + name, "config");
    REQUIRE_FALSE(p);
    CHECK(p.error().sys_errno == EINVAL);
  }
  if (::mknod((t.path + "/zero").c_str(), S_IFCHR | 0600, makedev(1, 5)) == 0) {  // an endless /dev/zero
    auto r = dir->read("zero", "record", 1024);
    REQUIRE_FALSE(r);
    CHECK(r.error().sys_errno == EINVAL);
  }
  put(t.path + "/big", std::string(5000, 'x'));
  auto big = dir->read("big", "record", 4096);
  REQUIRE_FALSE(big);
  CHECK(big.error().sys_errno == EFBIG);
  CHECK(dir->read("missing", "record", 10).error().cni_code == cni_code::kNotFound);
}

TEST_CASE("under umask 000 directories, files and lock files get exactly the modes asked for") {
  TempDir t;
  Umask open_umask(0);
  auto dir = Dir::open(t.path + "/a/b", 0750);
  REQUIRE(dir);
  CHECK(mode_of(t.path + "/a") == 0750);
  CHECK(mode_of(t.path + "/a/b") == 0750);
  auto sub = dir->sub("c", 0700);
  REQUIRE(sub);
  CHECK(mode_of(t.path + "/a/b/c") == 0700);
  REQUIRE(sub->write_atomic("f", "x", {.mode = 0644}));
  CHECK(mode_of(t.path + "/a/b/c/f") == 0644);
  REQUIRE(sub->create_exclusive("once", "y", {.mode = 0444, .fsync = true}));
  CHECK(mode_of(t.path + "/a/b/c/once") == 0444);
  auto fd = sub->open_lock("lock");
  REQUIRE(fd);
  ::close(*fd);
  CHECK(mode_of(t.path + "/a/b/c/lock") == 0600);
  CHECK(mkdir_p(t.path + "/p/q", 0700));
  CHECK(mode_of(t.path + "/p") == 0700);
}

TEST_CASE("link_new, move and remove_dir work relative to the directory") {
  TempDir t;
  auto dir = Dir::open(t.path);
  REQUIRE(dir);
  REQUIRE(dir->create_exclusive("tmp", "owner", {.mode = 0644}));
  CHECK(*dir->link_new("tmp", "192.0.2.5"));
  CHECK_FALSE(*dir->link_new("tmp", "192.0.2.5"));  // taken
  auto to = dir->sub("q", 0700);
  REQUIRE(to);
  REQUIRE(dir->move("tmp", *to, "moved"));
  CHECK(slurp(t.path + "/q/moved") == "owner");
  CHECK_FALSE(*dir->remove_dir("q"));  // not empty
  REQUIRE(to->remove("moved"));
  CHECK(*dir->remove_dir("q"));
  CHECK(*dir->remove_dir("q"));  // missing is fine
  CHECK_FALSE(dir->remove("../escape"));  // not one component
}

TEST_CASE("create_whole and write_atomic of a new file make no named temporary: O_CREAT|O_EXCL refused, they still succeed") {
  TempDir t;
  auto dir = Dir::open(t.path + "/owned", 0700);
  REQUIRE(dir);
  REQUIRE(dir->write_atomic("old.json", "v1", {.mode = 0600}));
  const bool ok = test::in_child_refusing(test::Refuse::kExclusiveCreate, [&] {
    Umask strict(0277);  // the modes asked for, not the umask's
    auto created = dir->create_whole("192.0.2.5", "c1\r\neth0", {.mode = 0644}, ".fallback");
    return created && *created && dir->write_atomic("new.json", "fresh", {.mode = 0640}).has_value();
  });
  CHECK(ok);
  CHECK(names_in(dir->path()) == std::set<std::string>{"192.0.2.5", "new.json", "old.json"});
  CHECK(slurp(dir->path_of("192.0.2.5")) == "c1\r\neth0");
  CHECK(mode_of(dir->path_of("192.0.2.5")) == 0644);
  CHECK(slurp(dir->path_of("new.json")) == "fresh");
  CHECK(mode_of(dir->path_of("new.json")) == 0640);
  // Replacing an existing file still goes through a named temporary (refused here).
  CHECK_FALSE(test::in_child_refusing(test::Refuse::kExclusiveCreate, [&] { return dir->write_atomic("old.json", "v2").has_value(); }));
  CHECK(slurp(dir->path_of("old.json")) == "v1");
}

TEST_CASE("create_whole: false when the name is taken, a planted link included, whose target is untouched") {
  Owned owned;
  const std::string& victim = owned.victim;
  Dir* dir = &owned.dir;
  REQUIRE(::symlink(victim.c_str(), dir->path_of("192.0.2.7").c_str()) == 0);
  auto linked = dir->create_whole("192.0.2.7", "c2", {.mode = 0644}, ".fallback");
  REQUIRE(linked);
  CHECK_FALSE(*linked);
  REQUIRE(dir->create_whole("192.0.2.8", "c3", {.mode = 0644}, ".fallback").value_or(false));
  auto again = dir->create_whole("192.0.2.8", "c4", {.mode = 0644}, ".fallback");
  REQUIRE(again);
  CHECK_FALSE(*again);
  CHECK(slurp(dir->path_of("192.0.2.8")) == "c3");
  CHECK(slurp(victim) == "precious");
  CHECK(names_in(dir->path()) == std::set<std::string>{"192.0.2.7", "192.0.2.8"});
}

TEST_CASE("without unnamed files (O_TMPFILE refused): create_whole and write_atomic use a named temporary and leave none") {
  Owned owned;
  const std::string& victim = owned.victim;
  Dir* dir = &owned.dir;
  // A link planted at the fallback temporary is removed, never written through.
  REQUIRE(::symlink(victim.c_str(), dir->path_of(".fallback").c_str()) == 0);
  const bool ok = test::in_child_refusing(test::Refuse::kUnnamedFiles, [&] {
    Umask strict(0277);
    auto created = dir->create_whole("192.0.2.5", "c1", {.mode = 0644}, ".fallback");
    auto again = dir->create_whole("192.0.2.5", "c2", {.mode = 0644}, ".fallback");
    const bool taken = again && !*again;
    return created && *created && taken && dir->write_atomic("new.json", "fresh", {.mode = 0640}).has_value() &&
           dir->write_atomic("new.json", "fresher", {.mode = 0640}).has_value();
  });
  CHECK(ok);
  CHECK(slurp(dir->path_of("192.0.2.5")) == "c1");
  CHECK(mode_of(dir->path_of("192.0.2.5")) == 0644);
  CHECK(slurp(dir->path_of("new.json")) == "fresher");
  CHECK(mode_of(dir->path_of("new.json")) == 0640);
  CHECK(slurp(victim) == "precious");
  CHECK(names_in(dir->path()) == std::set<std::string>{"192.0.2.5", "new.json"});
}

TEST_CASE("write_via_spare: versions swap between the file and its spare, no new inode after the second; the last is renamed") {
  SpareFixture fx;
  auto& dir = fx.dir;
  const std::string &path = fx.path, &spare = fx.spare;
  Umask open_umask(0);
  REQUIRE(dir->write_via_spare("rec.json", "rec.json.spare", "first, a long version", 0640, false));  // no file yet: renamed
  CHECK(slurp(path) == "first, a long version");
  CHECK_FALSE(std::filesystem::exists(spare));
  const ino_t first = inode_of(path);
  REQUIRE(dir->write_via_spare("rec.json", "rec.json.spare", "second", 0640, false));
  CHECK(slurp(path) == "second");                  // cut to its length, nothing of the longer first
  CHECK(slurp(spare) == "first, a long version");  // the previous version, for reuse
  CHECK(inode_of(spare) == first);
  const ino_t second = inode_of(path);
  REQUIRE(dir->write_via_spare("rec.json", "rec.json.spare", "third", 0640, false));
  CHECK(slurp(path) == "third");
  CHECK(inode_of(path) == first);  // the two inodes take turns
  CHECK(inode_of(spare) == second);
  CHECK(mode_of(path) == 0640);
  REQUIRE(dir->write_via_spare("rec.json", "rec.json.spare", "final", 0640, true));
  CHECK(slurp(path) == "final");
  CHECK(inode_of(path) == second);
  CHECK_FALSE(std::filesystem::exists(spare));  // the final version is the spare renamed over the file
}

TEST_CASE("write_via_spare with held descriptors: the same versions and inodes, and once both are held a write opens nothing") {
  SpareFixture fx;
  auto& dir = fx.dir;
  const std::string &path = fx.path, &spare = fx.spare;
  const auto held_inode = [](const UniqueFd& fd) {
    struct stat st {};
    REQUIRE(::fstat(fd.get(), &st) == 0);
    return st.st_ino;
  };
  SpareFds held;
  REQUIRE(dir->write_via_spare("rec.json", "rec.json.spare", "first, a long version", 0640, false, &held));
  CHECK(slurp(path) == "first, a long version");
  const ino_t first = inode_of(path);
  REQUIRE(dir->write_via_spare("rec.json", "rec.json.spare", "second", 0640, false, &held));
  CHECK(slurp(path) == "second");
  CHECK(slurp(spare) == "first, a long version");
  const ino_t second = inode_of(path);
  REQUIRE(dir->write_via_spare("rec.json", "rec.json.spare", "third", 0640, false, &held));
  CHECK(slurp(path) == "third");  // written from the start and cut: nothing of the longer first
  CHECK(slurp(spare) == "second");
  CHECK(inode_of(path) == first);
  CHECK(inode_of(spare) == second);
  // Both held now, each the file at its name.
  REQUIRE(held.named.get() >= 0);
  REQUIRE(held.spare.get() >= 0);
  CHECK(held_inode(held.named) == first);
  CHECK(held_inode(held.spare) == second);
  // The next write goes through the held descriptor, not the name: a file moved in at the
  // spare's name by someone else (the caller's lock forbids it) is left alone.
  REQUIRE(::rename(spare.c_str(), (spare + ".moved").c_str()) == 0);
  put(spare, "decoy");
  REQUIRE(dir->write_via_spare("rec.json", "rec.json.spare", "fourth", 0640, false, &held));
  CHECK(slurp(path) == "decoy");                  // exchanged with the name's file...
  CHECK(slurp(spare + ".moved") == "fourth");      // ...while the held spare got the version
  // Held afresh (the caller's files now differ from what it holds), then the final version:
  // renamed over; the file written stays held as the name's, and no spare is held.
  held = SpareFds{};
  REQUIRE(dir->write_via_spare("rec.json", "rec.json.spare", "fifth", 0640, false, &held));
  REQUIRE(dir->write_via_spare("rec.json", "rec.json.spare", "final", 0640, true, &held));
  CHECK(slurp(path) == "final");
  CHECK_FALSE(std::filesystem::exists(spare));
  REQUIRE(held.named.get() >= 0);
  CHECK(held_inode(held.named) == inode_of(path));
  CHECK(held.spare.get() < 0);
}

TEST_CASE("write_in_place and write_via_spare never follow a link planted at the file or its spare, nor block on a FIFO") {
  Owned owned;
  const std::string& victim = owned.victim;
  Dir* dir = &owned.dir;
  REQUIRE(::symlink(victim.c_str(), dir->path_of("last").c_str()) == 0);
  REQUIRE(::symlink(victim.c_str(), dir->path_of("rec.json.spare").c_str()) == 0);
  REQUIRE(::mkfifo(dir->path_of("fifo").c_str(), 0600) == 0);
  auto in_place = dir->write_in_place("last", "198.51.100.7", 0644);
  REQUIRE_FALSE(in_place);
  CHECK(in_place.error().sys_errno == ELOOP);
  CHECK(in_place.error().msg.find(dir->path_of("last")) != std::string::npos);
  auto fifo = dir->write_in_place("fifo", "x", 0644);
  REQUIRE_FALSE(fifo);
  CHECK(fifo.error().sys_errno != 0);
  auto spare = dir->write_via_spare("rec.json", "rec.json.spare", "x", 0600, false);
  REQUIRE_FALSE(spare);
  CHECK(spare.error().sys_errno == ELOOP);
  CHECK(slurp(victim) == "precious");
  CHECK_FALSE(std::filesystem::exists(dir->path_of("rec.json")));
}

TEST_CASE("write_in_place gives the mode asked for whatever the umask or a hand's chmod, and cuts a shorter rewrite") {
  TempDir t;
  auto dir = Dir::open(t.path + "/owned", 0700);
  REQUIRE(dir);
  const std::string path = dir->path_of("last");
  {
    Umask strict(0277);  // a new file would be 0400 without the chmod
    REQUIRE(dir->write_in_place("last", "198.51.100.100", 0644));
  }
  CHECK(mode_of(path) == 0644);
  REQUIRE(::chmod(path.c_str(), 0600) == 0);  // changed by hand: put back at the next write
  REQUIRE(dir->write_in_place("last", "198.51.100.7", 0644));
  CHECK(mode_of(path) == 0644);
  CHECK(slurp(path) == "198.51.100.7");  // nothing left of the longer first content
  REQUIRE(dir->write_in_place("last", "198.51.100.70", 0644));
  CHECK(slurp(path) == "198.51.100.70");
}
