// The libyaml gate in front of yaml-cpp (engine/common/yaml_guard): inputs that make yaml-cpp 0.7
// loop forever are rejected, well-formed YAML passes, resource limits hold.
#include <doctest/doctest.h>

#include <string>

#include "engine/base/yaml_guard.hpp"
#include "cni-entry/npwg/nad.hpp"

using namespace plumb;

TEST_CASE("inputs that hang yaml-cpp 0.7 are rejected before reaching it") {
  for (std::string bad : {std::string(","), std::string(",a"), std::string(",\"a\":{\"k"), std::string(",\"aions\":{\"k\x01\0\0\0\0\0\0\0chm\":", 25)}) {
    CAPTURE(bad);
    auto st = yaml::check(bad, "test input");
    REQUIRE_FALSE(st);
    CHECK(st.error().cni_code == cni_code::kDecode);
    CHECK(st.error().msg.find("test input") != std::string::npos);
    CHECK(st.error().msg.find("line 1") != std::string::npos);
    // And the NAD parser, which reads store files, returns the error instead of hanging.
    CHECK_FALSE(nad::parse_nad_yaml(bad, "nads/x.yaml"));
  }
}

TEST_CASE("well-formed YAML passes, several documents and JSON included") {
  CHECK(yaml::check("a: 1\n---\nb: [1, 2]\n", "t"));
  CHECK(yaml::check(R"({"cniVersion": "1.0.0", "plugins": [{"type": "bridge"}]})", "t"));
  CHECK(yaml::check("", "t"));
}

TEST_CASE("depth, alias and size limits") {
  std::string deep(yaml::kMaxDepth + 1, '[');
  deep += std::string(yaml::kMaxDepth + 1, ']');
  auto st = yaml::check(deep, "t");
  REQUIRE_FALSE(st);
  CHECK(st.error().msg.find("nested deeper") != std::string::npos);

  std::string laughs = "a: &a [x, x]\n";
  std::string prev = "a";
  for (int i = 0; i < 12; ++i) {
    std::string name = "l" + std::to_string(i);
    laughs += name + ": &" + name + " [";
    for (int j = 0; j < 100; ++j) laughs += (j ? ", *" : "*") + prev;
    laughs += "]\n";
    prev = name;
  }
  st = yaml::check(laughs, "t");
  REQUIRE_FALSE(st);
  CHECK(st.error().msg.find("aliases") != std::string::npos);

  CHECK_FALSE(yaml::check(std::string(yaml::kMaxBytes + 1, ' '), "t"));
}
