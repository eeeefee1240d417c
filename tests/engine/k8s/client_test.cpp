// The Kubernetes API client of engine/k8s: plumb's rule for where credentials come from
// (kubeconfig, else in-cluster, else none; the context's or service account's namespace), GET of
// one object (404 is "none"), paged lists that follow metadata.continue, and Status reasons.
// Against the API test server on the loopback of the test executable's private namespace.
#include "engine/k8s/client.hpp"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>

#include "tests/support/kube_api_server.hpp"
#include "tests/support/temp_dir.hpp"

using namespace plumb;
using plumb::test::KubeApiServer;
using plumb::test::TempDir;
using plumb::test::write_file;

TEST_CASE("credentials: the kubeconfig when named, else in-cluster from the environment, else none; namespaces come along") {
  TempDir d;
  write_file(d.path + "/kc", R"(apiVersion: v1
kind: Config
current-context: c
clusters: [{name: k, cluster: {server: "https://127.0.0.1:6443/"}}]
contexts: [{name: c, context: {cluster: k, user: u, namespace: whereabouts}}]
users: [{name: u, user: {token: t}}]
)");
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  auto from_file = k8s::configured(d.path + "/kc");
  REQUIRE_MESSAGE(from_file.has_value(), (from_file ? "" : from_file.error().text()));
  REQUIRE(from_file->has_value());
  CHECK((*from_file)->server == "https://127.0.0.1:6443");
  CHECK((*from_file)->namespace_ == "whereabouts");
  auto none = k8s::configured("");
  REQUIRE(none.has_value());
  CHECK_FALSE(none->has_value());

  ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  auto in = k8s::configured("");
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  REQUIRE(in.has_value());
  REQUIRE(in->has_value());
  CHECK((*in)->server == "https://10.96.0.1:443");
  write_file(d.path + "/sa/namespace", "kube-system\n");
  auto sa = k8s::in_cluster("10.96.0.1", "443", d.path + "/sa");
  REQUIRE(sa.has_value());
  CHECK(sa->namespace_ == "kube-system");
  CHECK(sa->token_file == d.path + "/sa/token");
  auto missing = k8s::configured(d.path + "/nope");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().cni_code == cni_code::kIo);
}

TEST_CASE("get: an object or none on 404; list: every page; Status reasons and errors name the request") {
  TempDir d;
  KubeApiServer api(d.path + "/api");
  api.set_tokens({"tok"});
  k8s::Credentials c;
  c.server = api.url();
  c.ca_file = api.tls("ca.crt");
  c.token = "tok";
  c.origin = "test";
  k8s::Client client(c, {});
  for (int i = 0; i < 1203; ++i) {
    const std::string name = "n" + std::to_string(10000 + i);
    api.put("nodes", "_cluster", name, R"({"apiVersion": "v1", "kind": "Node", "metadata": {"name": ")" + name + R"("}})");
  }
  auto nodes = client.list("/api/v1/nodes", "list nodes");
  REQUIRE_MESSAGE(nodes.has_value(), (nodes ? "" : nodes.error().text()));
  CHECK(nodes->size() == 1203);
  CHECK(k8s::meta_string(nodes->back(), "name") == "n11202");
  CHECK(api.count("GET", "/api/v1/nodes") == 3);  // pages of 500

  auto one = client.get("/api/v1/nodes/n10007", "read node");
  REQUIRE(one.has_value());
  REQUIRE(one->has_value());
  CHECK(k8s::meta_string(**one, "name") == "n10007");
  auto gone = client.get("/api/v1/nodes/none", "read node");
  REQUIRE(gone.has_value());
  CHECK_FALSE(gone->has_value());

  const std::string path = "/apis/whereabouts.cni.cncf.io/v1alpha1/namespaces/ns/ippools";
  const std::string body = R"({"metadata": {"name": "p"}, "spec": {"range": "192.0.2.0/24", "allocations": {}}})";
  auto created = client.request("POST", path, body, k8s::kJson);
  REQUIRE(created.has_value());
  CHECK(created->status == 201);
  auto again = client.request("POST", path, body, k8s::kJson);
  REQUIRE(again.has_value());
  CHECK(again->status == 409);
  CHECK(k8s::status_reason(*again) == "AlreadyExists");
  auto e = client.http_error("create IPPool ns/p", "POST", path, *again);
  CHECK(e.cni_code == cni_code::kConflict);
  CHECK(e.msg.find("create IPPool ns/p: POST " + api.url() + path + ": HTTP 409") == 0);
  api.set_tokens({"other"});
  auto denied = client.get("/api/v1/nodes/n10007", "read node");
  REQUIRE_FALSE(denied.has_value());
  CHECK(denied.error().cni_code == cni_code::kInvalidConfig);
}
