// `plumb install` / `plumb uninstall` (see install.hpp).
#include "cni-entry/install/install.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>

#include "engine/base/file.hpp"
#include "engine/base/text.hpp"
#include "cni-entry/install/node_config.hpp"

namespace plumb::install {
namespace {

/// The flags taking a value, each with where it goes.
using Setter = std::function<Status(Options&, const std::string&)>;

Status set_interval(Options& o, const std::string& v) {
  const auto seconds = text::parse_decimal(v);
  if (!seconds || !(*seconds >= 0.1 && *seconds <= 3600)) {
    return fail(cni_code::kInvalidConfig, "--interval-seconds \"" + v + "\" is not a number of seconds in 0.1..3600");
  }
  o.interval = std::chrono::milliseconds(static_cast<long>(*seconds * 1000));
  return {};
}

const std::map<std::string, Setter>& value_flags() {
  static const std::map<std::string, Setter> flags = {
      {"--cni-bin-dir", [](Options& o, const std::string& v) -> Status { o.cni_bin_dir = v; return {}; }},
      {"--cni-conf-dir", [](Options& o, const std::string& v) -> Status { o.cni_conf_dir = v; return {}; }},
      {"--host-cni-conf-dir", [](Options& o, const std::string& v) -> Status { o.host_cni_conf_dir = v; return {}; }},
      {"--service-account-dir", [](Options& o, const std::string& v) -> Status { o.service_account_dir = v; return {}; }},
      {"--plugin-config", [](Options& o, const std::string& v) -> Status { o.plugin_config = v; return {}; }},
      {"--interval-seconds", set_interval},
  };
  return flags;
}

Status check_dir_flag(const std::string& value, const char* flag) {
  if (value.empty()) return fail(cni_code::kInvalidConfig, std::string(flag) + " is required");
  if (value.front() != '/') return fail(cni_code::kInvalidConfig, std::string(flag) + " \"" + value + "\" is not an absolute path");
  return {};
}

std::string support_dir(const std::string& conf_dir) { return conf_dir + "/" + std::string(kSupportDirName); }

/// `name` in the directory of the running binary ("name" alone when it cannot be read).
std::string beside_running_binary(const std::string& name) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? name : (self.parent_path() / name).string();
}

/// Writes `data` to `path` (0600) unless the file already holds exactly it; true if written.
Result<bool> write_if_changed(const std::string& path, const std::string& data) {
  auto old = read_file(path, "plumb install output");
  if (old && *old == data) return false;
  PLUMB_TRY(write_atomic(path, data, WriteOptions{0600, true}));
  return true;
}

Status remove_path(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return std::unexpected(Error{cni_code::kIo, ec.value(), "remove " + path, {}});
  return {};
}

void say(const std::string& line) { std::fprintf(stderr, "plumb install: %s\n", line.c_str()); }

void report(const Outcome& o, const Options& opts) {
  if (o.primary.empty()) {
    say("no primary CNI config in " + opts.cni_conf_dir + " yet: " + std::string(kConflistName) + " not written");
    return;
  }
  if (o.kubeconfig_written) say("wrote " + support_dir(opts.cni_conf_dir) + "/" + std::string(kKubeconfigName));
  if (o.conflist_written) {
    say("wrote " + opts.cni_conf_dir + "/" + std::string(kConflistName) + " (clusterNetwork " +
        opts.host_cni_conf_dir + "/" + o.primary + ")");
  }
}

/// Passes every interval until SIGTERM or SIGINT (blocked and read from a signalfd, so a signal
/// never interrupts a write half-way); then removes the config unless told to keep it.
int watch(const Options& opts) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) return 1;
  int sfd = ::signalfd(-1, &set, SFD_CLOEXEC);
  if (sfd < 0) {
    say("signalfd failed");
    return 1;
  }
  say("watching " + opts.cni_conf_dir + " and " + opts.service_account_dir);
  std::string last_error;
  for (;;) {
    pollfd p{sfd, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(opts.interval.count()));
    if (n > 0) break;  // a signal
    auto o = apply(opts);
    if (!o) {
      if (o.error().text() != last_error) say("error (kept the previous files): " + o.error().text());
      last_error = o.error().text();
      continue;
    }
    last_error.clear();
    if (o->conflist_written || o->kubeconfig_written) report(*o, opts);
  }
  ::close(sfd);
  if (opts.keep_config_on_exit) return 0;
  auto removed = remove_config(opts.cni_conf_dir);
  if (!removed) {
    say(removed.error().text());
    return 1;
  }
  say("removed " + opts.cni_conf_dir + "/" + std::string(kConflistName) + " on exit");
  return 0;
}

}  // namespace

Result<Options> parse_options(bool uninstall, const std::vector<std::string>& args,
                              const std::function<const char*(const char*)>& getenv) {
  Options o;
  o.uninstall = uninstall;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> value;
    if (auto eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
    }
    if (!value && flag == "--watch") {
      o.watch = true;
    } else if (!value && flag == "--keep-config-on-exit") {
      o.keep_config_on_exit = true;
    } else if (!value && flag == "--thick") {
      o.thick = true;
    } else if (auto it = value_flags().find(flag); it != value_flags().end()) {
      if (!value) {
        if (i + 1 >= args.size()) return fail(cni_code::kInvalidConfig, flag + " needs a value");
        value = args[++i];
      }
      PLUMB_TRY(it->second(o, *value));
    } else {
      return fail(cni_code::kInvalidConfig, "unknown flag \"" + args[i] + "\" (see plumb's README, \"Install on a cluster\")");
    }
  }
  PLUMB_TRY(check_dir_flag(o.cni_conf_dir, "--cni-conf-dir"));
  if (!uninstall) PLUMB_TRY(check_dir_flag(o.cni_bin_dir, "--cni-bin-dir"));
  if (o.host_cni_conf_dir.empty()) o.host_cni_conf_dir = o.cni_conf_dir;
  PLUMB_TRY(check_dir_flag(o.host_cni_conf_dir, "--host-cni-conf-dir"));
  if (const char* h = getenv("KUBERNETES_SERVICE_HOST")) o.service_host = h;
  if (const char* p = getenv("KUBERNETES_SERVICE_PORT")) o.service_port = p;
  return o;
}

Status copy_binary(const std::string& from, const std::string& bin_dir, const std::string& name) {
  const std::string to = bin_dir + "/" + name;
  const std::string tmp = bin_dir + "/." + name + ".install." + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::copy_file(from, tmp, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return std::unexpected(Error{cni_code::kIo, ec.value(), "copy " + from + " to " + tmp, {}});
  int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  int err = 0;
  if (fd < 0 || ::fchmod(fd, 0755) != 0 || ::fsync(fd) != 0) err = errno;
  if (fd >= 0) ::close(fd);
  if (err == 0 && ::rename(tmp.c_str(), to.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return std::unexpected(Error{cni_code::kIo, err, "install " + from + " as " + to, {}});
  }
  return {};
}

Result<Outcome> apply(const Options& opts) {
  Outcome out;
  auto primary = PLUMB_TRY(primary_config(opts.cni_conf_dir));
  if (!primary) {
    PLUMB_TRY(remove_config(opts.cni_conf_dir));
    return out;
  }
  out.primary = *primary;
  ConflistInputs in;
  in.primary_path = opts.host_cni_conf_dir + "/" + *primary;
  in.primary_text = PLUMB_TRY(read_file(opts.cni_conf_dir + "/" + *primary, "primary CNI config"));
  in.plugin_config = opts.plugin_config;
  if (opts.thick) in.plugin_type = "plumb-shim";
  // The DaemonSet's NODE_NAME (downward API): a runtime executes plumb without it, so the cluster
  // IPAM would otherwise record allocations under the host name, which need not be the node's.
  if (const char* node = std::getenv("NODE_NAME")) in.node_name = node;
  auto sa = PLUMB_TRY(read_service_account(opts.service_host, opts.service_port, opts.service_account_dir));
  if (sa) in.kubeconfig_path = support_dir(opts.host_cni_conf_dir) + "/" + std::string(kKubeconfigName);
  const std::string conflist = PLUMB_TRY(render_conflist(in));  // everything checked before a write
  const std::string kubeconfig = sa ? PLUMB_TRY(render_kubeconfig(*sa)) : std::string();
  if (sa) {
    PLUMB_TRY(mkdir_p(support_dir(opts.cni_conf_dir), 0700));
    out.kubeconfig_written = PLUMB_TRY(
        write_if_changed(support_dir(opts.cni_conf_dir) + "/" + std::string(kKubeconfigName), kubeconfig));
  }
  out.conflist_written = PLUMB_TRY(write_if_changed(opts.cni_conf_dir + "/" + std::string(kConflistName), conflist));
  return out;
}

Status remove_config(const std::string& conf_dir) {
  PLUMB_TRY(remove_path(conf_dir + "/" + std::string(kConflistName)));
  return remove_path(support_dir(conf_dir));
}

int command_main(int argc, char** argv) {
  const bool uninstall = std::string_view(argv[1]) == "uninstall";
  auto opts = parse_options(uninstall, std::vector<std::string>(argv + 2, argv + argc),
                            [](const char* name) { return std::getenv(name); });
  if (!opts) {
    say(opts.error().text());
    return 2;
  }
  if (uninstall) {
    auto removed = remove_config(opts->cni_conf_dir);
    if (!removed) say(removed.error().text());
    else say("removed " + opts->cni_conf_dir + "/" + std::string(kConflistName));
    return removed ? 0 : 1;
  }
  if (auto copied = copy_binary(opts->binary, opts->cni_bin_dir); !copied) {
    say(copied.error().text());
    return 1;
  }
  say("installed " + opts->cni_bin_dir + "/plumb");
  if (opts->thick) {
    // Before the conflist names it: a runtime never finds a "plumb-shim" it cannot execute.
    const std::string shim = beside_running_binary("plumb-shim");
    if (auto copied = copy_binary(shim, opts->cni_bin_dir, "plumb-shim"); !copied) {
      say(copied.error().text() + " (--thick installs the plumb-shim found beside plumb)");
      return 1;
    }
    say("installed " + opts->cni_bin_dir + "/plumb-shim");
  }
  auto o = apply(*opts);
  if (!o) {
    say(o.error().text());
    if (!opts->watch) return 1;
  } else {
    report(*o, *opts);
    if (!opts->watch && o->primary.empty()) return 1;
  }
  return opts->watch ? watch(*opts) : 0;
}

}  // namespace plumb::install
