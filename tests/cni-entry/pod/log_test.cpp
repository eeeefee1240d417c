// The invocation log's file rotation (cni-entry/pod/log.cpp) with Multus's logOptions as its
// docs write them (maxSize in megabytes, maxBackups, maxAge in days, compress): a file that a
// line would take past maxSize is renamed "<name>-<UTC time>.log" and begun anew, backups beyond
// maxBackups and older than maxAge are removed, the others gzip'ed.
#include "cni-entry/pod/log.hpp"

#include <doctest/doctest.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/temp_dir.hpp"

using plumb::pod::Log;
using plumb::pod::LogRotation;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

std::string gunzip(const std::string& path) {
  gzFile f = ::gzopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  std::string out;
  char buf[65536];
  for (int n; (n = ::gzread(f, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::gzclose(f);
  return out;
}

}  // namespace

TEST_CASE("logOptions: past maxSize the file is rotated, backups kept to maxBackups and gzip'ed") {
  plumb::test::TempDir d;
  const std::string file = d.path + "/plumb.log";
  Log log;
  log.configure("debug", file, /*to_stderr=*/false);
  log.set_rotation(LogRotation{1, 0, 2, true});  // "logOptions": {"maxSize": 1, "maxAge": 0, "maxBackups": 2, "compress": true}
  const std::string full(1 << 20, 'x');
  for (int round = 0; round < 3; ++round) {
    std::ofstream(file, std::ios::trunc) << full;
    log.info("line " + std::to_string(round));
    CHECK(slurp(file).find("plumb info: line " + std::to_string(round) + "\n") != std::string::npos);
    CHECK(slurp(file).size() < 100);  // a new file, the full one moved aside
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // backup names have millisecond resolution
  }
  auto names = names_in(d.path);
  REQUIRE(names.size() == 3);  // plumb.log and the 2 newest backups
  CHECK(names[2] == "plumb.log");
  for (int i = 0; i < 2; ++i) {
    CAPTURE(names[i]);
    CHECK(names[i].rfind("plumb-", 0) == 0);
    CHECK(names[i].size() == std::string("plumb-2026-01-02T03-04-05.678.log.gz").size());
    CHECK(gunzip(d.path + "/" + names[i]) == full);
  }
}

TEST_CASE("logOptions: compress false keeps backups plain; a line within maxSize rotates nothing; maxAge removes old backups") {
  plumb::test::TempDir d;
  const std::string file = d.path + "/multus.log";
  Log log;
  log.configure("info", file, false);
  log.set_rotation(LogRotation{1, 5, 0, false});
  log.info("small");
  CHECK(names_in(d.path) == std::vector<std::string>{"multus.log"});
  std::ofstream(d.path + "/multus-2001-01-01T00-00-00.000.log") << "old";  // older than maxAge (5 days)
  std::ofstream(file, std::ios::app) << std::string(1 << 20, 'y');
  log.info("after");
  auto names = names_in(d.path);
  REQUIRE(names.size() == 2);
  CHECK(names[0].rfind("multus-20", 0) == 0);
  CHECK(names[0].find(".log") == names[0].size() - 4);  // not compressed
  CHECK(names[0] != "multus-2001-01-01T00-00-00.000.log");
  CHECK(slurp(file).find("plumb info: after") != std::string::npos);
}
