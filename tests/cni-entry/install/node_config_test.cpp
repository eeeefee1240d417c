// cni-entry/install/node_config: which config is the node's primary one (Multus's `auto` rule),
// plumb's conflist around it (cniVersion and capabilities taken from it, the operator's keys
// merged, the generated ones protected), and a kubeconfig plumb's own loader reads back as the
// service account's server, CA and token.
#include <doctest/doctest.h>

#include <rapidjson/document.h>

#include <filesystem>

#include "cni-entry/install/node_config.hpp"
#include "cni-entry/pod/config.hpp"
#include "cni-entry/source/kube.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/temp_dir.hpp"

using plumb::test::TempDir;
using plumb::test::write_file;

TEST_CASE("the primary CNI config is the lexically first .conf/.conflist/.json other than plumb's own") {
  TempDir d;
  CHECK(plumb::install::primary_config(d.path + "/missing").value() == std::nullopt);
  write_file(d.path + "/README", "not a config");
  write_file(d.path + "/99-last.conf", "{}");
  CHECK(plumb::install::primary_config(d.path).value() == "99-last.conf");
  write_file(d.path + "/10-calico.conflist", "{}");
  write_file(d.path + "/00-plumb.conflist", "{}");
  write_file(d.path + "/.00-hidden.conf", "{}");
  write_file(d.path + "/00-plumb.conflist.tmp.0123456789abcdef", "{}");
  CHECK(plumb::install::primary_config(d.path).value() == "10-calico.conflist");
  write_file(d.path + "/05-flannel.json", "{}");
  CHECK(plumb::install::primary_config(d.path).value() == "05-flannel.json");
}

TEST_CASE("the primary by name (--multus-master-cni-file-name), and a primary renamed NAME.old (--rename-conf-file) still counted under NAME") {
  TempDir d;
  write_file(d.path + "/05-early.conf", "{}");
  write_file(d.path + "/10-calico.conflist", "{}");
  CHECK(plumb::install::primary_config(d.path, "10-calico.conflist").value() == "10-calico.conflist");
  CHECK(plumb::install::primary_config(d.path, "99-missing.conf").value() == std::nullopt);
  // 10-calico.conflist renamed: it stays the primary under its name, before 20-other.conf ...
  std::filesystem::rename(d.path + "/10-calico.conflist", d.path + "/10-calico.conflist.old");
  std::filesystem::remove(d.path + "/05-early.conf");
  write_file(d.path + "/20-other.conf", "{}");
  CHECK(plumb::install::primary_config(d.path).value() == "20-other.conf");  // not known as renamed
  CHECK(plumb::install::primary_config(d.path, "", "10-calico.conflist").value() == "10-calico.conflist.old");
  CHECK(plumb::install::primary_config(d.path, "10-calico.conflist", "10-calico.conflist").value() == "10-calico.conflist.old");
  // ... but not before a config sorting first, nor before NAME written again.
  write_file(d.path + "/05-early.conf", "{}");
  CHECK(plumb::install::primary_config(d.path, "", "10-calico.conflist").value() == "05-early.conf");
  std::filesystem::remove(d.path + "/05-early.conf");
  write_file(d.path + "/10-calico.conflist", "{}");
  CHECK(plumb::install::primary_config(d.path, "", "10-calico.conflist").value() == "10-calico.conflist");
  // Gone altogether: not counted.
  std::filesystem::remove(d.path + "/10-calico.conflist");
  std::filesystem::remove(d.path + "/10-calico.conflist.old");
  CHECK(plumb::install::primary_config(d.path, "", "10-calico.conflist").value() == "20-other.conf");
}

TEST_CASE("the renamed primary plumb's conflist names: its original name while the renamed file is there") {
  TempDir d;
  CHECK(plumb::install::renamed_primary(d.path) == std::nullopt);  // no conflist
  write_file(d.path + "/00-plumb.conflist",
             R"({"cniVersion": "1.0.0", "name": "plumb", "plugins": [{"type": "plumb", "clusterNetwork": "/etc/cni/net.d/10-calico.conflist"}]})");
  CHECK(plumb::install::renamed_primary(d.path) == std::nullopt);  // not renamed
  write_file(d.path + "/00-plumb.conflist",
             R"({"cniVersion": "1.0.0", "name": "plumb", "plugins": [{"type": "plumb", "clusterNetwork": "/etc/cni/net.d/10-calico.conflist.old"}]})");
  CHECK(plumb::install::renamed_primary(d.path) == std::nullopt);  // the renamed file is not there
  write_file(d.path + "/10-calico.conflist.old", "{}");
  CHECK(plumb::install::renamed_primary(d.path) == "10-calico.conflist");
  write_file(d.path + "/00-plumb.conflist", "not JSON");
  CHECK(plumb::install::renamed_primary(d.path) == std::nullopt);
}

TEST_CASE("plumb's conflist takes the primary's cniVersion and the union of its plugins' capabilities") {
  plumb::install::ConflistInputs in;
  in.primary_path = "/etc/cni/net.d/10-calico.conflist";
  in.primary_text = R"({"cniVersion": "0.3.1", "name": "k8s-pod-network", "plugins": [
    {"type": "calico", "capabilities": {"bandwidth": false}},
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "bandwidth", "capabilities": {"bandwidth": true}}]})";
  in.kubeconfig_path = "/etc/cni/net.d/plumb.d/plumb.kubeconfig";
  in.plugin_config = R"({"namespaceIsolation": true, "defaultNetworks": ["infra"]})";
  auto text = plumb::install::render_conflist(in);
  REQUIRE(text);
  rapidjson::Document d;
  d.Parse(text->c_str());
  REQUIRE(d.IsObject());
  CHECK(std::string(d["cniVersion"].GetString()) == "0.3.1");
  CHECK(std::string(d["name"].GetString()) == "plumb");
  REQUIRE(d["plugins"].Size() == 1);
  const auto& p = d["plugins"][0];
  CHECK(std::string(p["type"].GetString()) == "plumb");
  CHECK(std::string(p["clusterNetwork"].GetString()) == in.primary_path);
  CHECK(std::string(p["kubeconfig"].GetString()) == in.kubeconfig_path);
  CHECK(p["capabilities"]["portMappings"].GetBool());
  CHECK(p["capabilities"]["bandwidth"].GetBool());
  CHECK(p["capabilities"]["io.kubernetes.cri.pod-annotations"].GetBool());
  CHECK(p["capabilities"].MemberCount() == 3);
  CHECK(p["namespaceIsolation"].GetBool());
  CHECK(std::string(p["defaultNetworks"][0].GetString()) == "infra");

  // A single-plugin .conf: its own capabilities; no kubeconfig key without a service account.
  in.primary_text = R"({"cniVersion": "1.0.0", "name": "flannel", "type": "flannel", "capabilities": {"portMappings": true}})";
  in.kubeconfig_path.clear();
  in.plugin_config.clear();
  d.Parse(plumb::install::render_conflist(in).value().c_str());
  CHECK(std::string(d["cniVersion"].GetString()) == "1.0.0");
  CHECK(d["plugins"][0]["capabilities"]["portMappings"].GetBool());
  CHECK_FALSE(d["plugins"][0].HasMember("kubeconfig"));
  CHECK_FALSE(d["plugins"][0].HasMember("nodeName"));
}

TEST_CASE("the installing pod's node name is written into plumb's conflist as nodeName, and --plugin-config cannot set it") {
  plumb::install::ConflistInputs in;
  in.primary_path = "/etc/cni/net.d/10-x.conf";
  in.primary_text = R"({"cniVersion": "1.0.0", "name": "x", "type": "x"})";
  in.node_name = "worker-3.example";
  rapidjson::Document d;
  d.Parse(plumb::install::render_conflist(in).value().c_str());
  REQUIRE(d.IsObject());
  CHECK(std::string(d["plugins"][0]["nodeName"].GetString()) == "worker-3.example");
  in.plugin_config = R"({"nodeName": "other"})";
  auto e = plumb::install::render_conflist(in);
  REQUIRE_FALSE(e);
  CHECK(e.error().msg.find("\"nodeName\"") != std::string::npos);

  // plumb reads it back; a value that cannot be a node name is refused by name.
  const std::string entry = R"({"cniVersion": "1.0.0", "name": "plumb", "type": "plumb", "nodeName": )";
  auto conf = plumb::pod::parse_config(entry + R"("worker-3.example"})");
  REQUIRE(conf);
  CHECK(conf->node_name == "worker-3.example");
  auto bad = plumb::pod::parse_config(entry + R"("a/b"})");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().msg.find("plumb config.nodeName \"a/b\" is not a node name") != std::string::npos);
}

TEST_CASE("a primary without a supported cniVersion, or another than --cni-version, bad capabilities or a --plugin-config over generated keys is refused by name") {
  plumb::install::ConflistInputs in;
  in.primary_path = "/etc/cni/net.d/10-x.conf";
  in.primary_text = R"({"name": "x", "type": "x"})";
  auto e = plumb::install::render_conflist(in);
  REQUIRE_FALSE(e);
  CHECK(e.error().msg.find("10-x.conf: cniVersion") != std::string::npos);
  in.primary_text = R"({"cniVersion": "1.0.0", "name": "x", "plugins": [{"type": "x", "capabilities": {"portMappings": "yes"}}]})";
  e = plumb::install::render_conflist(in);
  REQUIRE_FALSE(e);
  CHECK(e.error().msg.find("plugins[0].capabilities.portMappings") != std::string::npos);
  in.primary_text = R"({"cniVersion": "1.0.0", "name": "x", "type": "x"})";
  in.plugin_config = R"({"logLevel": "debug", "clusterNetwork": "/elsewhere"})";
  e = plumb::install::render_conflist(in);
  REQUIRE_FALSE(e);
  CHECK(e.error().msg.find("\"clusterNetwork\"") != std::string::npos);
  in.plugin_config = "[1]";
  CHECK_FALSE(plumb::install::render_conflist(in));
  // --cni-version: the primary must have it (Multus's check).
  in.plugin_config.clear();
  in.cni_version = "0.4.0";
  e = plumb::install::render_conflist(in);
  REQUIRE_FALSE(e);
  CHECK(e.error().msg == "--cni-version \"0.4.0\" differs from primary CNI config /etc/cni/net.d/10-x.conf's cniVersion \"1.0.0\"");
  in.cni_version = "1.0.0";
  CHECK(plumb::install::render_conflist(in));
}

TEST_CASE("the kubeconfig made from a service account is read back by plumb's own loader") {
  TempDir d;
  write_file(d.path + "/sa/token", "eyJ.token.sig\n");
  write_file(d.path + "/sa/ca.crt", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
  auto sa = plumb::install::read_service_account("fd00::1", "6443", d.path + "/sa");
  REQUIRE(sa);
  REQUIRE(*sa);
  write_file(d.path + "/kubeconfig", plumb::install::render_kubeconfig(**sa).value());
  auto creds = plumb::source::kube::load_kubeconfig(d.path + "/kubeconfig");
  REQUIRE(creds);
  CHECK(creds->server == "https://[fd00::1]:6443");
  CHECK(creds->token == "eyJ.token.sig");
  CHECK(creds->ca_pem == "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");

  CHECK(plumb::install::read_service_account("", "", d.path + "/sa").value() == std::nullopt);
  auto bad_port = plumb::install::read_service_account("10.96.0.1", "https", d.path + "/sa");
  REQUIRE_FALSE(bad_port);
  CHECK(bad_port.error().msg.find("KUBERNETES_SERVICE_PORT \"https\"") != std::string::npos);
  CHECK_FALSE(plumb::install::read_service_account("10.96.0.1", "443", d.path + "/nowhere"));
}
