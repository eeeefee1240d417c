// cni-entry/main: the plumb binary as a runtime and as a person start it. What it asks the
// dynamic loader for at every start (each shared library it names is opened, mapped, relocated
// and searched for symbols on every exec: ADD, DEL, CHECK, VERSION alike; heavy libraries are
// loaded later, only by what uses them; the static build, PLUMB_STATIC, the release binaries,
// asks for nothing: it has no loader at all), and that a CNI invocation runs nothing of the
// command line's or the pod-resources codec's. Started by a person: --help, --version and every
// subcommand's --help answer at once with stdin left open, and without CNI_COMMAND plumb says
// what it is, as the reference plugins' skel does, instead of waiting for a configuration on
// stdin.
#include <doctest/doctest.h>

#include <set>
#include <sstream>
#include <string>

#include "plumb/version.hpp"
#include "tests/support/bounded_run.hpp"
#include "tests/support/private_node.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

/// The NEEDED entries of the binary at `path` (readelf -d), e.g. "libc.so.6".
std::set<std::string> needed(const std::string& path) {
  auto p = plumb::test::sh("readelf -d '" + path + "'");
  REQUIRE(p.exit_code == 0);
  std::set<std::string> out;
  std::istringstream in(p.out);
  for (std::string line; std::getline(in, line);) {
    if (line.find("(NEEDED)") == std::string::npos) continue;
    const size_t open = line.find('['), close = line.find(']');
    if (open != std::string::npos && close > open) out.insert(line.substr(open + 1, close - open - 1));
  }
  return out;
}

/// Runs plumb as a person at a terminal would: stdin a pipe nobody writes to, `env` the whole
/// environment; a plumb that read stdin would wait there until the limit.
plumb::test::BoundedProc run_by_person(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> argv = {plumb::test::plumb_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  plumb::test::Bounds b;
  b.seconds = 20;
  b.stdin_open = true;
  return plumb::test::run_bounded(argv, env, "", b);
}

const std::string kCniVersions = "CNI protocol versions supported: 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0\n";

}  // namespace

#if PLUMB_STATIC_BINARY
TEST_CASE("the static plumb binary has no program interpreter and names no shared library") {
  auto headers = plumb::test::sh("readelf -lW '" + std::string(plumb::test::plumb_binary()) + "'");
  REQUIRE(headers.exit_code == 0);
  CHECK(headers.out.find("INTERP") == std::string::npos);  // what `ldd` reports as "not a dynamic executable"
  CHECK(headers.out.find("DYNAMIC") == std::string::npos);
  CHECK(needed(plumb::test::plumb_binary()).empty());
}
#else
TEST_CASE("the plumb binary names only libmnl and libc at start: no libm (nothing of plumb's calls it), no heavy library") {
  const auto libs = needed(plumb::test::plumb_binary());
  INFO([&] {
    std::string all;
    for (const auto& l : libs) all += l + " ";
    return all;
  }());
#ifndef PLUMB_SANITIZED
  CHECK(libs == std::set<std::string>{"libmnl.so.0", "libc.so.6", "ld-linux-x86-64.so.2"});
#else  // the sanitizer runtime brings libm and friends; the C++ library and the archives are shared
  CHECK(libs.count("libc.so.6") == 1);
  for (const char* heavy : {"libcurl", "libprotobuf", "libgrpc"}) {
    CAPTURE(heavy);
    for (const auto& l : libs) CHECK_FALSE(l.starts_with(heavy));
  }
#endif
}
#endif

TEST_CASE("plumb --help, --version and every subcommand's --help answer at once with stdin left open") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--help"}, "Usage: plumb [OPTIONS] [SUBCOMMAND]"},     {{"-h"}, "Usage: plumb [OPTIONS] [SUBCOMMAND]"},
      {{"--version"}, std::string("plumb ") + plumb::version::kFull + "\n" + kCniVersions},
      {{"install", "--help"}, "Usage: plumb install [OPTIONS]"}, {{"uninstall", "--help"}, "Usage: plumb uninstall [OPTIONS]"},
      {{"daemon", "--help"}, "Usage: plumb daemon [OPTIONS]"},   {{"reconcile", "--help"}, "Usage: plumb reconcile [OPTIONS]"},
  };
  for (const auto& [args, expected] : cases) {
    CAPTURE(args.front());
    CAPTURE(args.back());
    const auto p = run_by_person(args, {{"CNI_COMMAND", "ADD"}});  // arguments win over a stray CNI_COMMAND
    INFO(p.out, p.err);
    REQUIRE(p.exited());
    CHECK(p.exit_code == 0);
    CHECK(p.out.find(expected) != std::string::npos);
    CHECK(p.err.empty());
  }
}

TEST_CASE("plumb with a bad command line exits 2 at once, naming what it did not understand") {
  const auto p = run_by_person({"install", "--cni-bin-dir=/opt/cni/bin", "--cni-conf-dir=/etc/cni/net.d", "--frobnicate"});
  REQUIRE(p.exited());
  CHECK(p.exit_code == 2);
  CHECK(p.out.empty());
  CHECK(p.err.find("--frobnicate") != std::string::npos);
  CHECK(p.err.find("plumb install --help") != std::string::npos);
}

TEST_CASE("plumb without CNI_COMMAND says what it is on stderr and exits 0, reading nothing from stdin") {
  for (const auto& env : {std::map<std::string, std::string>{}, std::map<std::string, std::string>{{"CNI_COMMAND", ""}}}) {
    CAPTURE(env.size());
    const auto p = run_by_person({}, env);
    INFO(p.out, p.err);
    REQUIRE(p.exited());
    CHECK(p.exit_code == 0);
    CHECK(p.out.empty());
    CHECK(p.err.rfind(std::string("CNI plumb plugin v") + plumb::version::kFull + "\n" + kCniVersions, 0) == 0);
    CHECK(p.err.find("plumb --help") != std::string::npos);
  }
}

TEST_CASE("VERSION answers without a configuration on stdin, and with the configuration's cniVersion") {
  auto version = [](const std::string& input) {
    auto p = plumb::test::run_bounded({plumb::test::plumb_binary()}, {{"CNI_COMMAND", "VERSION"}}, input);
    REQUIRE(p.exited());
    CHECK(p.exit_code == 0);
    rapidjson::Document d;
    d.Parse(p.out.c_str());
    REQUIRE(d.IsObject());
    CHECK(d["supportedVersions"].Size() == 7);
    return std::string(d["cniVersion"].GetString());
  };
  CHECK(version("") == "1.1.0");
  CHECK(version(R"({"cniVersion": "0.4.0"})") == "0.4.0");
}

#ifndef PLUMB_SANITIZED  // valgrind cannot run the AddressSanitizer's binaries
TEST_CASE("a CNI invocation runs no code of the command line or the pod-resources codec: their initialisers wait") {
  plumb::test::TempDir d;
  // Every function the process ran (callgrind, all of them: no threshold), as callgrind_annotate names them.
  auto functions_run = [&d](const std::string& env, const std::string& args) {
    const auto p = plumb::test::sh(env + " valgrind --tool=callgrind --callgrind-out-file=" + d.path + "/cg '" +
                                   plumb::test::plumb_binary() + "' " + args + " </dev/null >/dev/null 2>&1; callgrind_annotate --threshold=100 " +
                                   d.path + "/cg");
    REQUIRE(p.exit_code == 0);
    REQUIRE(p.out.find("PROGRAM TOTALS") != std::string::npos);
    return p.out;
  };
  const std::string cni = functions_run("CNI_COMMAND=VERSION", "");
  CHECK(cni.find("CLI::") == std::string::npos);
  CHECK(cni.find("ios_base::Init::Init") == std::string::npos);
  // Nor of the pod-resources codec: the static binary carries protobuf-lite, whose initialisers
  // (and the codec's) wait for a pod with device resources (cni-entry/deferred_init.hpp).
  CHECK(cni.find("google::protobuf") == std::string::npos);
  CHECK(cni.find("plumb_podresources") == std::string::npos);
  // The same search finds them where a command line is parsed.
  const std::string cli = functions_run("", "--help");
  CHECK(cli.find("CLI::") != std::string::npos);
  CHECK(cli.find("ios_base::Init::Init") != std::string::npos);
}
#endif
