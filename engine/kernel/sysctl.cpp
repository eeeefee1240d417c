#include "engine/kernel/sysctl.hpp"

#include "engine/base/file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace plumb::sysctl {
namespace {

std::unexpected<Error> invalid_key(const std::string& key, const std::string& why) {
  return std::unexpected(Error{cni_code::kInvalidConfig, EINVAL, "invalid sysctl key \"" + key + "\": " + why, {}});
}

}  // namespace

Result<std::string> path_of(const std::string& key) {
  if (key.empty()) return invalid_key(key, "empty");
  if (key.find('\0') != std::string::npos) return invalid_key(key, "contains a NUL byte");
  if (key.front() == '/' || key.front() == '.') return invalid_key(key, "must be relative to /proc/sys");
  // Like sysctl(8): when the first separator is '.', '.' and '/' swap roles, so
  // "net.ipv4.conf.eth0/100.arp_notify" names net/ipv4/conf/eth0.100/arp_notify.
  std::string rel = key;
  size_t first = key.find_first_of("./");
  if (first != std::string::npos && key[first] == '.') {
    for (char& c : rel) {
      if (c == '.') c = '/';
      else if (c == '/') c = '.';
    }
  }
  size_t start = 0;
  for (;;) {
    size_t end = rel.find('/', start);
    std::string comp = rel.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (comp.empty()) return invalid_key(key, "empty path component");
    if (comp == "." || comp == "..") return invalid_key(key, "\"" + comp + "\" component leaves /proc/sys");
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "/proc/sys/" + rel;
}

Result<std::string> read(const std::string& key) {
  std::string path = PLUMB_TRY(path_of(key));
  auto out = read_file(path, "sysctl " + key);
  if (!out) return fail_errno(out.error().sys_errno, "read sysctl " + key + " (" + path + ")");
  if (!out->empty() && out->back() == '\n') out->pop_back();
  return std::move(*out);
}

Status write(const std::string& key, const std::string& value) {
  std::string path = PLUMB_TRY(path_of(key));
  std::string what = "write sysctl " + key + "=" + value + " (" + path + ")";
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return fail_errno(errno, what);
  // /proc/sys handlers take the whole value in one write; a short write is an error.
  ssize_t n;
  do {
    n = ::write(fd, value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  int err = errno;
  ::close(fd);
  if (n < 0) return fail_errno(err, what);
  if (static_cast<size_t>(n) != value.size()) return fail_errno(EIO, what + ": short write");
  return {};
}

}  // namespace plumb::sysctl
