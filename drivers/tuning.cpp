// The reference "tuning" plugin, natively (chained: needs a prevResult): sysctls of the pod
// namespace and link attributes of the attachment's pod interface, the previous values saved in
// the undo operation "tuning.restore" and put back on DEL while the pod namespace exists.
// Keys: sysctl (object of strings; keys only under net/, "." or "/" separated, the word IFNAME
// replaced by the attachment's interface name; a key given twice is refused), mac, mtu, promisc,
// allmulti, txQLen; args.cni may add or override sysctl entries and override mac, mtu, promisc,
// allmulti and txQLen; the MAC comes, lowest priority first, from the config, CNI_ARGS MAC=,
// runtimeConfig.mac (capability "mac") and args.cni.mac, as the reference resolves it.
// Sysctl allowlist (the reference's /etc/cni/tuning/allowlist.conf; plumb config
// tuningAllowlist): when the file exists, every sysctl key, as written in the config, must match
// one of its lines (regular expressions, unanchored like Go's regexp.MatchString; ECMAScript
// syntax, which agrees with Go's RE2 for the usual `^net\.ipv4\.conf\.IFNAME\.[a-z_]+$` forms);
// it is read by ADD before any change.
#include <net/if.h>

#include <algorithm>
#include <regex>

#include "drivers/registry.hpp"
#include "drivers/steps.hpp"
#include "drivers/undo.hpp"
#include "engine/base/file.hpp"
#include "engine/base/text.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/sysctl.hpp"

namespace plumb::drivers {
namespace {

struct Sysctl {
  std::string key;    // '/' form relative to /proc/sys, IFNAME substituted, under net/
  std::string value;
  std::string raw;    // the key as the config wrote it (what the allowlist matches)
};

/// The tuning plugin's configuration, validated.
struct TuningConfig : Config {
  std::vector<Sysctl> sysctls;
  std::optional<Mac> mac;
  std::optional<uint32_t> mtu_bytes;
  std::optional<bool> promisc;
  std::optional<bool> allmulti;
  std::optional<uint32_t> txqlen;
  std::string allowlist;  ///< the sysctl allowlist file (DriverSettings::tuning_allowlist)
};

/// Normalises a sysctl key of the config: sysctl(8) separators ('.' form converted to '/'), the
/// word IFNAME replaced by `ifname` afterwards (names may contain '.'), and only keys under
/// net/ accepted (the reference plugin's rule: nothing outside the network subsystem).
Result<std::string> net_sysctl_key(const std::string& key, const std::string& ifname, const std::string& where) {
  auto path = sysctl::path_of(key);
  if (!path) return fail(cni_code::kInvalidConfig, where + ".sysctl: invalid key \"" + key + "\"", path.error().text());
  std::string rel = path->substr(std::string_view("/proc/sys/").size());
  for (size_t pos = 0; (pos = rel.find("IFNAME", pos)) != std::string::npos; pos += ifname.size()) {
    rel.replace(pos, 6, ifname);
  }
  if (rel.rfind("net/", 0) != 0) {
    return fail(cni_code::kInvalidConfig, where + ".sysctl: key \"" + key + "\" is not under net/ (/proc/sys/net/): refused");
  }
  PLUMB_TRY(sysctl::path_of(rel));  // still a plain relative path after substitution
  return rel;
}

Result<std::optional<uint32_t>> get_u32(const json::Value& obj, std::string_view key, const std::string& where, uint32_t max) {
  auto v = PLUMB_TRY(json::get_int(obj, key, where));
  if (!v) return std::optional<uint32_t>{};
  if (*v < 0 || *v > static_cast<int64_t>(max)) {
    return fail(cni_code::kInvalidConfig, where + "." + std::string(key) + " " + std::to_string(*v) + " is out of range");
  }
  return std::optional<uint32_t>(static_cast<uint32_t>(*v));
}

/// Reads mac/mtu/promisc/allmulti/txQLen of one object (the config, or args.cni) into c.
Status parse_link_keys(const json::Value& obj, const std::string& where, TuningConfig& c) {
  if (auto m = PLUMB_TRY(json::get_string(obj, "mac", where)); m && !m->empty()) {
    auto parsed = Mac::parse(*m);
    if (!parsed) return fail(cni_code::kInvalidConfig, where + ".mac \"" + *m + "\" is not a valid MAC address");
    c.mac = *parsed;
  }
  if (auto m = PLUMB_TRY(parse_mtu(obj, where))) c.mtu_bytes = *m;
  if (auto b = PLUMB_TRY(json::get_bool(obj, "promisc", where))) c.promisc = *b;
  if (auto b = PLUMB_TRY(json::get_bool(obj, "allmulti", where))) c.allmulti = *b;
  if (auto q = PLUMB_TRY(get_u32(obj, "txQLen", where, UINT32_MAX))) c.txqlen = *q;
  return {};
}

/// Adds the entries of a "sysctl" object (the config's, then args.cni's: a later entry for the
/// same key replaces the earlier one). A key twice in one object is refused, as the reference.
Status parse_sysctls(const json::Value& sc, const std::string& where, const std::string& ifname, std::vector<Sysctl>& out) {
  std::vector<std::string> seen;
  for (auto it = sc.MemberBegin(); it != sc.MemberEnd(); ++it) {
    std::string key = it->name.GetString();
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      return fail(cni_code::kInvalidConfig, where + ".sysctl \"" + key + "\": duplicated sysctl keys are not allowed");
    }
    seen.push_back(key);
    if (!it->value.IsString()) {
      return fail(cni_code::kInvalidConfig, where + ".sysctl \"" + key + "\": the value must be a string, got " + json::quote(it->value));
    }
    Sysctl s{PLUMB_TRY(net_sysctl_key(key, ifname, where)), it->value.GetString(), key};
    auto same = std::find_if(out.begin(), out.end(), [&](const Sysctl& o) { return o.key == s.key; });
    if (same != out.end()) {
      *same = std::move(s);
    } else {
      out.push_back(std::move(s));
    }
  }
  return {};
}

Result<TuningConfig> parse_config(const json::Value& conf, const ParseInput& in) {
  TuningConfig c;
  c.allowlist = in.settings.tuning_allowlist;
  const std::string& where = in.network;
  if (const json::Value* sc = PLUMB_TRY(json::get_object(conf, "sysctl", where))) PLUMB_TRY(parse_sysctls(*sc, where, in.ifname, c.sysctls));
  PLUMB_TRY(parse_link_keys(conf, where, c));
  for (auto& [k, v] : in.cni_args) {
    if (k != "MAC") continue;
    auto parsed = Mac::parse(v);
    if (!parsed) return fail(cni_code::kInvalidConfig, where + ": CNI_ARGS MAC \"" + v + "\" is not a valid MAC address");
    c.mac = *parsed;
  }
  if (const json::Value* rc = PLUMB_TRY(json::get_object(conf, "runtimeConfig", where))) {
    if (auto m = PLUMB_TRY(json::get_string(*rc, "mac", where + ".runtimeConfig", true)); m && !m->empty()) {
      auto parsed = Mac::parse(*m);
      if (!parsed) return fail(cni_code::kInvalidConfig, where + ".runtimeConfig.mac \"" + *m + "\" is not a valid MAC address");
      c.mac = *parsed;
    }
  }
  if (const json::Value* args = PLUMB_TRY(json::get_object(conf, "args", where))) {
    if (const json::Value* cni = PLUMB_TRY(json::get_object(*args, "cni", where + ".args"))) {
      if (const json::Value* sc = PLUMB_TRY(json::get_object(*cni, "sysctl", where + ".args.cni"))) {
        PLUMB_TRY(parse_sysctls(*sc, where + ".args.cni", in.ifname, c.sysctls));
      }
      PLUMB_TRY(parse_link_keys(*cni, where + ".args.cni", c));
    }
  }
  return c;
}

/// The allowlist check of the reference (validateSysctlConf): with the file present, every
/// sysctl key must match one of its regular expressions. Errors: kInvalidConfig naming the key
/// and the patterns; kInvalidConfig for a line that is not a regular expression; kIo when the
/// file exists but cannot be read.
Status check_allowlist(const std::string& path, const std::string& network, const std::vector<Sysctl>& sysctls) {
  if (sysctls.empty()) return {};
  auto text = read_file(path, "tuning sysctl allowlist");
  if (!text) {
    if (text.error().cni_code == cni_code::kNotFound) return {};
    return std::unexpected(text.error());
  }
  std::vector<std::string> patterns;
  std::vector<std::regex> allow;
  for (auto line : text::split(*text, '\n')) {
    line = text::trim(line);
    if (line.empty()) continue;
    patterns.emplace_back(line);
    try {
      allow.emplace_back(patterns.back(), std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return fail(cni_code::kInvalidConfig, "tuning sysctl allowlist " + path + ": \"" + patterns.back() + "\" is not a regular expression",
                  e.what());
    }
  }
  for (auto& s : sysctls) {
    bool ok = std::any_of(allow.begin(), allow.end(), [&](const std::regex& re) { return std::regex_search(s.raw, re); });
    if (!ok) {
      std::string list;
      for (auto& p : patterns) list += (list.empty() ? "" : " ") + p;
      return fail(cni_code::kInvalidConfig, network + ".sysctl " + s.raw + " is not allowed. Only the following sysctls are allowed: [" +
                                                list + "] (" + path + ")");
    }
  }
  return {};
}

Result<cni::CniResult> tuning_add(Context& ctx, const TuningConfig& c, const cni::CniResult* prev) {
  if (prev == nullptr) {
    return fail(cni_code::kInvalidConfig, ctx.network + ": tuning must be chained after a plugin that creates the interface (no prevResult)");
  }
  PLUMB_TRY(check_allowlist(c.allowlist, ctx.network, c.sysctls));
  auto l = PLUMB_TRY(link::get(*ctx.pod, ctx.ifname));
  if (!l) return fail(cni_code::kKernel, ctx.network + ": tuning: interface " + ctx.ifname + " not found in " + ctx.netns_path);

  // The step records the previous values of what it changes (tuning.restore), then changes them.
  steps::TunePodLink tune{l->index, ctx.ifname, {}, {}};
  for (auto& s : c.sysctls) tune.sysctls.emplace_back(s.key, s.value);
  tune.change.mac = c.mac;
  tune.change.mtu_bytes = c.mtu_bytes;
  tune.change.promisc = c.promisc;
  tune.change.allmulti = c.allmulti;
  tune.change.txqlen = c.txqlen;
  auto st = steps::run(ctx, tune);
  if (!st) return std::unexpected(st.error().within(ctx.network + ": tuning " + ctx.ifname + " in " + ctx.netns_path));

  cni::CniResult r = *prev;
  auto now = PLUMB_TRY(link::get(*ctx.pod, l->index));
  for (auto& i : r.interfaces) {
    if (i.name != ctx.ifname || i.sandbox.empty() || !now) continue;
    if (c.mac && now->mac()) i.mac = now->mac()->str();
    if (c.mtu_bytes && i.mtu_bytes) i.mtu_bytes = now->mtu_bytes;
  }
  return r;
}

Status tuning_check(Context& ctx, const TuningConfig& c, const cni::CniResult&) {
  auto l = PLUMB_TRY(link::get(*ctx.pod, ctx.ifname));
  if (!l) return fail(cni_code::kKernel, "CHECK: interface " + ctx.ifname + " not found in " + ctx.netns_path);
  auto differs = [&](const std::string& what, const std::string& got, const std::string& want) {
    return fail(cni_code::kKernel, "CHECK: " + ctx.ifname + " " + what + " is " + got + ", tuning set " + want);
  };
  if (c.mac && l->mac() && *l->mac() != *c.mac) return differs("MAC", l->mac()->str(), c.mac->str());
  if (c.mtu_bytes && l->mtu_bytes != *c.mtu_bytes) return differs("MTU", std::to_string(l->mtu_bytes), std::to_string(*c.mtu_bytes));
  if (c.promisc && ((l->flags & IFF_PROMISC) != 0) != *c.promisc) return differs("promisc", *c.promisc ? "off" : "on", *c.promisc ? "on" : "off");
  if (c.allmulti && ((l->flags & IFF_ALLMULTI) != 0) != *c.allmulti) return differs("allmulti", *c.allmulti ? "off" : "on", *c.allmulti ? "on" : "off");
  if (c.txqlen && l->txqlen != *c.txqlen) return differs("txqueuelen", std::to_string(l->txqlen), std::to_string(*c.txqlen));
  auto guard = PLUMB_TRY(netns::Guard::enter(*ctx.pod_ns));
  for (auto& s : c.sysctls) {
    auto v = PLUMB_TRY(sysctl::read(s.key));
    if (v != s.value) return fail(cni_code::kKernel, "CHECK: sysctl " + s.key + " is \"" + v + "\", tuning set \"" + s.value + "\"");
  }
  return {};
}

}  // namespace

const Driver kTuning = make_driver<TuningConfig, parse_config, tuning_add, tuning_check>("tuning");

namespace undo {

Status run_op(Context& ctx, const TuningRestore& op) {
  if (ctx.pod == nullptr || ctx.pod_ns == nullptr) return {};  // the namespace and its settings are gone
  std::optional<Error> first;
  if (!op.sysctl.empty()) {
    auto guard = PLUMB_TRY(netns::Guard::enter(*ctx.pod_ns));
    for (const auto& [key, value] : op.sysctl) {
      if (key.rfind("net/", 0) != 0) continue;  // never written by tuning_add
      auto st = sysctl::write(key, value);
      if (!st && st.error().sys_errno != ENOENT && !first) first = st.error().within("undo: restore sysctl");
    }
  }
  auto l = PLUMB_TRY(link::get(*ctx.pod, op.ifname));
  if (!l) return first ? std::unexpected(*first) : Status{};
  link::LinkChange ch;
  ch.mac = op.mac;
  if (op.mtu_bytes && *op.mtu_bytes != 0) ch.mtu_bytes = *op.mtu_bytes;
  ch.promisc = op.promisc;
  ch.allmulti = op.allmulti;
  ch.txqlen = op.txqlen;
  if (ch.mac || ch.mtu_bytes || ch.promisc || ch.allmulti || ch.txqlen) {
    auto st = link::modify(*ctx.pod, l->index, ch);
    if (!st && !first) first = st.error().within("undo: restore " + op.ifname + " in " + ctx.netns_path);
  }
  if (first) return std::unexpected(*first);
  return {};
}

}  // namespace undo

}  // namespace plumb::drivers
