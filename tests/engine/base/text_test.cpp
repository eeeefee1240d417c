// engine/base/text: parse_decimal takes a decimal number and nothing else, within double's range.
#include <doctest/doctest.h>

#include <limits>
#include <optional>
#include <string>

#include "engine/base/text.hpp"

using plumb::text::parse_decimal;

TEST_CASE("parse_decimal: decimal numbers, with a fraction or an exponent") {
  CHECK(parse_decimal("0") == 0.0);
  CHECK(parse_decimal("42") == 42.0);
  CHECK(parse_decimal("-1.5") == -1.5);
  CHECK(parse_decimal(".5") == 0.5);
  CHECK(parse_decimal("1.") == 1.0);
  CHECK(parse_decimal("2e3") == 2000.0);
  CHECK(parse_decimal("1E-3") == 0.001);
  CHECK(parse_decimal("6.02e+23") == 6.02e23);
  CHECK(parse_decimal("0.1") == 0.1);  // correctly rounded, as strtod and from_chars give it
}

TEST_CASE("parse_decimal: anything else is not a number") {
  for (const char* s : {"", ".", "-", "+1", " 1", "1 ", "1,5", "1.2.3", "--1", "1e", "e5", "1e+", "1e1.5", "0x10", "0x1p3",
                        "inf", "-inf", "nan", "1_000", "١"}) {
    CAPTURE(s);
    CHECK_FALSE(parse_decimal(s).has_value());
  }
}

TEST_CASE("parse_decimal: out of double's range is refused; a subnormal result is kept") {
  CHECK_FALSE(parse_decimal("1e999").has_value());
  CHECK_FALSE(parse_decimal("-1e999").has_value());
  CHECK_FALSE(parse_decimal("1e-400").has_value());  // a non-zero number underflowing to zero
  CHECK(parse_decimal("0e-400") == 0.0);             // zero is zero at any exponent
  auto sub = parse_decimal("4e-320");
  REQUIRE(sub.has_value());
  CHECK(*sub > 0);
  CHECK(*sub < std::numeric_limits<double>::min());
  CHECK(parse_decimal("1.7976931348623157e308") == std::numeric_limits<double>::max());
}
