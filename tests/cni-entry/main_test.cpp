// cni-entry/main: what the plumb binary asks the dynamic loader for at every start. Each shared
// library it names is opened, mapped, relocated and searched for symbols on every exec (ADD,
// DEL, CHECK, VERSION alike); heavy libraries are loaded later, only by what uses them. The
// static build (PLUMB_STATIC, the release binaries) asks for nothing: it has no loader at all.
#include <doctest/doctest.h>

#include <set>
#include <sstream>
#include <string>

#include "tests/support/private_node.hpp"

namespace {

/// The NEEDED entries of the binary at `path` (readelf -d), e.g. "libc.so.6".
std::set<std::string> needed(const std::string& path) {
  auto p = plumb::test::sh("readelf -d '" + path + "'");
  REQUIRE(p.exit_code == 0);
  std::set<std::string> out;
  std::istringstream in(p.out);
  for (std::string line; std::getline(in, line);) {
    if (line.find("(NEEDED)") == std::string::npos) continue;
    const size_t open = line.find('['), close = line.find(']');
    if (open != std::string::npos && close > open) out.insert(line.substr(open + 1, close - open - 1));
  }
  return out;
}

}  // namespace

#if PLUMB_STATIC_BINARY
TEST_CASE("the static plumb binary has no program interpreter and names no shared library") {
  auto headers = plumb::test::sh("readelf -lW '" + std::string(plumb::test::plumb_binary()) + "'");
  REQUIRE(headers.exit_code == 0);
  CHECK(headers.out.find("INTERP") == std::string::npos);  // what `ldd` reports as "not a dynamic executable"
  CHECK(headers.out.find("DYNAMIC") == std::string::npos);
  CHECK(needed(plumb::test::plumb_binary()).empty());
}
#else
TEST_CASE("the plumb binary names only libmnl and libc at start: no libm (nothing of plumb's calls it), no heavy library") {
  const auto libs = needed(plumb::test::plumb_binary());
  INFO([&] {
    std::string all;
    for (const auto& l : libs) all += l + " ";
    return all;
  }());
#ifndef PLUMB_SANITIZED
  CHECK(libs == std::set<std::string>{"libmnl.so.0", "libc.so.6", "ld-linux-x86-64.so.2"});
#else  // the sanitizer runtime brings libm and friends; the C++ library and the archives are shared
  CHECK(libs.count("libc.so.6") == 1);
  for (const char* heavy : {"libcurl", "libprotobuf", "libgrpc"}) {
    CAPTURE(heavy);
    for (const auto& l : libs) CHECK_FALSE(l.starts_with(heavy));
  }
#endif
}
#endif
