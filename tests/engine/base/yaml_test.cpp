// engine/base/yaml: libyaml's events into RapidJSON documents typed as sigs.k8s.io/yaml does,
// bounded in size, depth and alias expansion; and JSON values written back as YAML.
#include <doctest/doctest.h>

#include <string>

#include "cni-entry/npwg/nad.hpp"
#include "engine/base/yaml.hpp"

using namespace plumb;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// The value of key "v" in the one-line document "v: <scalar>".
json::Document value_of(const std::string& scalar) {
  auto d = yaml::load("v: " + scalar + "\n", "t");
  REQUIRE_MESSAGE(d, (d ? "" : d.error().text()));
  REQUIRE(d->IsObject());
  return json::clone((*d)["v"]);
}

std::string load_error(const std::string& text) {
  auto d = yaml::load_all(text, "test input");
  REQUIRE_FALSE(d);
  CHECK(d.error().cni_code == cni_code::kDecode);
  CHECK(contains(d.error().msg, "cannot decode test input: "));
  return d.error().msg;
}

}  // namespace

TEST_CASE("scalar typing: quoted scalars are strings, plain ones resolve as go-yaml v2 does") {
  struct Row {
    const char* yaml;
    const char* json;  // the value as compact JSON
  };
  for (const Row& r : std::initializer_list<Row>{
           {"'true'", R"("true")"}, {"\"1\"", R"("1")"}, {"|\n  null\n", R"("null\n")"}, {">-\n  42\n", R"("42")"},
           {"''", R"("")"}, {"!!str 12", R"("12")"}, {"!!str true", R"("true")"},
           {"null", "null"}, {"~", "null"}, {"Null", "null"}, {"NULL", "null"}, {"", "null"},
           {"true", "true"}, {"True", "true"}, {"TRUE", "true"}, {"false", "false"}, {"FALSE", "false"},
           {"yes", "true"}, {"On", "true"}, {"y", "true"}, {"no", "false"}, {"OFF", "false"}, {"N", "false"},
           {"42", "42"}, {"-7", "-7"}, {"+3", "3"}, {"0x1F", "31"}, {"0o17", "15"}, {"0b101", "5"},
           {"18446744073709551615", "18446744073709551615"}, {"1.5", "1.5"}, {"1.", "1.0"}, {"-.5", "-0.5"}, {"1e3", "1000.0"},
           {"!!float 2", "2.0"}, {"!!int \"12\"", "12"},
           {"1.2.3", R"("1.2.3")"}, {"0x", R"("0x")"}, {"1e999", R"("1e999")"}, {"yess", R"("yess")"},
           {"10.0.0.1/24", R"("10.0.0.1/24")"}, {"2001-12-14", R"("2001-12-14")"}, {"a b", R"("a b")"}}) {
    CAPTURE(r.yaml);
    CHECK(json::dump(value_of(r.yaml)) == r.json);
  }
  for (const char* bad : {".inf", "-.Inf", ".NaN", "!!int abc", "!!bool 1", "!!null x"}) {
    CAPTURE(bad);
    auto d = yaml::load(std::string("key: ") + bad + "\n", "t");
    REQUIRE_FALSE(d);
    CHECK(d.error().cni_code == cni_code::kDecode);
    CHECK(contains(d.error().msg, "(key \"key\") at line 1, column 6"));
  }
}

TEST_CASE("anchors and aliases are copies of the anchored value; keys stay as written") {
  auto d = yaml::load("base: &b {type: bridge, mtu: 1500}\nnet1: *b\nlist: [&x 1, *x]\n0x10: hex\ntrue: key\n", "t");
  REQUIRE_MESSAGE(d, (d ? "" : d.error().text()));
  CHECK(json::dump(*d) ==
        R"({"base":{"type":"bridge","mtu":1500},"net1":{"type":"bridge","mtu":1500},"list":[1,1],"0x10":"hex","true":"key"})");
  CHECK(contains(load_error("a: *nowhere\n"), "unknown alias *nowhere at line 1, column 4"));
  CHECK(contains(load_error("a: &r [*r]\n"), "unknown alias *r"));  // no recursion: an anchor is usable once complete
}

TEST_CASE("multi-document streams, a List, and the first document only for load") {
  auto all = yaml::load_all("a: 1\n---\n[1, 2]\n---\n--- x\n", "t");
  REQUIRE_MESSAGE(all, (all ? "" : all.error().text()));
  REQUIRE(all->size() == 4);
  CHECK(json::dump((*all)[0]) == R"({"a":1})");
  CHECK(json::dump((*all)[1]) == "[1,2]");
  CHECK((*all)[2].IsNull());  // an empty document
  CHECK(json::dump((*all)[3]) == R"("x")");
  CHECK(yaml::load_all("", "t")->empty());
  // load reads the first document only, as go-yaml's Unmarshal does: a broken second one is not read.
  auto first = yaml::load("a: 1\n---\n[\n", "t");
  REQUIRE(first);
  CHECK(json::dump(*first) == R"({"a":1})");
  CHECK(yaml::load("", "t")->IsNull());

  auto list = nad::parse_nad_yaml(
      "apiVersion: v1\nkind: List\nitems:\n- apiVersion: k8s.cni.cncf.io/v1\n  kind: NetworkAttachmentDefinition\n"
      "  metadata: {name: one}\n  spec: {config: '{}'}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: other}}\n"
      "---\n{\"apiVersion\": \"k8s.cni.cncf.io/v1\", \"kind\": \"NetworkAttachmentDefinition\", \"metadata\": {\"name\": \"two\", "
      "\"namespace\": \"ns\"}}\n",
      "list.yaml");
  REQUIRE_MESSAGE(list, (list ? "" : list.error().text()));
  REQUIRE(list->size() == 2);
  CHECK((*list)[0].name == "one");
  CHECK((*list)[0].config == "{}");
  CHECK((*list)[1].namespace_ == "ns");
}

TEST_CASE("duplicate keys: the last is kept, as json::parse does; keys must be scalars") {
  auto d = yaml::load("a: 1\nb: {x: 1, x: 2}\na: 3\n", "t");
  REQUIRE(d);
  CHECK(json::dump(*d) == R"({"b":{"x":2},"a":3})");
  CHECK(contains(load_error("a: 1\n? [x]\n: 2\n"), "a mapping key must be a string, not a collection at line 2, column 3"));
  CHECK(contains(load_error("a: &k [1]\n*k : 2\n"), "a mapping key must be a string (alias *k) at line 2, column 1"));
}

TEST_CASE("malformed YAML names the origin, libyaml's problem and its line and column") {
  std::string msg = load_error("a: 1\nb: [1, 2\nc: 3\n");
  CHECK(contains(msg, "line 3, column"));
  // Inputs that made yaml-cpp 0.7 loop forever (any document starting with ','): a clean error now.
  for (std::string bad : {std::string(","), std::string(",a"), std::string(",\"a\":{\"k"),
                          std::string(",\"aions\":{\"k\x01\0\0\0\0\0\0\0chm\":", 25)}) {
    CAPTURE(bad);
    CHECK(contains(load_error(bad), "line 1"));
    CHECK_FALSE(nad::parse_nad_yaml(bad, "nads/x.yaml"));
  }
}

TEST_CASE("depth, alias and size limits") {
  std::string deep(yaml::kMaxDepth + 1, '[');
  deep += std::string(yaml::kMaxDepth + 1, ']');
  CHECK(contains(load_error(deep), "nested deeper than 64"));
  std::string ok_deep(yaml::kMaxDepth, '[');
  ok_deep += std::string(yaml::kMaxDepth, ']');
  CHECK(yaml::load_all(ok_deep, "t"));

  // A billion laughs: each level a hundred aliases of the one before. The copies stop at the
  // expansion budget, long before memory does.
  std::string laughs = "a: &a [x, x]\n";
  std::string prev = "a";
  for (int i = 0; i < 12; ++i) {
    std::string name = "l" + std::to_string(i);
    laughs += name + ": &" + name + " [";
    for (int j = 0; j < 100; ++j) laughs += (j ? ", *" : "*") + prev;
    laughs += "]\n";
    prev = name;
  }
  CHECK(contains(load_error(laughs), "aliases expand to more than"));
  // Many cheap aliases: the count limit.
  std::string many = "a: &a 1\nb: [";
  for (size_t j = 0; j <= yaml::kMaxAliases; ++j) many += (j ? ", *a" : "*a");
  CHECK(contains(load_error(many + "]\n"), "more than 1000 aliases"));

  CHECK(contains(load_error(std::string(yaml::kMaxBytes + 1, ' ')), "larger than"));
}

TEST_CASE("dump writes block YAML that loads back the same, quoting what plain would retype") {
  auto src = json::parse(R"({"apiVersion": "v1", "n": 3, "b": true, "z": null, "list": [{"name": "x", "v": "true"}, "1", ""],
                             "token": "eyJ.a-b_c", "data": ")" + std::string(300, 'Q') + R"(", "k: v": "#x"})", "t");
  REQUIRE(src);
  auto text = yaml::dump(*src);
  REQUIRE(text);
  CHECK(contains(*text, "apiVersion: v1\n"));
  CHECK(contains(*text, "v: \"true\""));
  CHECK(contains(*text, "data: " + std::string(300, 'Q') + "\n"));  // never folded
  auto back = yaml::load(*text, "dumped");
  REQUIRE_MESSAGE(back, (back ? "" : back.error().text()));
  CHECK(json::dump(*back) == json::dump(*src));
  CHECK_FALSE(yaml::dump(json::Value("\xff\xfe", 2)));  // not UTF-8
}
