// engine/base/file_memo: a parsed file is kept while stat() gives the same stamp, read and parsed
// again when the file is replaced or rewritten, never kept when it was read within the settling
// time of its last change, and errors (a missing file, a parse error) are never kept.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "engine/base/file_memo.hpp"
#include "tests/support/temp_dir.hpp"

using namespace plumb;
using plumb::test::TempDir;

namespace {

void put(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

/// A memo of each file's text, counting the parses.
struct Counted {
  explicit Counted(time_t settle) : memo(settle) {}
  FileMemo<std::string> memo;
  int parses = 0;
  Result<std::shared_ptr<const std::string>> get(const std::string& path) {
    return memo.get(path, "test file", [this](const std::string& text, const std::string& origin) -> Result<std::string> {
      ++parses;
      if (text == "bad") return fail(cni_code::kDecode, origin + ": bad");
      return text;
    });
  }
};

}  // namespace

TEST_CASE("file_memo: an unchanged file is parsed once; a replaced or rewritten one again") {
  TempDir dir;
  const std::string path = dir.path + "/net.conf";
  put(path, "one");
  Counted c(/*settle=*/0);
  auto first = c.get(path);
  REQUIRE(first);
  auto second = c.get(path);
  REQUIRE(second);
  CHECK(c.parses == 1);
  CHECK(first->get() == second->get());
  CHECK(**second == "one");

  // Replaced by a rename (a new inode), as kubectl-made files and write_atomic are.
  put(path + ".new", "two");
  REQUIRE(::rename((path + ".new").c_str(), path.c_str()) == 0);
  auto third = c.get(path);
  REQUIRE(third);
  CHECK(c.parses == 2);
  CHECK(**third == "two");

  // Rewritten in place with another size.
  put(path, "three");
  auto fourth = c.get(path);
  REQUIRE(fourth);
  CHECK(c.parses == 3);
  CHECK(**fourth == "three");
}

TEST_CASE("file_memo: a file read within the settling time of its last change is never kept") {
  TempDir dir;
  const std::string path = dir.path + "/net.conf";
  put(path, "aaa");
  Counted c(/*settle=*/3600);  // every file here changed less than an hour ago
  REQUIRE(c.get(path));
  REQUIRE(c.get(path));
  CHECK(c.parses == 2);  // not kept, though nothing changed
  // The same size, rewritten in place: within one clock tick its stamp may not change at all.
  put(path, "bbb");
  auto again = c.get(path);
  REQUIRE(again);
  CHECK(c.parses == 3);
  CHECK(**again == "bbb");
}

TEST_CASE("file_memo: errors are read_file's and are never kept") {
  TempDir dir;
  const std::string path = dir.path + "/net.conf";
  Counted c(/*settle=*/0);
  auto missing = c.get(path);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().cni_code == cni_code::kNotFound);
  CHECK(missing.error().sys_errno == ENOENT);
  CHECK(missing.error().msg == "read test file " + path);

  put(path, "bad");
  auto bad = c.get(path);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().cni_code == cni_code::kDecode);
  REQUIRE_FALSE(c.get(path));
  CHECK(c.parses == 2);  // the failed parse was not kept

  put(path, "good");
  auto good = c.get(path);
  REQUIRE(good);
  CHECK(**good == "good");
  // Removed: not served from the memo.
  REQUIRE(::unlink(path.c_str()) == 0);
  auto gone = c.get(path);
  REQUIRE_FALSE(gone);
  CHECK(gone.error().sys_errno == ENOENT);
}
