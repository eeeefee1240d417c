// The Kubernetes side without a server: kubeconfig and in-cluster credentials, plumb's API
// config keys, the ADD-time annotation lookup (runtime annotations, UID check, static pods) and
// IPAMClaims in the local store.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cni-entry/pod/config.hpp"
#include "cni-entry/source/kube.hpp"
#include "cni-entry/source/source.hpp"

using namespace plumb;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/plumb-kube-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    fs::create_directories(fs::path(path + "/" + name).parent_path());
    std::ofstream(path + "/" + name) << text;
    return path + "/" + name;
  }
};

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
  auto r = source::kube::load_kubeconfig(d.write("kc", text));
  REQUIRE_FALSE(r.has_value());
  return r.error();
}

/// A PodSource that counts pod() calls and returns a fixed PodInfo.
struct FakeSource final : source::PodSource {
  std::optional<source::PodInfo> info;
  int pod_calls = 0;
  Result<std::optional<source::PodInfo>> pod(const source::PodRef&) override {
    ++pod_calls;
    return info;
  }
  Result<std::optional<std::map<std::string, std::string>>> pod_annotations(const source::PodRef&) override {
    return fail(cni_code::kInternal, "not used");
  }
  Result<nad::NetworkAttachmentDefinition> network_attachment(const std::string&, const std::string&) override {
    return fail(cni_code::kInternal, "not used");
  }
  Status write_network_status(const source::PodRef&, const std::string&, const std::string&) override { return {}; }
  Status remove_network_status(const source::PodRef&, const std::string&) override { return {}; }
};

}  // namespace

TEST_CASE("kubeconfig: current-context picks cluster and user; data fields decoded; paths relative to the file") {
  TempDir d;
  auto r = source::kube::load_kubeconfig(
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
  auto r = source::kube::load_kubeconfig(d.write("kc", text));
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
    e = load_error(d, kubeconfig("", "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: aws\n"));
    CHECK(contains(e.msg, "exec.interactiveMode must be set"));
    e = load_error(d, kubeconfig("", "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: aws\n"
                                     "      interactiveMode: Always\n"));
    CHECK(contains(e.msg, "needs a terminal"));
  }
  SUBCASE("typed as client-go reads them: a number is a string field's text, a map is not") {
    auto r = source::kube::load_kubeconfig(d.write("kc", kubeconfig("", "    token: 12345\n")));
    REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().text()));
    CHECK(r->token == "12345");
    auto e = load_error(d, kubeconfig("", "    token: {a: 1}\n"));
    CHECK(contains(e.msg, "user \"plumb\": token must be a string, got {\"a\":1}"));
    e = load_error(d, kubeconfig("    insecure-skip-tls-verify: \"yes\"\n", "    token: x\n"));
    CHECK(contains(e.msg, "insecure-skip-tls-verify must be"));
  }
  SUBCASE("a missing file") {
    auto r = source::kube::load_kubeconfig(d.path + "/none");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().cni_code == cni_code::kIo);
    CHECK(contains(r.error().text(), d.path + "/none"));
  }
}

TEST_CASE("in-cluster credentials: service-account token file and CA, IPv6 hosts bracketed") {
  auto r = source::kube::in_cluster("10.96.0.1", "443");
  REQUIRE(r.has_value());
  CHECK(r->server == "https://10.96.0.1:443");
  CHECK(r->token_file == "/var/run/secrets/kubernetes.io/serviceaccount/token");
  CHECK(r->ca_file == "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt");
  auto v6 = source::kube::in_cluster("2001:db8::1", "6443", "/sa");
  REQUIRE(v6.has_value());
  CHECK(v6->server == "https://[2001:db8::1]:6443");
  CHECK(v6->token_file == "/sa/token");
  CHECK_FALSE(source::kube::in_cluster("10.96.0.1", "https").has_value());
  CHECK_FALSE(source::kube::in_cluster("", "443").has_value());
}

TEST_CASE("plumb config: API keys, defaults and validation") {
  auto c = pod::parse_config(R"({"cniVersion": "1.0.0", "name": "p"})");
  REQUIRE(c.has_value());
  CHECK(c->kubeconfig.empty());
  CHECK(c->api_timeout_seconds == 30);
  CHECK(c->api_retries == 3);
  CHECK_FALSE(c->status_errors_fatal);
  auto s = pod::parse_config(R"({"cniVersion": "1.0.0", "name": "p", "kubeconfig": "/etc/cni/net.d/plumb.d/kubeconfig",
                                 "apiTimeoutSeconds": 2.5, "apiRetries": 0, "statusErrorsFatal": true})");
  REQUIRE(s.has_value());
  CHECK(s->kubeconfig == "/etc/cni/net.d/plumb.d/kubeconfig");
  CHECK(s->api_timeout_seconds == 2.5);
  CHECK(s->api_retries == 0);
  CHECK(s->status_errors_fatal);
  for (const char* bad :
       {R"("apiTimeoutSeconds": 0)", R"("apiTimeoutSeconds": "30")", R"("apiRetries": -1)", R"("apiRetries": 100)"}) {
    auto e = pod::parse_config(std::string(R"({"cniVersion": "1.0.0", "name": "p", )") + bad + "}");
    INFO(bad);
    REQUIRE_FALSE(e.has_value());
    CHECK(e.error().cni_code == cni_code::kInvalidConfig);
    CHECK(contains(e.error().msg, std::string(bad).substr(1, std::string(bad).find('"', 1) - 1)));
  }
}

TEST_CASE("annotations for ADD: the runtime's need no request; the API's are UID-checked unless static") {
  FakeSource src;
  src.info = source::PodInfo{{{"k8s.v1.cni.cncf.io/networks", "blue"}}, "uid-api", "7", false};
  source::PodRef ref{"default", "web", "uid-kubelet"};

  std::map<std::string, std::string> runtime = {{"k8s.v1.cni.cncf.io/networks", "green"}};
  auto a = source::annotations_for_add(src, ref, runtime);
  REQUIRE(a.has_value());
  CHECK((*a)->at("k8s.v1.cni.cncf.io/networks") == "green");
  CHECK(src.pod_calls == 0);

  auto mismatch = source::annotations_for_add(src, ref, std::nullopt);
  REQUIRE_FALSE(mismatch.has_value());
  CHECK(src.pod_calls == 1);
  CHECK(mismatch.error().cni_code == cni_code::kInvalidEnv);
  CHECK(contains(mismatch.error().msg, "expected pod UID \"uid-kubelet\""));
  CHECK(contains(mismatch.error().msg, "\"uid-api\""));

  src.info->is_static = true;
  auto mirror = source::annotations_for_add(src, ref, std::nullopt);
  REQUIRE(mirror.has_value());
  CHECK((*mirror)->at("k8s.v1.cni.cncf.io/networks") == "blue");

  src.info->is_static = false;
  ref.uid.clear();  // no K8S_POD_UID: nothing to compare
  CHECK(source::annotations_for_add(src, ref, std::nullopt).has_value());
  ref.name.clear();  // no pod name (podman): no lookup at all
  int before = src.pod_calls;
  auto none = source::annotations_for_add(src, ref, std::nullopt);
  REQUIRE(none.has_value());
  CHECK_FALSE(none->has_value());
  CHECK(src.pod_calls == before);
}

TEST_CASE("local store IPAMClaims: read, status.ips written back, gone with the manifest") {
  TempDir d;
  auto store = source::make_local_store(d.path);
  auto missing = store->ipam_claim("default", "vm-a.blue");
  REQUIRE(missing.has_value());
  CHECK_FALSE(missing->has_value());
  CHECK(store->write_ipam_claim_status("default", "vm-a.blue", {{"192.0.2.5/24"}, "vm-a", "2026-01-02T03:04:05Z"}).error().cni_code ==
        cni_code::kNotFound);

  d.write("ipamclaims/default/vm-a.blue.yaml",
          "apiVersion: k8s.cni.cncf.io/v1alpha1\nkind: IPAMClaim\nmetadata:\n  name: vm-a.blue\nspec:\n  network: "
          "blue\n  interface: net1\n");
  auto fresh = store->ipam_claim("default", "vm-a.blue");
  REQUIRE(fresh.has_value());
  REQUIRE(fresh->has_value());
  CHECK((*fresh)->network == "blue");
  CHECK((*fresh)->interface == "net1");
  CHECK((*fresh)->ips.empty());

  REQUIRE(store->write_ipam_claim_status("default", "vm-a.blue", {{"192.0.2.5/24", "2001:db8::5/64"}, "vm-a", "2026-01-02T03:04:05Z"})
              .has_value());
  auto held = store->ipam_claim("default", "vm-a.blue");
  REQUIRE(held.has_value());
  CHECK((*held)->ips == std::vector<std::string>{"192.0.2.5/24", "2001:db8::5/64"});

  fs::remove(d.path + "/ipamclaims/default/vm-a.blue.yaml");
  auto gone = store->ipam_claim("default", "vm-a.blue");
  REQUIRE(gone.has_value());
  CHECK_FALSE(gone->has_value());
  CHECK_FALSE(fs::exists(d.path + "/ipamclaims/default/vm-a.blue.status.json"));

  d.write("ipamclaims/default/preset.yaml", "spec:\n  network: blue\nstatus:\n  ips: [\"198.51.100.50/24\"]\n");
  auto preset = store->ipam_claim("default", "preset");
  REQUIRE(preset.has_value());
  CHECK((*preset)->ips == std::vector<std::string>{"198.51.100.50/24"});
  CHECK(store->ipam_claim("default", "../x").error().cni_code == cni_code::kInvalidConfig);
}
