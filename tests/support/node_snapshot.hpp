// "The node is exactly as it was": what a refused or failed verb must not change, read
// independently of plumb — links, addresses and routes of the node and of the given pod
// namespaces (ip -j), the whole nftables ruleset, the BPF pins (every entry of the node's own
// bpffs at /sys/fs/bpf, where plumb's default bpffsDir lives, and of a PrivateBpffs under the
// scratch directory) and every file plumb keeps under the node's scratch directory (state
// records, locks, network-status, host-local files, device-info) with its type and mode. Two
// snapshots compare equal when nothing changed.
#pragma once

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/pod_fixture.hpp"

namespace plumb::test {

struct NodeSnapshot {
  std::string kernel;  ///< ip/nft output
  std::string files;   ///< "<type> <mode> <size> <path>" per entry under the scratch directory
  std::string pins;    ///< the same for every entry of the node's bpffs (/sys/fs/bpf)

  /// "<type> <mode> <size> <path>\n" for every entry under `dir` (links not followed), but the
  /// directories of recycled files (PodFixture::is_recycled_dir).
  static std::string list_tree(const std::string& dir) {
    std::string out;
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); !ec && it != std::filesystem::recursive_directory_iterator();
         it.increment(ec)) {
      if (PodFixture::is_recycled_dir(it->path()) && it->is_directory(ec)) {
        it.disable_recursion_pending();
        continue;
      }
      struct stat st {};
      if (::lstat(it->path().c_str(), &st) != 0) continue;
      const char type = S_ISDIR(st.st_mode) ? 'd' : S_ISLNK(st.st_mode) ? 'l' : S_ISREG(st.st_mode) ? 'f' : 'o';
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
      out += std::string(1, type) + " " + mode + " " + std::to_string(S_ISREG(st.st_mode) ? st.st_size : 0) + " " +
             it->path().string() + "\n";
    }
    return out;
  }

  /// Reads the node (the test's current namespace), the pod namespaces `pods` (names under
  /// /run/netns) and every entry under `dir` (the node's scratch directory).
  static NodeSnapshot take(const std::string& dir, const std::vector<std::string>& pods = {}) {
    NodeSnapshot s;
    // IPv6 duplicate address detection (and the local route of a link-local address, added when
    // its DAD ends), address lifetimes and a bridge's carrier (it follows its ports a moment
    // later, and the subnet-router anycast route of its link-local prefix with it) move on by
    // themselves: not changes.
    auto add = [&](const std::string& cmd) {
      s.kernel += "$ " + cmd + "\n" +
                  sh(cmd + " 2>&1 | sed -e 's/ tentative//; s/ dadfailed//; s/valid_lft.*//; s/NO-CARRIER,//; s/ state [A-Z]*//; s/ linkdown//; /^local fe80:/d; /^anycast fe80::/d'").out;
    };
    std::vector<std::string> all{""};
    all.insert(all.end(), pods.begin(), pods.end());
    for (const std::string& ns : all) {
      const std::string n = ns.empty() ? "" : "-n " + ns + " ";
      add("ip " + n + "-o link show");
      add("ip " + n + "-o addr show");
      add("ip " + n + "route show table all");
      add("ip " + n + "-6 route show table all");
    }
    add("nft list ruleset");
    s.files = list_tree(dir);
    s.pins = list_tree("/sys/fs/bpf");  // each Node mounts a fresh bpffs there (private_node.cpp)
    return s;
  }

  bool operator==(const NodeSnapshot&) const = default;
};

/// Checks that nothing changed between `before` and now, showing what did.
#define PLUMB_CHECK_UNCHANGED(before, now) \
  do {                                     \
    const auto& b_ = (before);             \
    const auto n_ = (now);                 \
    CHECK(n_.kernel == b_.kernel);         \
    CHECK(n_.files == b_.files);           \
    CHECK(n_.pins == b_.pins);             \
  } while (0)

}  // namespace plumb::test
