// Addresses (engine/base/ip.hpp): IpPrefix::contains compares the prefix's bits; format_hwaddr
// and parse_hwaddr are inverses for any length (Ethernet 6 bytes, GUIDs 8, IPoIB 20); anything
// else is refused. No privileges needed.
#include "engine/base/ip.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using namespace plumb;

TEST_CASE("parse_hwaddr: format_hwaddr's form back, any length; malformed text is nullopt") {
  for (std::vector<uint8_t> b : {std::vector<uint8_t>{0x02, 0x11, 0x22, 0x33, 0x44, 0x55},
                                 std::vector<uint8_t>{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77},
                                 std::vector<uint8_t>{0x80, 0, 0, 0x48, 0xfe, 0x80, 0,    0,    0,    0,
                                                      0,    0, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0xff},
                                 std::vector<uint8_t>{0xab}}) {
    auto text = format_hwaddr(b.data(), b.size());
    INFO(text);
    CHECK(parse_hwaddr(text) == b);
  }
  CHECK(parse_hwaddr("AA:bb:0C") == std::vector<uint8_t>{0xaa, 0xbb, 0x0c});
  for (const char* bad : {"", "0", "a:b", "02:11:", "02-11-22", "02:11:2g", "0211:22", "02:11:223", "+2:11"}) {
    INFO(bad);
    CHECK_FALSE(parse_hwaddr(bad).has_value());
  }
}

TEST_CASE("IpPrefix::contains compares the prefix's bits of the same family only") {
  auto p = [](const char* t) { return *IpPrefix::parse(t); };
  auto a = [](const char* t) { return *IpAddr::parse(t); };
  CHECK(p("192.0.2.0/24").contains(a("192.0.2.255")));
  CHECK_FALSE(p("192.0.2.0/24").contains(a("192.0.3.0")));
  CHECK(p("192.0.2.128/25").contains(a("192.0.2.200")));
  CHECK_FALSE(p("192.0.2.128/25").contains(a("192.0.2.127")));
  CHECK(p("192.0.2.77/29").contains(a("192.0.2.72")));
  CHECK_FALSE(p("192.0.2.77/29").contains(a("192.0.2.80")));
  CHECK(p("0.0.0.0/0").contains(a("203.0.113.9")));
  CHECK_FALSE(p("0.0.0.0/0").contains(a("2001:db8::1")));
  CHECK(p("192.0.2.1/32").contains(a("192.0.2.1")));
  CHECK_FALSE(p("192.0.2.1/32").contains(a("192.0.2.2")));
  CHECK(p("2001:db8::/33").contains(a("2001:db8:7fff::1")));
  CHECK_FALSE(p("2001:db8::/33").contains(a("2001:db8:8000::")));
  CHECK(p("2001:db8::1/128").contains(a("2001:db8::1")));
  CHECK_FALSE(p("2001:db8::1/128").contains(a("2001:db8::2")));
  CHECK(p("192.0.2.0/24").str() == "192.0.2.0/24");
  CHECK(p("2001:db8::5/64").str() == "2001:db8::5/64");
}
