// The address of a unix socket at `path`, for tests that connect to or bind one themselves.
#pragma once

#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <string>

namespace plumb::test {

/// sockaddr_un of `path` (REQUIRE: it fits in sun_path, with its NUL).
inline sockaddr_un unix_address(const std::string& path) {
  sockaddr_un sa{};
  REQUIRE(path.size() < sizeof sa.sun_path);
  sa.sun_family = AF_UNIX;
  path.copy(sa.sun_path, path.size());
  return sa;
}

}  // namespace plumb::test
