// engine/base/base64: RFC 4648 test vectors, round trips of every byte value, white space
// skipped on decode (wrapped kubeconfig data), and the malformed inputs that must fail.
#include "engine/base/base64.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace plumb;

TEST_CASE("base64: RFC 4648 vectors both ways") {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (auto [plain, coded] : vectors) {
    CHECK(base64::encode(plain) == coded);
    auto back = base64::decode(coded, "vector");
    REQUIRE(back.has_value());
    CHECK(*back == plain);
  }
}

TEST_CASE("base64: every byte value and length round-trips") {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  CHECK(base64::encode(std::string("\xfb\xff\xbf", 3)) == "+/+/");
  for (size_t len = 0; len <= all.size(); ++len) {
    std::string s = all.substr(all.size() - len);
    auto back = base64::decode(base64::encode(s), "round trip");
    REQUIRE(back.has_value());
    CHECK(*back == s);
  }
}

TEST_CASE("base64: white space is skipped, malformed input is a kDecode error naming the field") {
  auto wrapped = base64::decode(" Zm9v\nYmFy\r\n\tZg==\n", "wrapped");
  REQUIRE(wrapped.has_value());
  CHECK(*wrapped == "foobarf");
  for (const char* bad : {"abc", "a*==", "Zg=", "Z===", "=Zm9", "Zg==Zm9v", "Zm=v", "Zm9v\x80"}) {
    CAPTURE(bad);
    auto r = base64::decode(bad, "client-key-data");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().cni_code == cni_code::kDecode);
    CHECK(r.error().msg.find("cannot decode client-key-data") != std::string::npos);
  }
}
