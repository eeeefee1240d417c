// A scratch directory for tests that need files but no namespace (fake sysfs trees, device-info
// files): created under /tmp, removed with everything in it at the end of the case.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace plumb::test {

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/plumb-test-XXXXXX";
    const char* made = ::mkdtemp(t);
    path = made != nullptr ? made : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  /// Writes `text` to <path>/<name>, creating the directories of `name`; returns the file's path.
  std::string write(const std::string& name, const std::string& text) const {
    std::filesystem::create_directories(std::filesystem::path(path + "/" + name).parent_path());
    std::ofstream(path + "/" + name) << text;
    return path + "/" + name;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace plumb::test
