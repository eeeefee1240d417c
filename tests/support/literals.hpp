// Addresses, prefixes and MACs written as text in tests: parsed with the production parsers
// (engine/base/ip.hpp), the test stops (REQUIRE) when one does not parse.
#pragma once

#include <doctest/doctest.h>

#include "engine/base/ip.hpp"

namespace plumb::test {

/// "192.0.2.1/24" -> IpPrefix; REQUIREs that it parses.
inline IpPrefix prefix(const char* s) {
  auto p = IpPrefix::parse(s);
  REQUIRE_MESSAGE(p, s);
  return *p;
}
/// "2001:db8::1" -> IpAddr; REQUIREs that it parses.
inline IpAddr ip(const char* s) {
  auto a = IpAddr::parse(s);
  REQUIRE_MESSAGE(a, s);
  return *a;
}
/// "02:00:00:00:00:01" -> Mac; REQUIREs that it parses.
inline Mac mac(const char* s) {
  auto m = Mac::parse(s);
  REQUIRE_MESSAGE(m, s);
  return *m;
}

}  // namespace plumb::test
