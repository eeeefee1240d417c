// NetworkAttachmentDefinition parsing (spec 3.1, 3.3) and CNI config resolution (3.4, 7.1, CNI
// 1.1.0 cniVersions).
#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cni-entry/npwg/nad.hpp"
#include "tests/support/temp_dir.hpp"

using namespace plumb;
namespace fs = std::filesystem;

using plumb::test::TempDir;

namespace {

const std::string kFixtures = std::string(PLUMB_FIXTURES) + "/nad";
const std::string kConfDir = kFixtures + "/cni-conf";

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  REQUIRE_MESSAGE(f.good(), path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<nad::NetworkAttachmentDefinition> parse_file(const std::string& name) {
  const std::string path = kFixtures + "/" + name;
  auto r = nad::parse_nad_yaml(slurp(path), path);
  REQUIRE_MESSAGE(r.has_value(), r.error().text());
  return std::move(*r);
}

nad::ResolvedNetwork resolved(Result<nad::ResolvedNetwork> r) {
  REQUIRE_MESSAGE(r.has_value(), r.error().text() << " " << r.error().details);
  return std::move(*r);
}

/// A scratch directory under /tmp, removed at scope exit.
nad::NetworkAttachmentDefinition make_nad(const std::string& ns, const std::string& name, const std::string& config) {
  nad::NetworkAttachmentDefinition n;
  n.namespace_ = ns;
  n.name = name;
  n.config = config;
  return n;
}

}  // namespace

TEST_CASE("3.3: DNS-1123 labels and subdomains") {
  CHECK(nad::is_dns1123_label("a"));
  CHECK(nad::is_dns1123_label("net-a1"));
  CHECK(nad::is_dns1123_label(std::string(63, 'a')));
  CHECK_FALSE(nad::is_dns1123_label(std::string(64, 'a')));
  CHECK_FALSE(nad::is_dns1123_label(""));
  CHECK_FALSE(nad::is_dns1123_label("-a"));
  CHECK_FALSE(nad::is_dns1123_label("a-"));
  CHECK_FALSE(nad::is_dns1123_label("A"));
  CHECK_FALSE(nad::is_dns1123_label("a_b"));
  CHECK_FALSE(nad::is_dns1123_label("a.b"));
  CHECK(nad::is_dns1123_subdomain("a.b-c.d"));
  CHECK(nad::is_dns1123_subdomain("web-0"));
  CHECK_FALSE(nad::is_dns1123_subdomain("a..b"));
  CHECK_FALSE(nad::is_dns1123_subdomain(".a"));
  CHECK_FALSE(nad::is_dns1123_subdomain(".."));
  CHECK_FALSE(nad::is_dns1123_subdomain("a/b"));
  CHECK_FALSE(nad::is_dns1123_subdomain(std::string(254, 'a')));
}

TEST_CASE("parse_nad_yaml: multi-document file, other kinds and API versions skipped") {
  auto nads = parse_file("multi.yaml");
  REQUIRE(nads.size() == 3);
  CHECK(nads[0].name == "a-bridge-network");
  CHECK(nads[0].namespace_ == "default");  // metadata.namespace absent
  CHECK(contains(nads[0].config, "\"type\": \"bridge\""));
  CHECK(nads[0].annotations.empty());
  CHECK(nads[1].name == "sriov-net");
  CHECK(nads[1].namespace_ == "team-a");
  CHECK(nads[1].annotations.at(std::string(nad::kResourceNameAnnotation)) == "intel.com/sriov_netdevice");
  CHECK(contains(nads[1].config, "\"plugins\""));
  CHECK(nads[2].name == "thick-net");
  CHECK(nads[2].config.empty());  // spec.config absent
}

TEST_CASE("parse_nad_yaml: a List of objects and a JSON document") {
  auto listed = parse_file("list.yaml");
  REQUIRE(listed.size() == 2);
  CHECK(listed[0].name == "listed-one");
  CHECK(listed[0].namespace_ == "ns1");
  CHECK(listed[1].name == "listed-two");
  CHECK(listed[1].namespace_ == "default");
  auto js = parse_file("as-json.json");
  REQUIRE(js.size() == 1);
  CHECK(js[0].name == "json-nad");
  CHECK(js[0].namespace_ == "ns2");
  CHECK(js[0].config == R"({"cniVersion":"0.4.0","name":"json-nad","type":"ipvlan"})");
}

TEST_CASE("parse_nad_yaml: errors name the file, the position and the bad name") {
  const std::string broken = kFixtures + "/broken.yaml";
  auto r = nad::parse_nad_yaml(slurp(broken), broken);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kDecode);
  CHECK(contains(r.error().msg, broken + ":"));

  const std::string bad = kFixtures + "/bad-name.yaml";
  r = nad::parse_nad_yaml(slurp(bad), bad);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kInvalidConfig);
  CHECK(contains(r.error().msg, "\"Bad_Name\""));
  CHECK(contains(r.error().msg, bad));

  r = nad::parse_nad_yaml("apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: x\n"
                          "spec:\n  config:\n    cniVersion: 1.0.0\n",
                          "inline");
  REQUIRE_FALSE(r.has_value());
  CHECK(contains(r.error().msg, "spec.config must be a string"));

  r = nad::parse_nad_yaml("apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: x\n"
                          "  namespace: Bad.NS\n",
                          "inline");
  REQUIRE_FALSE(r.has_value());
  CHECK(contains(r.error().msg, "\"Bad.NS\""));
}

TEST_CASE("3.4.2: a config without name gets the NAD's name (the spec's injection example)") {
  auto n = make_nad("default", "a-bridge-network", R"({"cniVersion": "0.3.0", "type": "awesome-plugin"})");
  auto net = resolved(nad::resolve(n, "/nonexistent"));
  CHECK(net.name == "a-bridge-network");
  CHECK(net.cni_version == "0.3.0");
  CHECK(net.origin == "NAD default/a-bridge-network");
  CHECK(json::dump(net.conflist) ==
        R"({"cniVersion":"0.3.0","name":"a-bridge-network","plugins":[{"cniVersion":"0.3.0","type":"awesome-plugin","name":"a-bridge-network"}]})");
  // A name that is present is kept (3.4.3: matching is recommended, not required).
  auto named = resolved(nad::normalize(R"({"cniVersion":"1.0.0","name":"other","type":"bridge"})", "nad-name", "t"));
  CHECK(named.name == "other");
  // An empty name counts as missing.
  CHECK(resolved(nad::normalize(R"({"cniVersion":"1.0.0","name":"","type":"bridge"})", "nad-name", "t")).name == "nad-name");
}

TEST_CASE("7.1: cniVersion and name of the list are injected into every plugin") {
  auto net = resolved(nad::normalize(
      R"({"cniVersion":"1.0.0","name":"dbnet","disableCheck":true,"plugins":[{"type":"bridge","cniVersion":"0.3.1"},{"type":"tuning","name":"x"}]})",
      "", "inline"));
  CHECK(net.name == "dbnet");
  CHECK(net.cni_version == "1.0.0");
  CHECK(json::dump(net.conflist) ==
        R"({"cniVersion":"1.0.0","name":"dbnet","disableCheck":true,"plugins":[)"
        R"({"type":"bridge","cniVersion":"1.0.0","name":"dbnet"},{"type":"tuning","name":"dbnet","cniVersion":"1.0.0"}]})");
}

TEST_CASE("cniVersions (1.1.0) picks the highest supported version") {
  auto net = resolved(nad::normalize(
      R"({"cniVersion":"0.4.0","cniVersions":["0.4.0","1.1.0","9.9.9","1.0.0"],"name":"n","plugins":[{"type":"bridge"}]})", "",
      "inline"));
  CHECK(net.cni_version == "1.1.0");
  CHECK(std::string(net.conflist["plugins"][0]["cniVersion"].GetString()) == "1.1.0");
  // None supported: cniVersion is used.
  CHECK(resolved(nad::normalize(R"({"cniVersion":"1.0.0","cniVersions":["9.0.0"],"name":"n","type":"bridge"})", "", "i"))
            .cni_version == "1.0.0");
  // Missing cniVersion means 0.1.0, as in libcni.
  CHECK(resolved(nad::normalize(R"({"name":"n","type":"bridge"})", "", "i")).cni_version == "0.1.0");
  // The top-level cniVersion belongs to the set (libcni): 1.1.0 here, not cniVersions' 1.0.0.
  CHECK(resolved(nad::normalize(R"({"cniVersion":"1.1.0","cniVersions":["0.4.0","1.0.0"],"name":"n","plugins":[{"type":"bridge"}]})",
                                "", "i"))
            .cni_version == "1.1.0");
}

TEST_CASE("disableCheck and disableGC (CNI 1.1.0) are read as libcni reads them: booleans or \"true\"/\"false\"") {
  auto plain = resolved(nad::normalize(R"({"cniVersion":"1.1.0","name":"n","type":"bridge"})", "", "i"));
  CHECK_FALSE(plain.disable_check);
  CHECK_FALSE(plain.disable_gc);
  auto set = resolved(nad::normalize(R"({"cniVersion":"1.1.0","name":"n","disableCheck":true,"disableGC":"TRUE","plugins":[{"type":"bridge"}]})",
                                     "", "i"));
  CHECK(set.disable_check);
  CHECK(set.disable_gc);
  auto bad = nad::normalize(R"({"cniVersion":"1.1.0","name":"n","disableGC":"yes","plugins":[{"type":"bridge"}]})", "", "NAD ns/n");
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().cni_code == cni_code::kInvalidConfig);
  CHECK(bad.error().msg == "NAD ns/n: \"disableGC\" \"yes\" must be true or false");
}

TEST_CASE("normalize errors name the origin") {
  auto r = nad::normalize(R"({"cniVersion":"2.0.0","name":"n","type":"bridge"})", "", "NAD ns/n");
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kIncompatibleVersion);
  CHECK(contains(r.error().msg, "NAD ns/n"));
  CHECK(contains(r.error().msg, "\"2.0.0\""));

  r = nad::normalize(R"({"cniVersion":"1.0.0","name":"n"})", "", "NAD ns/n");
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kInvalidConfig);
  CHECK(contains(r.error().msg, "NAD ns/n"));

  r = nad::normalize(R"({"cniVersion":"1.0.0","name":"n","plugins":[]})", "", "origin-x");
  REQUIRE_FALSE(r.has_value());
  CHECK(contains(r.error().msg, "origin-x"));
  CHECK(contains(r.error().msg, "plugins"));

  r = nad::normalize(R"({"cniVersion":"1.0.0","name":"n","plugins":[{"bridge":"br0"}]})", "", "origin-x");
  REQUIRE_FALSE(r.has_value());
  CHECK(contains(r.error().msg, "plugins[0]"));
  CHECK(contains(r.error().msg, "\"type\""));

  r = nad::normalize(R"({"cniVersion":"1.0.0","type":"bridge"})", "", "file.conf");
  REQUIRE_FALSE(r.has_value());
  CHECK(contains(r.error().msg, "\"name\""));

  r = nad::normalize(R"({"cniVersion": )", "x", "NAD ns/x");
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kDecode);
  CHECK(contains(r.error().msg, "NAD ns/x"));

  r = nad::normalize(R"({"cniVersion":1,"name":"n","type":"bridge"})", "", "NAD ns/n");
  REQUIRE_FALSE(r.has_value());
  CHECK(contains(r.error().msg, "NAD ns/n"));
  CHECK(contains(r.error().msg, "cniVersion"));
}

TEST_CASE("normalize: of duplicate keys the last counts, as libcni reads it (fuzz/config found the first-vs-last mismatch)") {
  // The later "plugins" is the list libcni runs: it must be the one validated and given name/cniVersion.
  auto r = nad::normalize(R"({"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"}],"plugins":[5]})", "", "NAD ns/n");
  REQUIRE_FALSE(r.has_value());
  CHECK(contains(r.error().msg, "plugins[0] must be an object"));

  r = nad::normalize(R"({"cniVersion":"1.0.0","name":"a","plugins":[{"type":"bridge"}],"name":"b","plugins":[{"type":"tuning"}]})", "", "NAD ns/n");
  REQUIRE(r.has_value());
  CHECK(r->name == "b");
  const auto& plugins = r->conflist["plugins"];
  REQUIRE(plugins.Size() == 1);
  CHECK(std::string(plugins[0]["type"].GetString()) == "tuning");
  CHECK(std::string(plugins[0]["name"].GetString()) == "b");
  CHECK(std::string(plugins[0]["cniVersion"].GetString()) == "1.0.0");
}

TEST_CASE("3.4.1 rule 1: spec.config wins over on-disk files") {
  auto n = make_nad("team-a", "net-on-disk", R"({"cniVersion":"1.1.0","type":"ipvlan"})");
  auto net = resolved(nad::resolve(n, kConfDir));
  CHECK(net.origin == "NAD team-a/net-on-disk");
  CHECK(std::string(net.conflist["plugins"][0]["type"].GetString()) == "ipvlan");
}

TEST_CASE("3.4.1 rule 2: a .conflist whose name matches comes before a .conf") {
  // 10-net-on-disk.conf sorts first, but the conflist wins.
  auto net = resolved(nad::resolve(make_nad("team-a", "net-on-disk", ""), kConfDir));
  CHECK(net.origin == kConfDir + "/20-net-on-disk.conflist");
  CHECK(net.cni_version == "1.0.0");
  REQUIRE(net.conflist["plugins"].Size() == 2);
  CHECK(std::string(net.conflist["plugins"][1]["name"].GetString()) == "net-on-disk");
  CHECK(std::string(net.conflist["plugins"][1]["cniVersion"].GetString()) == "1.0.0");
}

TEST_CASE("3.4.1 rule 3: a .conf (or .json) whose name matches") {
  auto net = resolved(nad::resolve(make_nad("default", "only-conf", ""), kConfDir));
  CHECK(net.origin == kConfDir + "/30-only-conf.conf");
  CHECK(net.cni_version == "0.3.1");
  CHECK(std::string(net.conflist["plugins"][0]["type"].GetString()) == "host-device");  // not README.txt's "wrong"
  auto js = resolved(nad::resolve(make_nad("default", "json-net", ""), kConfDir));
  CHECK(js.origin == kConfDir + "/40-json-net.json");
  auto versions = resolved(nad::resolve(make_nad("default", "versions-net", ""), kConfDir));
  CHECK(versions.cni_version == "1.1.0");
}

TEST_CASE("3.4.1 rule 4: otherwise the request fails with kNotFound naming the NAD") {
  auto r = nad::resolve(make_nad("team-a", "missing-net", ""), kConfDir);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kNotFound);
  CHECK(contains(r.error().msg, "team-a/missing-net"));
  CHECK(contains(r.error().msg, kConfDir));
  CHECK(contains(r.error().details, "00-broken.conf"));  // the unreadable file is reported, not fatal
  r = nad::resolve(make_nad("team-a", "missing-net", ""), "/nonexistent/plumb-conf");
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kNotFound);
  CHECK(contains(r.error().msg, "team-a/missing-net"));
}

TEST_CASE("load_file_or_dir: a file, or a directory's first config in lexical order") {
  TempDir d;
  d.write("20-b.conflist", R"({"cniVersion":"1.0.0","name":"b","plugins":[{"type":"bridge"}]})");
  d.write("10-a.conf", R"({"cniVersion":"0.4.0","name":"a","type":"macvlan"})");
  d.write("05-notes.txt", "not a config");
  auto dir = resolved(nad::load_file_or_dir(d.path));
  CHECK(dir.name == "a");
  CHECK(dir.origin == d.path + "/10-a.conf");
  auto file = resolved(nad::load_file_or_dir(d.path + "/20-b.conflist"));
  CHECK(file.name == "b");
  CHECK(file.cni_version == "1.0.0");

  auto r = nad::load_file_or_dir(d.path + "/missing.conf");
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kNotFound);
  CHECK(contains(r.error().msg, d.path + "/missing.conf"));

  TempDir empty;
  empty.write("readme.md", "nothing");
  r = nad::load_file_or_dir(empty.path);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kNotFound);
  CHECK(contains(r.error().msg, empty.path));
}

TEST_CASE("CNI 1.1 plugin drop-ins: <dir>/<network name>/*.conf appended in lexical order, unless loadOnlyInlinedPlugins") {
  TempDir d;
  // The spec's example layout: /etc/cni/net.d/10-dhcp.conflist and /etc/cni/net.d/dhcp/*.conf.
  d.write("10-dhcp.conflist", R"({"cniVersion":"1.1.0","name":"dhcp","plugins":[{"type":"bridge","bridge":"br0"}]})");
  fs::create_directories(d.path + "/dhcp");
  d.write("dhcp/20-tuning.conf", R"({"type":"tuning","sysctl":{"net.core.somaxconn":"500"}})");
  d.write("dhcp/10-portmap.conf", R"({"type":"portmap","capabilities":{"portMappings":true}})");
  d.write("dhcp/30-notes.json", R"({"type":"ignored"})");  // only *.conf
  auto net = resolved(nad::load_file_or_dir(d.path + "/10-dhcp.conflist"));
  const auto& plugins = net.conflist["plugins"];
  REQUIRE(plugins.Size() == 3);
  CHECK(std::string(plugins[0]["type"].GetString()) == "bridge");
  CHECK(std::string(plugins[1]["type"].GetString()) == "portmap");
  CHECK(std::string(plugins[2]["type"].GetString()) == "tuning");
  CHECK(std::string(plugins[2]["name"].GetString()) == "dhcp");  // 7.1 injection reaches drop-ins too
  CHECK(std::string(plugins[2]["cniVersion"].GetString()) == "1.1.0");
  // A drop-in added later is seen on the next load (the parsed list is kept only while nothing can change it).
  d.write("dhcp/40-sbr.conf", R"({"type":"sbr"})");
  CHECK(resolved(nad::load_file_or_dir(d.path + "/10-dhcp.conflist")).conflist["plugins"].Size() == 4);

  // loadOnlyInlinedPlugins: the inline list alone.
  d.write("10-dhcp.conflist", R"({"cniVersion":"1.1.0","name":"dhcp","loadOnlyInlinedPlugins":true,"plugins":[{"type":"bridge"}]})");
  CHECK(resolved(nad::load_file_or_dir(d.path + "/10-dhcp.conflist")).conflist["plugins"].Size() == 1);
  // No inline list: the drop-ins are the whole chain; without them (or with loadOnlyInlinedPlugins) an error naming the file.
  d.write("10-dhcp.conflist", R"({"cniVersion":"1.1.0","name":"dhcp"})");
  CHECK(resolved(nad::load_file_or_dir(d.path + "/10-dhcp.conflist")).conflist["plugins"].Size() == 3);
  d.write("11-none.conflist", R"({"cniVersion":"1.1.0","name":"none"})");
  auto none = nad::load_file_or_dir(d.path + "/11-none.conflist");
  REQUIRE_FALSE(none.has_value());
  CHECK(contains(none.error().msg, d.path + "/11-none.conflist: no plugin configs found"));
  d.write("12-inline.conflist", R"({"cniVersion":"1.1.0","name":"dhcp","loadOnlyInlinedPlugins":"true"})");
  auto inline_only = nad::load_file_or_dir(d.path + "/12-inline.conflist");
  REQUIRE_FALSE(inline_only.has_value());
  CHECK(contains(inline_only.error().msg, "\"loadOnlyInlinedPlugins\" is true and there is no \"plugins\" list"));
  d.write("dhcp/50-bad.conf", R"({"bridge":"x"})");
  auto bad = nad::load_file_or_dir(d.path + "/10-dhcp.conflist");
  REQUIRE_FALSE(bad.has_value());
  CHECK(contains(bad.error().msg, d.path + "/dhcp/50-bad.conf: a plugin drop-in must be a JSON object with a \"type\""));
}
