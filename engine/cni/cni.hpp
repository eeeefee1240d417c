// CNI wire types (CNI SPEC 0.1.0 .. 1.1.0): the invocation environment, results in every version
// with conversion, and error JSON. Nothing here touches the kernel.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/base/ip.hpp"
#include "engine/base/json.hpp"
#include "engine/base/result.hpp"

namespace plumb::cni {

/// Versions plumb accepts, oldest first: 0.1.0 0.2.0 0.3.0 0.3.1 0.4.0 1.0.0 1.1.0.
const std::vector<std::string>& supported_versions();
/// True if `v` is one of supported_versions().
[[nodiscard]] bool version_supported(std::string_view v);
/// Compares two dotted versions numerically: <0, 0, >0. Unparseable parts compare as 0.
[[nodiscard]] int compare_versions(std::string_view a, std::string_view b);

/// True if `name` is a valid network name (CNI spec "Configuration format": starts with an
/// alphanumeric character, then alphanumerics, '_', '.' or '-'), at most 255 bytes: it names
/// directories (host-local's dataDir/<name>), so nothing else may enter.
[[nodiscard]] bool is_valid_network_name(std::string_view name);

/// The longest CNI_CONTAINERID plumb accepts: every file name derived from it (lock
/// "<id>:<ifname>", device-info "<id>-<ifname>-device.json" and their temporary files) must stay
/// within NAME_MAX (255). Kubernetes runtimes use 64.
inline constexpr size_t kMaxContainerIdBytes = 200;

enum class Command { Add, Del, Check, Version, Status, Gc };

/// The CNI_* environment of one invocation (SPEC "Parameters").
struct Env {
  Command command = Command::Version;
  std::string container_id;  // CNI_CONTAINERID
  std::string netns;         // CNI_NETNS (may be empty for DEL)
  std::string ifname;        // CNI_IFNAME
  std::string path;          // CNI_PATH
  std::string args_raw;      // CNI_ARGS as given
  std::vector<std::pair<std::string, std::string>> args;  // CNI_ARGS split at ';' and '='
  /// DEL only: CNI_CONTAINERID is one ADD refuses (see from()), so nothing plumb keeps can exist
  /// for it and the DEL has nothing to do (an idempotent DEL succeeds: CNI SPEC "DEL").
  bool container_id_refused = false;

  /// Reads the environment through `getenv_fn` (std::getenv in production). Validates what the
  /// command requires (ADD/CHECK: CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME; DEL: CNI_CONTAINERID,
  /// CNI_IFNAME; GC/STATUS/VERSION: nothing). Errors: kInvalidEnv naming the variable; an unknown
  /// CNI_COMMAND is kInvalidEnv naming the value; a container ID that is not [A-Za-z0-9_.-]+ or
  /// starts with '.' is kInvalidEnv (it becomes part of paths); so is one longer than
  /// kMaxContainerIdBytes or containing "..", a CNI_IFNAME of ADD or CHECK that is not link::valid_ifname()
  /// (engine/kernel/ifname.hpp; DEL takes any: nothing can exist under such a name), and a non-empty CNI_ARGS item
  /// without '=' (empty items are skipped). A DEL's refused container ID is no error: it sets
  /// container_id_refused instead (libcni's skel refuses it with code 4; no ADD of plumb's can
  /// have made anything for such an ID, and a DEL that fails is retried for ever).
  [[nodiscard]] static Result<Env> from(const char* (*getenv_fn)(const char*));
  /// Value of CNI_ARGS key `key` (exact match), if present.
  [[nodiscard]] std::optional<std::string> arg(std::string_view key) const;
};

/// One entry of a result's "interfaces" (0.3.0+).
struct Interface {
  std::string name;
  std::string mac;            // "" if unknown
  std::optional<uint32_t> mtu_bytes;  // 1.1.0 "mtu"
  std::string sandbox;        // netns path for container-side interfaces, "" for host side
  std::string socket_path;    // 1.1.0 "socketPath"
  std::string pci_id;         // 1.1.0 "pciID"
};

/// One entry of "ips". gateway optional; interface is an index into interfaces.
struct IpConfig {
  IpPrefix address;
  std::optional<IpAddr> gateway;
  std::optional<int> interface;
};

/// One entry of "routes".
struct RouteEntry {
  IpPrefix dst;
  std::optional<IpAddr> gw;
  std::optional<int> mtu_bytes, advmss, priority, table, scope;  // 1.1.0 additions
};

struct Dns {
  std::vector<std::string> nameservers;
  std::string domain;
  std::vector<std::string> search;
  std::vector<std::string> options;
  [[nodiscard]] bool empty() const { return nameservers.empty() && domain.empty() && search.empty() && options.empty(); }
};

/// A result in plumb's internal form (the 1.1.0 shape, a superset of every older one).
struct CniResult {
  std::string cni_version;  // version the result was decoded from / is to be encoded as
  std::vector<Interface> interfaces;
  std::vector<IpConfig> ips;
  std::vector<RouteEntry> routes;
  Dns dns;
};

/// Decodes a result of any supported version (`version` selects the shape: 0.1.0/0.2.0 use
/// ip4/ip6, 0.3.x and 0.4.0 have ips[].version, 1.0.0+ not). Errors: kDecode naming the bad field.
[[nodiscard]] Result<CniResult> decode_result(const json::Value& v, std::string_view version);
/// Encodes `r` in `version`'s shape. Converting down to 0.1/0.2 keeps the first IPv4 and IPv6
/// address (ip4/ip6 with their gateway and the routes of that family); 0.3.x and 0.4.0 add
/// ips[].version (libcni types040). A result without addresses encodes to 0.1/0.2 as
/// {"cniVersion","dns"} (libcni's converter would refuse it). "dns" is always written, "{}" when
/// empty, as the reference plugins Debian ships do in every version. Errors:
/// kIncompatibleVersion for an unsupported version.
[[nodiscard]] Result<json::Document> encode_result(const CniResult& r, std::string_view version);

/// The error JSON a plugin prints on failure: {"cniVersion","code","msg","details"}.
[[nodiscard]] std::string encode_error(const Error& e, std::string_view version);
/// The VERSION verb's answer: {"cniVersion": version, "supportedVersions": [...]}.
[[nodiscard]] std::string encode_version_info(std::string_view version);

/// A runtimeConfig key as CONVENTIONS.md spells it, found case-insensitively (containerd sends
/// "PortMappings", "HostPort" ...). Returns the canonical spelling for known keys
/// (portMappings, bandwidth, ips, mac, infinibandGUID, deviceID, dns, aliases, cgroupPath,
/// CNIDeviceInfoFile, io.kubernetes.cri.pod-annotations, hostPort, containerPort, protocol,
/// hostIP, ingressRate, ingressBurst, egressRate, egressBurst), `key` unchanged otherwise.
[[nodiscard]] std::string canonical_runtime_key(std::string_view key);
/// Returns a copy of a runtimeConfig object with every known key (recursively inside
/// portMappings entries and bandwidth) renamed to its canonical spelling.
[[nodiscard]] json::Document canonicalize_runtime_config(const json::Value& rc);

}  // namespace plumb::cni
