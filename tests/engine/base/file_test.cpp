// write_via_spare (engine/base/file.cpp): a file rewritten many times through one spare file, on
// the real filesystem of a private node's scratch directory.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <string>

#include "engine/base/file.hpp"
#include "tests/support/private_node.hpp"

using namespace plumb;

namespace {

ino_t inode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_ino;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("write_via_spare: versions swap between the file and its spare, no new inode after the second; the last is renamed") {
  test::Node node;
  const std::string path = node.dir() + "/rec.json";
  const std::string spare = path + ".tmp.spare";
  REQUIRE(write_via_spare(path, spare, "first, a long version", 0640, false).has_value());  // no file yet: renamed
  CHECK(*read_file(path) == "first, a long version");
  CHECK_FALSE(exists(spare));
  const ino_t first = inode_of(path);
  REQUIRE(write_via_spare(path, spare, "second", 0640, false).has_value());
  CHECK(*read_file(path) == "second");             // cut to its length, nothing of the longer first
  CHECK(*read_file(spare) == "first, a long version");  // the previous version, for reuse
  CHECK(inode_of(spare) == first);
  const ino_t second = inode_of(path);
  REQUIRE(write_via_spare(path, spare, "third", 0640, false).has_value());
  CHECK(*read_file(path) == "third");
  CHECK(inode_of(path) == first);  // the two inodes take turns
  CHECK(inode_of(spare) == second);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
  REQUIRE(write_via_spare(path, spare, "final", 0640, true).has_value());
  CHECK(*read_file(path) == "final");
  CHECK(inode_of(path) == second);
  CHECK_FALSE(exists(spare));  // the final version is the spare renamed over the file
}
