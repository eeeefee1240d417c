// `plumb install` / `plumb uninstall` (see install.hpp).
#include "cni-entry/install/install.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>

#include "engine/base/file.hpp"
#include "engine/base/text.hpp"
#include "engine/cni/cni.hpp"
#include "cni-entry/install/node_config.hpp"

namespace plumb::install {
namespace {

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
  if (!o.renamed.empty()) say("renamed " + opts.cni_conf_dir + "/" + o.renamed + " to " + o.primary);
}

/// Puts `from`'s file also at `to` (replacing what is there) in one step: a hard link under a
/// temporary name, renamed over `to`. Errors: kIo naming both paths.
Status link_over(const std::string& from, const std::string& to) {
  const std::string tmp = to + ".install." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  if (::link(from.c_str(), tmp.c_str()) != 0 || ::rename(tmp.c_str(), to.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return std::unexpected(Error{cni_code::kIo, err, "rename " + from + " to " + to, {}});
  }
  return {};
}

/// A renamed primary given its name back (when nothing took it meanwhile), so that the node keeps
/// its own configuration once plumb's conflist goes.
Status restore_renamed_primary(const std::string& conf_dir) {
  const auto renamed = renamed_primary(conf_dir);
  if (!renamed) return {};
  const std::string original = conf_dir + "/" + *renamed;
  const std::string old = original + std::string(kRenamedSuffix);
  if (::link(old.c_str(), original.c_str()) != 0) {
    const int err = errno;
    if (err == EEXIST) return {};
    return std::unexpected(Error{cni_code::kIo, err, "rename " + old + " back to " + original, {}});
  }
  ::unlink(old.c_str());
  return {};
}

/// Passes every interval until SIGTERM or SIGINT (blocked and read from a signalfd, so a signal
/// never interrupts a write half-way); then keeps the config (Multus's default), or removes it
/// with --cleanup-config-on-exit.
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
  if (!opts.cleanup_on_exit) {
    say("kept " + opts.cni_conf_dir + "/" + std::string(kConflistName) +
        " on exit (`plumb uninstall` removes it; --cleanup-config-on-exit removes it on exit)");
    return 0;
  }
  auto removed = remove_config(opts.cni_conf_dir);
  if (!removed) {
    say(removed.error().text());
    return 1;
  }
  say("removed " + opts.cni_conf_dir + "/" + std::string(kConflistName) + " on exit");
  return 0;
}

}  // namespace

Status complete_options(Options& o, const std::function<const char*(const char*)>& getenv) {
  PLUMB_TRY(check_dir_flag(o.cni_conf_dir, "--cni-conf-dir"));
  if (!o.uninstall) PLUMB_TRY(check_dir_flag(o.cni_bin_dir, "--cni-bin-dir"));
  if (o.host_cni_conf_dir.empty()) o.host_cni_conf_dir = o.cni_conf_dir;
  PLUMB_TRY(check_dir_flag(o.host_cni_conf_dir, "--host-cni-conf-dir"));
  const std::string& name = o.primary_name;
  if (!name.empty() && (name.find('/') != std::string::npos || name == "." || name == ".." || name == kConflistName)) {
    return fail(cni_code::kInvalidConfig, "--multus-master-cni-file-name \"" + name +
                                              "\" is not the name of a file in --cni-conf-dir other than plumb's own");
  }
  if (!o.cni_version.empty() && !cni::version_supported(o.cni_version)) {
    return fail(cni_code::kInvalidConfig, "--cni-version \"" + o.cni_version + "\" is not a CNI version plumb supports");
  }
  if (!o.kubeconfig_host.empty() && o.kubeconfig_host.front() != '/') {
    return fail(cni_code::kInvalidConfig,
                "--multus-kubeconfig-file-host \"" + o.kubeconfig_host + "\" is not an absolute path");
  }
  if (o.cleanup_on_exit) o.watch = true;  // Multus's entrypoint watches exactly when it cleans up
  if (const char* h = getenv("KUBERNETES_SERVICE_HOST")) o.service_host = h;
  if (const char* p = getenv("KUBERNETES_SERVICE_PORT")) o.service_port = p;
  return {};
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
  const std::string renamed = opts.rename_primary ? renamed_primary(opts.cni_conf_dir).value_or("") : "";
  auto primary = PLUMB_TRY(primary_config(opts.cni_conf_dir, opts.primary_name, renamed));
  if (!primary) {
    PLUMB_TRY(remove_config(opts.cni_conf_dir));
    return out;
  }
  // --rename-conf-file: the conflist names NAME.old; a runtime always finds a config (the old
  // conflist and NAME, then the new one and NAME.old holding the same file).
  const bool rename = opts.rename_primary && !primary->ends_with(kRenamedSuffix);
  out.primary = rename ? *primary + std::string(kRenamedSuffix) : *primary;
  ConflistInputs in;
  in.primary_path = opts.host_cni_conf_dir + "/" + out.primary;
  in.primary_text = PLUMB_TRY(read_file(opts.cni_conf_dir + "/" + *primary, "primary CNI config"));
  in.plugin_config = opts.plugin_config;
  in.cni_version = opts.cni_version;
  if (opts.thick) in.plugin_type = "plumb-shim";
  // The DaemonSet's NODE_NAME (downward API): a runtime executes plumb without it, so the cluster
  // IPAM would otherwise record allocations under the host name, which need not be the node's.
  if (const char* node = std::getenv("NODE_NAME")) in.node_name = node;
  auto sa = PLUMB_TRY(read_service_account(opts.service_host, opts.service_port, opts.service_account_dir));
  if (sa) in.kubeconfig_path = support_dir(opts.host_cni_conf_dir) + "/" + std::string(kKubeconfigName);
  if (!opts.kubeconfig_host.empty()) in.kubeconfig_path = opts.kubeconfig_host;
  const std::string conflist = PLUMB_TRY(render_conflist(in));  // everything checked before a write
  const std::string kubeconfig = sa ? PLUMB_TRY(render_kubeconfig(*sa)) : std::string();
  if (sa) {
    PLUMB_TRY(mkdir_p(support_dir(opts.cni_conf_dir), 0700));
    out.kubeconfig_written = PLUMB_TRY(
        write_if_changed(support_dir(opts.cni_conf_dir) + "/" + std::string(kKubeconfigName), kubeconfig));
  }
  const std::string live = opts.cni_conf_dir + "/" + *primary;
  if (rename) PLUMB_TRY(link_over(live, opts.cni_conf_dir + "/" + out.primary));
  out.conflist_written = PLUMB_TRY(write_if_changed(opts.cni_conf_dir + "/" + std::string(kConflistName), conflist));
  if (rename) {
    if (::unlink(live.c_str()) != 0 && errno != ENOENT) {
      const int err = errno;
      return std::unexpected(Error{cni_code::kIo, err, "remove " + live + " (renamed " + out.primary + ")", {}});
    }
    out.renamed = *primary;
  }
  return out;
}

Status remove_config(const std::string& conf_dir) {
  PLUMB_TRY(restore_renamed_primary(conf_dir));
  PLUMB_TRY(remove_path(conf_dir + "/" + std::string(kConflistName)));
  return remove_path(support_dir(conf_dir));
}

int run(const Options& opts) {
  if (opts.uninstall) {
    auto removed = remove_config(opts.cni_conf_dir);
    if (!removed) say(removed.error().text());
    else say("removed " + opts.cni_conf_dir + "/" + std::string(kConflistName));
    return removed ? 0 : 1;
  }
  if (auto copied = copy_binary(opts.binary, opts.cni_bin_dir); !copied) {
    say(copied.error().text());
    return 1;
  }
  say("installed " + opts.cni_bin_dir + "/plumb");
  if (opts.thick) {
    // Before the conflist names it: a runtime never finds a "plumb-shim" it cannot execute.
    const std::string shim = beside_running_binary("plumb-shim");
    if (auto copied = copy_binary(shim, opts.cni_bin_dir, "plumb-shim"); !copied) {
      say(copied.error().text() + " (--thick installs the plumb-shim found beside plumb)");
      return 1;
    }
    say("installed " + opts.cni_bin_dir + "/plumb-shim");
  }
  auto o = apply(opts);
  if (!o) {
    say(o.error().text());
    if (!opts.watch) return 1;
  } else {
    report(*o, opts);
    if (!opts.watch && o->primary.empty()) return 1;
  }
  return opts.watch ? watch(opts) : 0;
}

}  // namespace plumb::install
