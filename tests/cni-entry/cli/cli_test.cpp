// cni-entry/cli: plumb's command line as CLI11 parses it, without running anything: --help and
// --version, every subcommand's options in both spellings (--flag value, --flag=value) landing in
// its options, Multus's installer options with their meaning, and usage errors (exit status 2)
// naming the option and value.
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "cni-entry/cli/cli.hpp"
#include "plumb/version.hpp"

using plumb::cli::Command;

namespace {

/// install's environment: an in-cluster pod's service host and port.
const char* cluster_env(const char* name) {
  const std::string_view n = name;
  if (n == "KUBERNETES_SERVICE_HOST") return "10.96.0.1";
  if (n == "KUBERNETES_SERVICE_PORT") return "443";
  return nullptr;
}

Command parse(std::vector<std::string> args) {
  args.insert(args.begin(), "plumb");
  return plumb::cli::parse(args, cluster_env);
}

/// The version in CMakeLists.txt's project(plumb VERSION x.y.z ...).
std::string configured_version() {
  std::ifstream in(std::string(PLUMB_FIXTURES) + "/../../CMakeLists.txt");
  std::stringstream text;
  text << in.rdbuf();
  std::smatch m;
  const std::string s = text.str();
  REQUIRE(std::regex_search(s, m, std::regex(R"(project\(plumb VERSION ([0-9]+\.[0-9]+\.[0-9]+))")));
  return m[1];
}

}  // namespace

TEST_CASE("--help of plumb and of every subcommand: the usage with every option, exit status 0, nothing run") {
  const std::map<std::string, std::vector<std::string>> options = {
      {"", {"--help", "--version", "install", "uninstall", "daemon", "reconcile"}},
      {"install", {"--cni-bin-dir", "--cni-conf-dir", "--host-cni-conf-dir", "--service-account-dir", "--plugin-config", "--thick",
                   "--watch", "--interval-seconds", "--cleanup-config-on-exit", "--keep-config-on-exit",
                   "--multus-master-cni-file-name", "--cni-version", "--rename-conf-file", "--multus-kubeconfig-file-host"}},
      {"uninstall", {"--cni-conf-dir"}},
      {"daemon", {"--socket", "--workers", "--requests-per-worker", "--usage-log"}},
      {"reconcile", {"--dry-run", "--kubeconfig", "--namespace", "--timeout"}},
  };
  for (const auto& [sub, names] : options) {
    for (const char* help : {"--help", "-h"}) {
      CAPTURE(sub);
      CAPTURE(help);
      const Command c = sub.empty() ? parse({help}) : parse({sub, help});
      CHECK(c.kind == Command::Kind::kPrint);
      CHECK(c.exit_code == 0);
      CHECK(c.err.empty());
      CHECK(c.out.find("Usage: plumb" + (sub.empty() ? "" : " " + sub)) != std::string::npos);
      for (const auto& n : names) {
        CAPTURE(n);
        CHECK(c.out.find(n) != std::string::npos);
      }
    }
  }
}

TEST_CASE("--version: the configured project version with git describe, and the CNI versions") {
  const Command c = parse({"--version"});
  CHECK(c.kind == Command::Kind::kPrint);
  CHECK(c.exit_code == 0);
  CHECK(std::string(plumb::version::kProject) == configured_version());
  const std::string describe = plumb::version::kGitDescribe;
  const std::string expected = "plumb " + configured_version() + (describe.empty() ? "" : " (git " + describe + ")");
  CHECK(c.out.substr(0, c.out.find('\n')) == expected);
  CHECK(c.out.find("CNI protocol versions supported: 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0\n") != std::string::npos);
}

TEST_CASE("`plumb --version` is answered without CLI11, byte for byte as CLI11 answers it; nothing else is") {
  const Command cli11 = parse({"--version"});
  const auto early = plumb::cli::answer_before_parsing({"plumb", "--version"});
  REQUIRE(early.has_value());
  CHECK(early->kind == Command::Kind::kPrint);
  CHECK(early->exit_code == cli11.exit_code);
  CHECK(early->out == cli11.out);
  CHECK(early->err == cli11.err);
  for (const std::vector<std::string>& other : {std::vector<std::string>{"plumb"},
                                                {"plumb", "--help"},
                                                {"plumb", "--version", "daemon"},
                                                {"plumb", "daemon", "--version"},
                                                {"plumb", "--versions"},
                                                {"plumb", "version"}}) {
    CAPTURE(other.back());
    CHECK_FALSE(plumb::cli::answer_before_parsing(other).has_value());
  }
}

TEST_CASE("every subcommand takes --flag value and --flag=value alike") {
  for (bool joined : {false, true}) {
    CAPTURE(joined);
    auto args = [joined](std::string sub, std::vector<std::pair<std::string, std::string>> flags) {
      std::vector<std::string> out{std::move(sub)};
      for (auto& [k, v] : flags) {
        if (joined) {
          out.push_back(k + "=" + v);
        } else {
          out.push_back(k);
          out.push_back(v);
        }
      }
      return out;
    };
    const Command in = parse(args("install", {{"--cni-bin-dir", "/opt/cni/bin"}, {"--cni-conf-dir", "/host/etc/cni/net.d"},
                                              {"--host-cni-conf-dir", "/etc/cni/net.d"}, {"--service-account-dir", "/sa"},
                                              {"--plugin-config", R"({"logLevel": "debug"})"}, {"--interval-seconds", "0.5"},
                                              {"--multus-master-cni-file-name", "10-calico.conflist"}, {"--cni-version", "0.4.0"},
                                              {"--multus-kubeconfig-file-host", "/etc/cni/net.d/multus.d/multus.kubeconfig"}}));
    INFO(in.err);
    REQUIRE(in.kind == Command::Kind::kInstall);
    CHECK_FALSE(in.install.uninstall);
    CHECK(in.install.cni_bin_dir == "/opt/cni/bin");
    CHECK(in.install.cni_conf_dir == "/host/etc/cni/net.d");
    CHECK(in.install.host_cni_conf_dir == "/etc/cni/net.d");
    CHECK(in.install.service_account_dir == "/sa");
    CHECK(in.install.plugin_config == R"({"logLevel": "debug"})");
    CHECK(in.install.interval == std::chrono::milliseconds(500));
    CHECK(in.install.primary_name == "10-calico.conflist");
    CHECK(in.install.cni_version == "0.4.0");
    CHECK(in.install.kubeconfig_host == "/etc/cni/net.d/multus.d/multus.kubeconfig");
    CHECK(in.install.service_host == "10.96.0.1");
    CHECK(in.install.service_port == "443");

    const Command un = parse(args("uninstall", {{"--cni-conf-dir", "/etc/cni/net.d"}}));
    REQUIRE(un.kind == Command::Kind::kInstall);
    CHECK(un.install.uninstall);
    CHECK(un.install.cni_conf_dir == "/etc/cni/net.d");

    const Command d = parse(args("daemon", {{"--socket", "/run/x/plumb.sock"}, {"--workers", "7"}, {"--requests-per-worker", "9"},
                                            {"--usage-log", "/tmp/usage"}}));
    REQUIRE(d.kind == Command::Kind::kDaemon);
    CHECK(d.daemon.socket == "/run/x/plumb.sock");
    CHECK(d.daemon.workers == 7);
    CHECK(d.daemon.requests_per_worker == 9);
    CHECK(d.daemon.usage_log == "/tmp/usage");

    const Command r = parse(args("reconcile", {{"--kubeconfig", "/k"}, {"--namespace", "ns1"}, {"--timeout", "2.5"}}));
    REQUIRE(r.kind == Command::Kind::kReconcile);
    CHECK(r.reconcile.kubeconfig == "/k");
    CHECK(r.reconcile.ns == "ns1");
    CHECK(r.reconcile.timeout_seconds == 2.5);
    CHECK_FALSE(r.reconcile.dry_run);
  }
}

TEST_CASE("the defaults: install keeps its config on exit and watches only when told; the daemon's and reconcile's values") {
  const Command in = parse({"install", "--cni-bin-dir=/b", "--cni-conf-dir=/c"});
  REQUIRE(in.kind == Command::Kind::kInstall);
  CHECK_FALSE(in.install.watch);
  CHECK_FALSE(in.install.cleanup_on_exit);
  CHECK_FALSE(in.install.rename_primary);
  CHECK_FALSE(in.install.thick);
  CHECK(in.install.host_cni_conf_dir == "/c");
  CHECK(in.install.interval == std::chrono::milliseconds(1000));
  CHECK(in.install.primary_name.empty());
  CHECK(in.install.cni_version.empty());
  CHECK(in.install.kubeconfig_host.empty());
  const Command d = parse({"daemon"});
  REQUIRE(d.kind == Command::Kind::kDaemon);
  CHECK(d.daemon.socket == "/run/plumb/plumb.sock");
  CHECK(d.daemon.workers == 4);
  CHECK(d.daemon.requests_per_worker == 256);
  const Command r = parse({"reconcile", "--dry-run"});
  REQUIRE(r.kind == Command::Kind::kReconcile);
  CHECK(r.reconcile.dry_run);
  CHECK(r.reconcile.timeout_seconds == 30);
}

TEST_CASE("Multus's boolean installer options: bare, =true and =false; --cleanup-config-on-exit implies --watch") {
  auto install = [](std::vector<std::string> extra) {
    std::vector<std::string> a = {"install", "--cni-bin-dir=/b", "--cni-conf-dir=/c"};
    a.insert(a.end(), extra.begin(), extra.end());
    return parse(a);
  };
  Command c = install({"--cleanup-config-on-exit"});
  REQUIRE(c.kind == Command::Kind::kInstall);
  CHECK(c.install.cleanup_on_exit);
  CHECK(c.install.watch);
  c = install({"--cleanup-config-on-exit=true", "--rename-conf-file=true"});
  CHECK(c.install.cleanup_on_exit);
  CHECK(c.install.rename_primary);
  c = install({"--cleanup-config-on-exit=false", "--rename-conf-file=false"});
  CHECK_FALSE(c.install.cleanup_on_exit);
  CHECK_FALSE(c.install.watch);
  CHECK_FALSE(c.install.rename_primary);
  c = install({"--rename-conf-file"});
  CHECK(c.install.rename_primary);
  c = install({"--cleanup-config-on-exit", "--keep-config-on-exit"});  // plumb's name for =false; the last wins
  CHECK_FALSE(c.install.cleanup_on_exit);
}

TEST_CASE("usage errors: exit status 2 and a message naming the option or value, nothing to run") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--frobnicate"}, "--frobnicate"},
      {{"frobnicate"}, "frobnicate"},
      {{"--"}, "a subcommand is required"},
      {{"install", "--cni-conf-dir=/c"}, "--cni-bin-dir is required"},
      {{"install", "--cni-bin-dir=/b", "--cni-conf-dir=relative"}, "--cni-conf-dir \"relative\" is not an absolute path"},
      {{"install", "--cni-bin-dir=/b", "--cni-conf-dir"}, "--cni-conf-dir"},
      {{"install", "--cni-bin-dir=/b", "--cni-conf-dir=/c", "--interval-seconds=0"}, "\"0\" is not a number of seconds"},
      {{"install", "--cni-bin-dir=/b", "--cni-conf-dir=/c", "--interval-seconds=soon"}, "\"soon\""},
      {{"install", "--cni-bin-dir=/b", "--cni-conf-dir=/c", "--force"}, "--force"},
      {{"install", "--cni-bin-dir=/b", "--cni-conf-dir=/c", "--cni-version=9.9.9"}, "--cni-version \"9.9.9\""},
      {{"install", "--cni-bin-dir=/b", "--cni-conf-dir=/c", "--multus-master-cni-file-name=../x.conf"},
       "--multus-master-cni-file-name \"../x.conf\""},
      {{"install", "--cni-bin-dir=/b", "--cni-conf-dir=/c", "--multus-master-cni-file-name=00-plumb.conflist"},
       "--multus-master-cni-file-name \"00-plumb.conflist\""},
      {{"install", "--cni-bin-dir=/b", "--cni-conf-dir=/c", "--multus-kubeconfig-file-host=multus.kubeconfig"},
       "--multus-kubeconfig-file-host \"multus.kubeconfig\""},
      {{"install", "--cni-bin-dir=/b", "--cni-conf-dir=/c", "--rename-conf-file=sometimes"}, "sometimes"},
      {{"uninstall"}, "--cni-conf-dir is required"},
      {{"daemon", "--workers=0"}, "--workers"},
      {{"daemon", "--workers", "300"}, "300"},
      {{"daemon", "--requests-per-worker=many"}, "many"},
      {{"daemon", "--socket"}, "--socket"},
      {{"reconcile", "--timeout=0"}, "--timeout: \"0\" is not a number of seconds in (0, 3600]"},
      {{"reconcile", "--timeout=3601"}, "\"3601\""},
      {{"reconcile", "--frobnicate"}, "--frobnicate"},
  };
  for (const auto& [args, named] : cases) {
    CAPTURE(args.back());
    const Command c = parse(args);
    CHECK(c.kind == Command::Kind::kPrint);
    CHECK(c.exit_code == 2);
    CHECK(c.out.empty());
    CHECK(c.err.find(named) != std::string::npos);
    CHECK(c.err.find("--help") != std::string::npos);
  }
}
