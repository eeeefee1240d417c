// engine/base/json: parsing is bounded in depth and never recursive; duplicate object keys read
// as Go's encoding/json reads them (the last one wins), at any depth; values quoted in error
// messages are bounded and rendered without recursion, whatever the input's nesting.
// No privileges needed.
#include "engine/base/json.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>

using namespace plumb;

TEST_CASE("nesting up to kMaxDepth parses; one level more is a decode error naming the limit") {
  const auto nested = [](unsigned depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  CHECK(json::parse(nested(json::kMaxDepth), "t"));
  auto deep = json::parse(nested(json::kMaxDepth + 1), "the test input");
  REQUIRE_FALSE(deep);
  CHECK(deep.error().cni_code == cni_code::kDecode);
  CHECK(deep.error().msg.find("the test input") != std::string::npos);
  CHECK(deep.error().msg.find("nested deeper than 64 levels") != std::string::npos);
  // Objects count as levels too; a caller may allow more (state records).
  std::string objects;
  for (int i = 0; i < 70; ++i) objects += "{\"a\":";
  objects += "1" + std::string(70, '}');
  CHECK_FALSE(json::parse(objects, "t"));
  CHECK(json::parse(objects, "t", 128));
}

TEST_CASE("a million unterminated brackets end in a decode error, not a crash") {
  const std::string hostile(1'000'000, '[');
  auto r = json::parse(hostile, "stdin");
  REQUIRE_FALSE(r);
  CHECK(r.error().cni_code == cni_code::kDecode);
  // Past the limit even without it (the iterative parser keeps its own stack): a syntax error.
  auto unlimited = json::parse(hostile, "stdin", 2'000'000);
  REQUIRE_FALSE(unlimited);
  CHECK(unlimited.error().msg.find("offset 1000000") != std::string::npos);
}

TEST_CASE("syntax errors still name the offset; trailing garbage is refused") {
  auto r = json::parse(R"({"a": 1,})", "config");
  REQUIRE_FALSE(r);
  CHECK(r.error().msg.find("cannot decode config") == 0);
  CHECK(r.error().msg.find("offset 8") != std::string::npos);
  CHECK_FALSE(json::parse("{} x", "t"));
  CHECK(json::parse(R"({"a":[1,2,{"b":null}]})", "t"));
}

TEST_CASE("quote renders small values as compact JSON and cuts long ones with ...") {
  auto d = json::parse(R"({"a":[1,true,null,"x\"y"],"b":{"c":-2.5}})", "t");
  REQUIRE(d);
  CHECK(json::quote(*d) == R"({"a":[1,true,null,"x\"y"],"b":{"c":-2.5}})");
  json::Document s;
  s.SetString(std::string(10'000, 'z').c_str(), s.GetAllocator());
  const std::string q = json::quote(s, 50);
  CHECK(q.size() <= 53);
  CHECK(q.ends_with("..."));
  CHECK(q.starts_with("\"zzzz"));
}

TEST_CASE("quote never cuts inside a UTF-8 character") {
  json::Document s;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "\xc3\xa9";  // U+00E9, two bytes each
  s.SetString(text.c_str(), static_cast<rapidjson::SizeType>(text.size()), s.GetAllocator());
  const std::string q = json::quote(s, 21);
  REQUIRE(q.ends_with("..."));
  const std::string body = q.substr(0, q.size() - 3);
  // Every byte after the opening quote is part of a whole two-byte character.
  CHECK((body.size() - 1) % 2 == 0);
  CHECK((static_cast<unsigned char>(body.back()) & 0xC0) == 0x80);
}

TEST_CASE("quote walks a value 100,000 levels deep without recursing") {
  // Built directly (parse() would refuse it): what a recursive writer would crash on.
  json::Document d;
  auto& a = d.GetAllocator();
  json::Value inner(rapidjson::kArrayType);
  for (int i = 0; i < 100'000; ++i) {
    json::Value outer(rapidjson::kArrayType);
    outer.PushBack(inner, a);
    inner = std::move(outer);
  }
  const std::string q = json::quote(inner, 120);
  CHECK(q == std::string(120, '[') + "...");
}

TEST_CASE("typed getters quote the offending value, bounded") {
  auto d = json::parse(R"({"mtu": ")" + std::string(5000, 'x') + R"("})", "t");
  REQUIRE(d);
  auto r = json::get_int(*d, "mtu", "bridge");
  REQUIRE_FALSE(r);
  CHECK(r.error().msg.find("bridge.mtu must be an integer, got \"xxx") == 0);
  CHECK(r.error().msg.size() < 300);
}

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

TEST_CASE("parse keeps the last of duplicate keys in objects of any size (compared pairwise or sorted)") {
  for (int n = 2; n <= 40; ++n) {
    std::string text = "{", want = "{";
    const int distinct = n / 2 + 1;  // member i is named k<i % distinct>: the first n - distinct repeat
    for (int i = 0; i < n; ++i)
      text += std::string(i ? "," : "") + "\"k" + std::to_string(i % distinct) + "\":" + std::to_string(i);
    for (int i = std::max(0, n - distinct); i < n; ++i) {
      want +=
          std::string(want.size() > 1 ? "," : "") + "\"k" + std::to_string(i % distinct) + "\":" + std::to_string(i);
    }
    auto d = json::parse(text + "}", "test");
    REQUIRE(d.has_value());
    INFO(text);
    CHECK(json::dump(*d) == want + "}");
  }
}

TEST_CASE("parse keeps duplicate keys of a \"sysctl\" object as written (tuning refuses them, as the reference)") {
  auto d = json::parse(R"({"sysctl":{"k":"1","k":"2"},"args":{"cni":{"sysctl":{"j":"1","j":"2"}}},"x":{"k":1,"k":2}})", "test");
  REQUIRE(d.has_value());
  CHECK(json::dump(*d) == R"({"sysctl":{"k":"1","k":"2"},"args":{"cni":{"sysctl":{"j":"1","j":"2"}}},"x":{"k":2}})");
}

TEST_CASE("a double reads back as the one written: parse, dump and parse again give the same value (found by fuzz/state)") {
  for (const char* text : {R"({"owner":9.753494167873032718})", R"({"v":0.1})", R"({"v":1.7976931348623157e308})",
                           R"({"v":2.2250738585072014e-308})", R"({"v":123456789012345678901234567890.5})"}) {
    CAPTURE(text);
    auto first = plumb::json::parse(text, "test");
    REQUIRE(first);
    auto again = plumb::json::parse(plumb::json::dump(*first), "test");
    REQUIRE(again);
    CHECK(plumb::json::dump(*again) == plumb::json::dump(*first));
    const char* key = first->MemberBegin()->name.GetString();
    CHECK((*again)[key].GetDouble() == (*first)[key].GetDouble());
  }
}

TEST_CASE("numbers are typed as RapidJSON types them; 0.0E130 is 0 (found by fuzz/config); a double beyond range is refused") {
  auto d = plumb::json::parse(R"({"a":-2147483648,"b":4294967295,"c":18446744073709551615,"d":-9223372036854775808,)"
                              R"("e":18446744073709551616,"f":0.0E0130,"g":-0,"h":1e-400,"i":7})",
                              "test");
  REQUIRE(d);
  CHECK(((*d)["a"].IsInt() && (*d)["a"].GetInt() == -2147483648));
  CHECK(((*d)["b"].IsUint() && !(*d)["b"].IsInt() && (*d)["b"].GetUint() == 4294967295u));
  CHECK(((*d)["c"].IsUint64() && !(*d)["c"].IsInt64() && (*d)["c"].GetUint64() == 18446744073709551615ull));
  CHECK(((*d)["d"].IsInt64() && !(*d)["d"].IsInt() && (*d)["d"].GetInt64() == INT64_MIN));
  CHECK(((*d)["e"].IsDouble() && (*d)["e"].GetDouble() == 18446744073709551616.0));
  CHECK(((*d)["f"].IsDouble() && (*d)["f"].GetDouble() == 0.0));
  CHECK(((*d)["g"].IsInt() && (*d)["g"].GetInt() == 0));
  CHECK(((*d)["h"].IsDouble() && (*d)["h"].GetDouble() == 0.0));
  CHECK(((*d)["i"].IsInt() && (*d)["i"].IsUint() && (*d)["i"].GetInt() == 7));
  for (const char* big : {R"({"x":1e400})", R"([-1e400])"}) {
    auto r = plumb::json::parse(big, "test");
    REQUIRE_FALSE(r);
    CHECK(r.error().msg.find("Number too big") != std::string::npos);
  }
}
