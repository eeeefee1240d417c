// plumb's command line: `plumb --help`, `plumb --version` and the subcommands an operator runs
// (install, uninstall, daemon, reconcile), each with `--help`, parsed by CLI11 in cli.cpp alone
// (`--flag value` and `--flag=value` alike). A runtime runs plumb without arguments (main.cpp's
// CNI entry), which never reaches this code, and a pod's ADD does not construct CLI11's static
// objects either: cli.cpp's object is linked with its static initialisers moved out of
// .init_array (CMakeLists.txt), and parse() runs them first.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cni-entry/daemon/daemon.hpp"
#include "cni-entry/install/install.hpp"
#include "cni-entry/reconcile/reconcile.hpp"

namespace plumb::cli {

/// A parsed command line: a subcommand to run with its options, or what to print and the exit
/// status (after --help, --version, or a usage error).
struct Command {
  enum class Kind { kPrint, kInstall, kDaemon, kReconcile };
  Kind kind = Kind::kPrint;
  int exit_code = 0;              ///< kPrint: 0 after --help or --version, 2 after a usage error
  std::string out;                ///< kPrint: for stdout (the help or version text)
  std::string err;                ///< kPrint: for stderr (the usage error, and where help is)
  install::Options install;       ///< kInstall: `plumb install` or (install.uninstall) `plumb uninstall`
  daemon::Options daemon;         ///< kDaemon
  reconcile::Options reconcile;   ///< kReconcile
};

/// Parses `args` (args[0] the program's name, then --help, --version or a subcommand with its
/// options); install's environment (KUBERNETES_SERVICE_HOST/PORT) is read through `getenv`. A
/// usage error (unknown option or subcommand, a value missing or out of range) is a kPrint with
/// exit code 2 whose `err` names the option and value.
[[nodiscard]] Command parse(const std::vector<std::string>& args, const std::function<const char*(const char*)>& getenv);

/// `plumb --version` (`args` exactly that) answered without CLI11: the kPrint parse() makes of it,
/// byte for byte. CLI11 answers --version by throwing, and the first exception a static binary
/// throws has the C++ runtime sort its whole unwind table. nullopt: anything else, for parse().
[[nodiscard]] std::optional<Command> answer_before_parsing(const std::vector<std::string>& args);

/// `plumb ARGS...` (argc >= 2): answer_before_parsing() or parse(), then prints or runs the
/// subcommand; `cni_main` is the CNI entry a `plumb daemon`'s workers run. Returns the exit status.
int run(int argc, char** argv, daemon::CniMain cni_main);

}  // namespace plumb::cli
