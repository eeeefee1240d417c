// engine/k8s/kubeconfig: kubeconfig files (current-context, data fields, paths relative to the
// file, errors naming the file and the field) and in-cluster credentials, without a server.
#include <doctest/doctest.h>

#include <string>

#include "engine/k8s/client.hpp"
#include "tests/support/temp_dir.hpp"

using namespace plumb;
using plumb::test::TempDir;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n" in base64.
const std::string kPemB64 = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=";
const std::string kPem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

std::string kubeconfig(const std::string& cluster_extra, const std::string& user,
                       const std::string& current = "current-context: main\n") {
  return "apiVersion: v1\nkind: Config\n" + current +
         "clusters:\n- name: far\n  cluster:\n    server: https://198.51.100.9:6443\n"
         "- name: near\n  cluster:\n    server: https://192.0.2.1:6443/\n" +
         cluster_extra +
         "contexts:\n- name: other\n  context:\n    cluster: far\n    user: nobody\n"
         "- name: main\n  context:\n    cluster: near\n    user: plumb\n"
         "users:\n- name: nobody\n  user:\n    token: wrong\n- name: plumb\n  user:\n" +
         user;
}

Error load_error(const TempDir& d, const std::string& text) {
  auto r = k8s::load_kubeconfig(d.write("kc", text));
  REQUIRE_FALSE(r.has_value());
  return r.error();
}

}  // namespace

TEST_CASE("kubeconfig: current-context picks cluster and user; data fields decoded; paths relative to the file") {
  TempDir d;
  auto r = k8s::load_kubeconfig(
      d.write("etc/kc", kubeconfig("    certificate-authority-data: " + kPemB64 + "\n",
                                   "    tokenFile: secrets/token\n    client-certificate: certs/c.pem\n"
                                   "    client-key: /abs/k.pem\n")));
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().text()));
  CHECK(r->server == "https://192.0.2.1:6443");  // trailing '/' dropped
  CHECK(r->ca_pem == kPem);
  CHECK(r->token.empty());
  CHECK(r->token_file == d.path + "/etc/secrets/token");
  CHECK(r->client_cert_file == d.path + "/etc/certs/c.pem");
  CHECK(r->client_key_file == "/abs/k.pem");
  CHECK(contains(r->origin, "context main"));
}

TEST_CASE("kubeconfig: inline token and client certificate data; the only context without current-context") {
  TempDir d;
  std::string text =
      "apiVersion: v1\nclusters:\n- name: c\n  cluster:\n    server: https://192.0.2.1\n    insecure-skip-tls-verify: "
      "true\n"
      "contexts:\n- name: only\n  context:\n    cluster: c\n    user: u\n"
      "users:\n- name: u\n  user:\n    token: \" abc \"\n    client-certificate-data: " +
      kPemB64 + "\n    client-key-data: " + kPemB64 + "\n";
  auto r = k8s::load_kubeconfig(d.write("kc", text));
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().text()));
  CHECK(r->insecure_skip_tls_verify);
  CHECK(r->token == "abc");
  CHECK(r->client_cert_pem == kPem);
  CHECK(r->client_key_pem == kPem);
}

TEST_CASE("kubeconfig errors name the file and the field") {
  TempDir d;
  SUBCASE("no current-context among several") {
    auto e = load_error(d, kubeconfig("", "    token: x\n", ""));
    CHECK(e.cni_code == cni_code::kInvalidConfig);
    CHECK(contains(e.msg, "current-context"));
    CHECK(contains(e.msg, d.path + "/kc"));
  }
  SUBCASE("current-context names no context") {
    auto e = load_error(d, kubeconfig("", "    token: x\n", "current-context: gone\n"));
    CHECK(contains(e.msg, "contexts has no entry named \"gone\""));
  }
  SUBCASE("server is not a URL") {
    auto e = load_error(d,
                        "current-context: a\nclusters:\n- name: c\n  cluster:\n    server: 192.0.2.1\ncontexts:\n- "
                        "name: a\n  context:\n    cluster: c\n");
    CHECK(contains(e.msg, "server \"192.0.2.1\""));
  }
  SUBCASE("bad base64") {
    auto e = load_error(d, kubeconfig("    certificate-authority-data: '*not base64*'\n", "    token: x\n"));
    CHECK(contains(e.msg, "certificate-authority-data"));
  }
  SUBCASE("a client certificate without its key") {
    auto e = load_error(d, kubeconfig("", "    client-certificate: /c.pem\n"));
    CHECK(contains(e.msg, "certificate without its key"));
  }
  SUBCASE("an exec map client-go would refuse") {
    auto e = load_error(d, kubeconfig("", "    exec:\n      command: aws\n"));
    CHECK(contains(e.msg, "exec.apiVersion \"\" must be client.authentication.k8s.io/v1"));
    e = load_error(
        d, kubeconfig("", "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: aws\n"));
    CHECK(contains(e.msg, "exec.interactiveMode must be set"));
    e = load_error(d, kubeconfig("",
                                 "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: aws\n"
                                 "      interactiveMode: Always\n"));
    CHECK(contains(e.msg, "needs a terminal"));
  }
  SUBCASE("typed as client-go reads them: a number is a string field's text, a map is not") {
    auto r = k8s::load_kubeconfig(d.write("kc", kubeconfig("", "    token: 12345\n")));
    REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().text()));
    CHECK(r->token == "12345");
    auto e = load_error(d, kubeconfig("", "    token: {a: 1}\n"));
    CHECK(contains(e.msg, "user \"plumb\": token must be a string, got {\"a\":1}"));
    e = load_error(d, kubeconfig("    insecure-skip-tls-verify: \"yes\"\n", "    token: x\n"));
    CHECK(contains(e.msg, "insecure-skip-tls-verify must be"));
  }
  SUBCASE("a missing file") {
    auto r = k8s::load_kubeconfig(d.path + "/none");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().cni_code == cni_code::kIo);
    CHECK(contains(r.error().text(), d.path + "/none"));
  }
}

TEST_CASE("in-cluster credentials: service-account token file and CA, IPv6 hosts bracketed") {
  auto r = k8s::in_cluster("10.96.0.1", "443");
  REQUIRE(r.has_value());
  CHECK(r->server == "https://10.96.0.1:443");
  CHECK(r->token_file == "/var/run/secrets/kubernetes.io/serviceaccount/token");
  CHECK(r->ca_file == "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt");
  auto v6 = k8s::in_cluster("2001:db8::1", "6443", "/sa");
  REQUIRE(v6.has_value());
  CHECK(v6->server == "https://[2001:db8::1]:6443");
  CHECK(v6->token_file == "/sa/token");
  CHECK_FALSE(k8s::in_cluster("10.96.0.1", "https").has_value());
  CHECK_FALSE(k8s::in_cluster("", "443").has_value());
}
