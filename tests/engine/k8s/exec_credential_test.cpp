// Exec credential plugins (engine/k8s/exec_credential.cpp) as client-go runs them, with a
// kubeconfig written as EKS/GKE/AKS write theirs (client.authentication.k8s.io/v1, a relative
// command, args, env, interactiveMode Never, provideClusterInfo), against the API test server:
// the token the plugin prints authenticates, the plugin sees its args, env and
// KUBERNETES_EXEC_INFO, its answer is kept until expirationTimestamp, and a 401 runs it again.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "engine/k8s/client.hpp"
#include "tests/support/kube_api_server.hpp"
#include "tests/support/temp_dir.hpp"

using namespace plumb;
using plumb::test::KubeApiServer;
using plumb::test::read_file;
using plumb::test::write_file;

using plumb::test::TempDir;

namespace {

/// A credential plugin that logs its run and prints the token and expiry held in files.
void install_plugin(const std::string& dir) {
  write_file(dir + "/bin/creds", "#!/bin/sh\necho \"$* $VENDOR_REGION\" >> " + dir + "/runs\nprintf '%s' \"$KUBERNETES_EXEC_INFO\" > " + dir +
                                     "/info\nprintf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
                                     "\"status\":{\"token\":\"%s\",\"expirationTimestamp\":\"%s\"}}' \"$(cat " + dir + "/token)\" \"$(cat " + dir +
                                     "/exp)\"\n");
  ::chmod((dir + "/bin/creds").c_str(), 0755);
}

std::string exec_user(const std::string& region) {
  return "exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: bin/creds\n"
         "      args: [token, --cluster-name, test]\n      env: [{name: VENDOR_REGION, value: " + region + "}]\n"
         "      interactiveMode: Never\n      provideClusterInfo: true";
}

size_t runs(const std::string& dir) {
  std::string r = read_file(dir + "/runs");
  return static_cast<size_t>(std::count(r.begin(), r.end(), '\n'));
}

}  // namespace

TEST_CASE("exec plugin (client.authentication.k8s.io/v1): its token authenticates, kept until it expires, run again after a 401") {
  TempDir d;
  KubeApiServer api(d.path + "/api");
  install_plugin(d.path);
  write_file(d.path + "/token", "exec-a");
  write_file(d.path + "/exp", "2099-01-01T00:00:00Z");
  api.set_tokens({"exec-a"});
  api.put("nodes", "_cluster", "n1", R"({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})");
  api.write_kubeconfig(d.path + "/kc", exec_user("eu-west-1"));
  auto creds = k8s::configured(d.path + "/kc");
  REQUIRE_MESSAGE(creds.has_value(), (creds ? "" : creds.error().text()));
  REQUIRE((*creds)->exec.has_value());
  CHECK((*creds)->exec->command == d.path + "/bin/creds");  // relative to the kubeconfig's directory
  k8s::Client client(**creds, {});
  for (int i = 0; i < 2; ++i) {
    auto one = client.get("/api/v1/nodes/n1", "read node");
    REQUIRE_MESSAGE(one.has_value(), (one ? "" : one.error().text()));
    CHECK(one->has_value());
  }
  CHECK(runs(d.path) == 1);  // kept: not expired
  CHECK(read_file(d.path + "/runs") == "token --cluster-name test eu-west-1\n");
  const std::string info = read_file(d.path + "/info");
  CHECK(info.find(R"("kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1")") != std::string::npos);
  CHECK(info.find(R"("interactive":false)") != std::string::npos);
  CHECK(info.find(R"("server":")" + api.url() + "\"") != std::string::npos);
  CHECK(info.find(R"("certificate-authority-data":")" + KubeApiServer::base64_of(api.tls("ca.crt"))) != std::string::npos);

  // The API server stops accepting the kept token: a 401 runs the plugin again, once.
  write_file(d.path + "/token", "exec-b");
  api.set_tokens({"exec-b"});
  auto rotated = client.get("/api/v1/nodes/n1", "read node");
  REQUIRE_MESSAGE(rotated.has_value(), (rotated ? "" : rotated.error().text()));
  CHECK(runs(d.path) == 2);
}

TEST_CASE("exec plugin: an expired credential is asked for again; a plugin that fails names itself and its stderr") {
  TempDir d;
  KubeApiServer api(d.path + "/api");
  install_plugin(d.path);
  write_file(d.path + "/token", "exec-c");
  write_file(d.path + "/exp", "2001-01-01T00:00:00Z");
  api.set_tokens({"exec-c"});
  api.write_kubeconfig(d.path + "/kc", exec_user("us-east-2"));
  auto creds = k8s::configured(d.path + "/kc");
  REQUIRE(creds.has_value());
  k8s::Client client(**creds, {});
  REQUIRE(client.get("/api/v1/nodes/none", "read node").has_value());
  REQUIRE(client.get("/api/v1/nodes/none", "read node").has_value());
  CHECK(runs(d.path) == 2);

  write_file(d.path + "/bin/creds", "#!/bin/sh\necho 'token expired, run aws sso login' >&2\nexit 3\n");
  auto failed = client.get("/api/v1/nodes/none", "read node");
  REQUIRE_FALSE(failed.has_value());
  CHECK(failed.error().cni_code == cni_code::kInvalidConfig);
  CHECK(failed.error().text().find("exec credential plugin " + d.path + "/bin/creds exited with status 3: token expired, run aws sso login") !=
        std::string::npos);
}
