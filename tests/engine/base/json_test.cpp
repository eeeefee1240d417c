// JSON parsing (engine/base/json.hpp): duplicate object keys read as Go's encoding/json reads
// them (the last one wins), at any depth. No privileges needed.
#include "engine/base/json.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace plumb;

TEST_CASE("parse keeps the last of duplicate keys, in nested objects and arrays too, order of the rest kept") {
  auto d = json::parse(R"({"a":1,"b":{"x":1,"x":[{"y":1,"y":2}]},"a":3,"c":null})", "test");
  REQUIRE(d.has_value());
  CHECK(json::dump(*d) == R"({"b":{"x":[{"y":2}]},"a":3,"c":null})");
}

TEST_CASE("parse leaves objects without duplicates as they are") {
  const std::string text = R"({"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge","ipam":{}},{"type":"tuning"}]})";
  auto d = json::parse(text, "test");
  REQUIRE(d.has_value());
  CHECK(json::dump(*d) == text);
}

TEST_CASE("parse: an object with many duplicate keys keeps one member each") {
  std::string text = "{";
  for (int i = 0; i < 20000; ++i) text += std::string(i ? "," : "") + "\"k" + std::to_string(i % 3) + "\":" + std::to_string(i);
  text += "}";
  auto d = json::parse(text, "test");
  REQUIRE(d.has_value());
  CHECK(json::dump(*d) == R"({"k2":19997,"k0":19998,"k1":19999})");
}
