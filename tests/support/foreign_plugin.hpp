// A private CNI bin directory for delegation tests: the test-only foreign plugin
// (support/fake_cni_plugin.py) installed under a type name plumb does not implement, copies of
// Debian's reference binaries under foreign names, and the invocations the fake plugin recorded.
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "tests/support/pod_fixture.hpp"
#include "tests/support/private_node.hpp"

namespace plumb::test {

/// One invocation of the fake plugin, as it recorded it.
struct FakeCall {
  std::string command;
  rapidjson::Document env;    ///< its whole initial environment {"KEY": "value"}
  rapidjson::Document stdin;  ///< its config, parsed
  std::vector<std::string> fds;  ///< its open descriptors (/proc/self/fd) when it started
  int pid = 0;
  std::string node_file;    ///< ADD with nodeFile: the file's content
  std::string agent_reply;  ///< ADD with agentSocket: the agent's answer
};

class ForeignBin {
 public:
  explicit ForeignBin(const Node& node) : dir_(node.dir() + "/cni-bin"), records_(node.dir() + "/records") {
    std::filesystem::create_directories(dir_);
    std::filesystem::create_directories(records_);
  }

  /// Installs the fake plugin as `<bin>/<type>`.
  void install_fake(const std::string& type = "fake-cni") const {
    copy(std::string(fixtures_dir()) + "/../support/fake_cni_plugin.py", type);
  }
  /// Copies Debian's reference plugin `ref` (/usr/lib/cni/<ref>) to `<bin>/<type>`: a type plumb
  /// does not implement, served by a reference binary.
  void install_reference(const std::string& ref, const std::string& type) const { copy("/usr/lib/cni/" + ref, type); }

  const std::string& dir() const { return dir_; }
  const std::string& records() const { return records_; }

  /// plumb config member naming this bin directory.
  std::string bin_dir_key() const { return R"("binDir": ")" + dir_ + R"(")"; }

  /// A fake-cni plugin entry: {"type": type, "recordDir": ..., <extra>}.
  std::string fake_plugin(const std::string& extra = {}, const std::string& type = "fake-cni") const {
    return R"({"type": ")" + type + R"(", "recordDir": ")" + records_ + R"(")" + (extra.empty() ? "" : ", " + extra) + "}";
  }

  /// Every recorded invocation (optionally of one command), oldest first.
  std::vector<FakeCall> calls(const std::string& command = {}) const {
    std::vector<std::string> names;
    for (auto& e : std::filesystem::directory_iterator(records_)) {
      if (e.path().extension() == ".json") names.push_back(e.path().string());
    }
    std::sort(names.begin(), names.end());
    std::vector<FakeCall> out;
    for (auto& n : names) {
      rapidjson::Document d;
      d.Parse(read_file(n).c_str());
      if (!d.IsObject()) continue;
      FakeCall c;
      c.command = d["command"].GetString();
      if (!command.empty() && c.command != command) continue;
      c.env.CopyFrom(d["env"], c.env.GetAllocator());
      c.stdin.Parse(d["stdin"].GetString());
      for (auto& fd : d["fds"].GetArray()) c.fds.push_back(fd.GetString());
      c.pid = d["pid"].GetInt();
      if (d.HasMember("nodeFile")) c.node_file = d["nodeFile"].GetString();
      if (d.HasMember("agentReply")) c.agent_reply = d["agentReply"].GetString();
      out.push_back(std::move(c));
    }
    return out;
  }

 private:
  void copy(const std::string& from, const std::string& type) const {
    std::filesystem::copy_file(from, dir_ + "/" + type, std::filesystem::copy_options::overwrite_existing);
    ::chmod((dir_ + "/" + type).c_str(), 0755);
  }

  std::string dir_;
  std::string records_;
};

}  // namespace plumb::test
