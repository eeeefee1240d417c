// Network namespace handles and a guard that always returns the thread to where it was.
#pragma once

#include <string>

#include "engine/base/result.hpp"

namespace plumb::netns {

/// An open network namespace file descriptor (O_RDONLY|O_CLOEXEC). Movable, closes on destruction.
class Netns {
 public:
  /// Opens the namespace at `path` (e.g. "/run/netns/pod1", "/proc/123/ns/net") and checks it is
  /// a network namespace (NS_GET_NSTYPE or fstatfs NSFS_MAGIC). Errors: ENOENT (name the path),
  /// EINVAL when the file is not a netns.
  [[nodiscard]] static Result<Netns> open(const std::string& path);
  /// The calling thread's current network namespace (/proc/thread-self/ns/net).
  [[nodiscard]] static Result<Netns> current();
  /// Duplicates an already open namespace descriptor (F_DUPFD_CLOEXEC; the caller keeps its own
  /// fd) and checks it is a network namespace. Errors: EBADF naming the fd, EINVAL when not a netns.
  [[nodiscard]] static Result<Netns> from_fd(int fd);

  Netns(Netns&&) noexcept;
  Netns& operator=(Netns&&) noexcept;
  ~Netns();

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  /// inode number of the namespace, to compare two handles.
  [[nodiscard]] unsigned long inode() const;

 private:
  Netns(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

/// Enters `target` on construction (setns CLONE_NEWNET) and returns the thread to its original
/// namespace on destruction, whatever happens in between. If returning fails the process aborts:
/// continuing in the wrong namespace would change the wrong node.
class Guard {
 public:
  [[nodiscard]] static Result<Guard> enter(const Netns& target);
  Guard(Guard&&) noexcept;
  Guard& operator=(Guard&&) = delete;
  ~Guard();

 private:
  explicit Guard(Netns original) : original_(std::move(original)) {}
  Netns original_;
  bool active_ = true;
};

}  // namespace plumb::netns
