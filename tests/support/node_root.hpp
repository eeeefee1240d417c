// A node's root as the thick DaemonSet's daemon sees it at /hostroot (Multus's chrootDir), built
// in the test's private mount namespace: a tmpfs holding the machine's programs (/usr read-only,
// with Debian's merged-/usr links), /proc and /dev (read-only binds), /run/netns (the private
// node's, where the runtime's CNI_NETNS paths are, with HostToContainer's propagation), the test's own directories at their own
// paths (plugins, records, state), and whatever files the test puts there that only "the node"
// has. Undone by one lazy unmount of the tmpfs; nothing is ever removed recursively, so a bind
// still in place cannot lead to the machine's files.
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace plumb::test {

class NodeRoot {
 public:
  NodeRoot() {
    char t[] = "/tmp/plumb-node-root-XXXXXX";
    REQUIRE(::mkdtemp(t) != nullptr);
    path_ = t;
    REQUIRE_MESSAGE(::mount("tmpfs", path_.c_str(), "tmpfs", 0, "mode=0755") == 0, std::strerror(errno));
    mounted_ = true;
    bind("/usr", true);
    for (const char* link : {"bin", "sbin", "lib", "lib64"}) {
      std::filesystem::create_symlink(std::string("usr/") + link, path_ + "/" + link);
    }
    bind("/proc", true);
    bind("/dev", true);
    // The namespaces are nsfs mounts on its files, made later too: received as the DaemonSet's
    // HostToContainer mount receives them (the node's side shared, this side its slave).
    REQUIRE(::mount(nullptr, "/run/netns", nullptr, MS_SHARED, nullptr) == 0);
    bind("/run/netns", false, MS_REC);
    REQUIRE(::mount(nullptr, (path_ + "/run/netns").c_str(), nullptr, MS_SLAVE | MS_REC, nullptr) == 0);
  }
  ~NodeRoot() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);  // every bind below goes with it
    ::rmdir(path_.c_str());
  }
  NodeRoot(const NodeRoot&) = delete;
  NodeRoot& operator=(const NodeRoot&) = delete;

  /// Makes the machine's directory `dir` appear at the same path inside the root.
  void bind(const std::string& dir, bool read_only = false, unsigned long extra = 0) const {
    const std::string at = path_ + dir;
    std::filesystem::create_directories(at);
    REQUIRE_MESSAGE(::mount(dir.c_str(), at.c_str(), nullptr, MS_BIND | extra, nullptr) == 0, dir << ": " << std::strerror(errno));
    if (read_only) {
      REQUIRE_MESSAGE(::mount(nullptr, at.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) == 0,
                      dir << " read-only: " << std::strerror(errno));
    }
  }
  /// The root as plumb names it (chrootDir).
  [[nodiscard]] const std::string& path() const { return path_; }
  /// Where a file the node has at `node_path` is, seen from outside the root.
  [[nodiscard]] std::string outside(const std::string& node_path) const { return path_ + node_path; }

 private:
  std::string path_;
  bool mounted_ = false;
};

}  // namespace plumb::test
