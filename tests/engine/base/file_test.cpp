// write_atomic's replacement by exchange (engine/base/file.cpp), on the real filesystem of a
// private node's scratch directory.
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

}  // namespace

TEST_CASE("write_atomic with exchange: creates, replaces with a new inode and the asked mode, leaves no temporary file") {
  test::Node node;
  const std::string path = node.dir() + "/rec.json";
  const WriteOptions exchange{.mode = 0640, .exchange = true};
  REQUIRE(write_atomic(path, "first", exchange).has_value());  // nothing to exchange with: a rename
  CHECK(*read_file(path) == "first");
  const ino_t before = inode_of(path);
  REQUIRE(write_atomic(path, "second, longer", exchange).has_value());
  CHECK(*read_file(path) == "second, longer");
  CHECK(inode_of(path) != before);  // readers holding the old file keep the old content
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
  REQUIRE(write_atomic(path, "3", {}).has_value());  // and a plain rename over it still works
  CHECK(*read_file(path) == "3");
  auto names = list_dir(node.dir());
  REQUIRE(names.has_value());
  for (const auto& n : *names) CHECK(n.find(".tmp.") == std::string::npos);
}
