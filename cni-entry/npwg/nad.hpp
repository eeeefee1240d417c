// The Network Plumbing WG standard v1.3: NetworkAttachmentDefinition (3), the selection
// annotation k8s.v1.cni.cncf.io/networks (4), CNI config resolution (3.4, 7.1) and the
// k8s.v1.cni.cncf.io/network-status annotation (5).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/cni/cni.hpp"
#include "engine/base/ip.hpp"
#include "engine/base/json.hpp"
#include "engine/base/result.hpp"

namespace plumb::nad {

inline constexpr std::string_view kNetworksAnnotation = "k8s.v1.cni.cncf.io/networks";
inline constexpr std::string_view kNetworkStatusAnnotation = "k8s.v1.cni.cncf.io/network-status";
inline constexpr std::string_view kResourceNameAnnotation = "k8s.v1.cni.cncf.io/resourceName";

/// A NetworkAttachmentDefinition object (spec 3.1).
struct NetworkAttachmentDefinition {
  std::string name;
  std::string namespace_;   // metadata.namespace ("default" when absent)
  std::string config;       // spec.config JSON text; "" when absent ("thick" plugin / on-disk)
  std::map<std::string, std::string> annotations;
};

/// Parses YAML text (one or more documents, as `kubectl apply` takes; also JSON) and returns
/// every NetworkAttachmentDefinition in it (apiVersion k8s.cni.cncf.io/v1), also inside a
/// `kind: List`'s items. Other kinds and API versions are skipped. Errors: kDecode naming `origin` (file path) and the YAML error position; a NAD
/// without a valid DNS-1123 name is kInvalidConfig naming the name.
[[nodiscard]] Result<std::vector<NetworkAttachmentDefinition>> parse_nad_yaml(std::string_view text,
                                                                              const std::string& origin);

/// True if `s` is a DNS-1123 label: 1..63 of [a-z0-9-], starting and ending alphanumeric.
[[nodiscard]] bool is_dns1123_label(std::string_view s);
/// True if `s` is a DNS-1123 subdomain: 1..253 chars, dot-separated labels of [a-z0-9-].
[[nodiscard]] bool is_dns1123_subdomain(std::string_view s);

/// A port mapping request (spec 4.1.2.1.7, CONVENTIONS portMappings).
struct PortMapping {
  uint16_t host_port = 0;
  uint16_t container_port = 0;
  std::string protocol = "tcp";  // lower case: tcp, udp, sctp
  std::string host_ip;           // "" = all
};

/// A bandwidth request (spec 4.1.2.1.8): rates in bits per second, bursts in bits; 0 = absent.
struct Bandwidth {
  uint64_t ingress_rate_bps = 0;
  uint64_t ingress_burst_bits = 0;
  uint64_t egress_rate_bps = 0;
  uint64_t egress_burst_bits = 0;
};

/// One element of the selection annotation (spec 4.1.2.1).
struct SelectionElement {
  std::string name;                        // NAD name (required)
  std::string namespace_;                  // NAD namespace ("" = the pod's namespace)
  std::vector<std::string> ips;            // as given, validated "addr[/len]"
  std::string mac;                         // validated 6-byte MAC, "" if absent
  std::string interface;                   // validated kernel ifname, "" if absent
  std::optional<json::Document> cni_args;  // the "cni-args" object
  std::vector<PortMapping> port_mappings;
  std::optional<Bandwidth> bandwidth;
  std::optional<std::vector<IpAddr>> default_route;  // present (maybe empty) if the key was set
  std::string infiniband_guid;             // validated 8-byte GUID, "" if absent
  std::string ipam_claim_reference;        // "" if absent
  std::string device_id;                   // Multus's "deviceID" extension: runtimeConfig.deviceID, "" if absent
};

/// Parses the selection annotation in either format (4.1.1 comma-delimited, items "name",
/// "namespace/name", optionally "@ifname" as Multus accepts, whitespace trimmed; 4.1.2 JSON list),
/// validating every key of 4.1.2.1: names/namespaces are DNS-1123 labels; ips non-empty and
/// each an IP with optional prefix; mac 6 bytes; interface a valid kernel name (<= 15 bytes,
/// no '/', ':' or whitespace); portMappings non-empty, ports 1..65535, protocol TCP/UDP/SCTP
/// (case-insensitive); bandwidth non-empty, values non-zero, burst only with its rate;
/// default-route on at most one element, each an IP; infiniband-guid 8 bytes;
/// ipam-claim-reference together with ips is an error; Multus's "deviceID" (a string) is read as
/// Multus reads it. An empty or whitespace annotation gives
/// no elements. mac ("-" separators accepted) and infiniband-guid are returned lower-case
/// colon-separated; protocol lower-case; keys with a period (implementation extensions) are
/// ignored; other keys the standard does not define (4.1.2.1 reserves every key without a
/// period) are ignored too and described in `warnings` when given ("element 2 (net-b): key
/// \"foo\" is not defined by the standard; keys without a period are reserved (4.1.2.1)").
/// Errors: kInvalidAnnotation whose msg names the offending key and value, e.g.
/// "k8s.v1.cni.cncf.io/networks: element 1 (net-a): \"mac\" \"zz:11\" is not a 6-byte MAC".
[[nodiscard]] Result<std::vector<SelectionElement>> parse_selection(std::string_view annotation,
                                                                    std::vector<std::string>* warnings = nullptr);

/// A network ready to run: a conflist whose every plugin carries the list's cniVersion and name.
struct ResolvedNetwork {
  std::string name;          // CNI network name (after injection)
  std::string cni_version;   // the list's cniVersion
  json::Document conflist;   // {"cniVersion","name","plugins":[...], ...}
  std::string origin;        // where it came from, for messages: "NAD ns/name" or a file path
  std::string resource_name; // the NAD's k8s.v1.cni.cncf.io/resourceName annotation, "" if none (or not a NAD)
  bool disable_check = false;  // the list's "disableCheck" (CNI 1.1.0): CHECK skips it
  bool disable_gc = false;     // the list's "disableGC" (CNI 1.1.0): GC leaves it alone
  size_t dropin_plugins = 0;   // plugins appended from the list file's drop-in directory (CNI 1.1.0)
};

/// Turns one CNI config (.conf shape, with "type") or config list (.conflist shape, with
/// "plugins") into a ResolvedNetwork: a single config is wrapped into a one-plugin list; when
/// "name" is missing, `default_name` is injected (3.4.2); cniVersion and name are injected into
/// every plugin (7.1); "cniVersions" (1.1.0) picks the highest supported version among its
/// entries and "cniVersion" (libcni); "disableCheck"/"disableGC" are booleans or "true"/"false"
/// strings (libcni).
/// Errors: kDecode for bad JSON, kInvalidConfig naming `origin` for a missing type/plugins or an
/// unsupported cniVersion (kIncompatibleVersion).
[[nodiscard]] Result<ResolvedNetwork> normalize(std::string_view config_json, const std::string& default_name,
                                                const std::string& origin);

/// Resolves a NAD per spec 3.4.1: spec.config if present; else a *.conflist file in `conf_dir`
/// whose "name" equals the NAD name; else a *.conf/*.json file with that name; else kNotFound
/// naming the NAD and the directory. The NAD's resourceName annotation is kept (resource_name).
[[nodiscard]] Result<ResolvedNetwork> resolve(const NetworkAttachmentDefinition& nad, const std::string& conf_dir);

/// Loads a network from a file (.conf/.json/.conflist) or, for a directory, its first config
/// file in lexical order (as libcni does). A .conflist file (here and in resolve()'s confDir
/// search) gets its plugin drop-ins as libcni's NetworkConfFromFile adds them: unless
/// "loadOnlyInlinedPlugins" is true, the *.conf files of "<its directory>/<network name>/" in
/// lexical order are appended to "plugins" (which may be absent then).
/// Errors: kNotFound naming the path; kInvalidConfig naming the file for a list with no plugin
/// at all, loadOnlyInlinedPlugins without "plugins", or a drop-in without "type".
[[nodiscard]] Result<ResolvedNetwork> load_file_or_dir(const std::string& path);

/// Multus's auxiliary CNI chain (its auxiliaryCNIChainName): the list {"name": name, "plugins":
/// [{"type": "passthru", "name": "passthru-cni"}]} in `cni_version`, followed by the plugin
/// drop-ins of "<conf_dir>/<name>/*.conf" (the directory of the clusterNetwork file, as Multus
/// takes it); nullopt when that directory has none (Multus adds no chain then).
/// Errors: kInvalidConfig for a name that is not a valid network name; the drop-ins'.
[[nodiscard]] Result<std::optional<ResolvedNetwork>> auxiliary_chain(const std::string& name, const std::string& cni_version,
                                                                     const std::string& conf_dir);

/// One element of the network-status annotation (spec 5.3).
struct StatusEntry {
  std::string name;              // "namespace/nad-name", or the default network's name
  std::string interface;         // "" = omitted
  std::vector<std::string> ips;  // addresses without prefix length
  std::string mac;
  std::optional<uint32_t> mtu_bytes;
  bool is_default = false;
  cni::Dns dns;
  std::vector<std::string> default_route;       // gateways, only when the element asked for it
  std::optional<json::Document> device_info;   // spec 5.3.8
  std::vector<std::string> gateway;            // Multus's "gateway": the gateways of the result's default routes
};

/// Builds an entry from an attachment's result (5.1.1, 5.3.2-5.3.5): interface, mac and mtu from
/// the first interface with a sandbox; ips from the ips whose interface index points at it, else
/// (no sandbox interface, or no ip points at it) those without an interface index or with a
/// negative one; addresses without prefix length. For results older than 0.3.0, or without any
/// interfaces, `ifname` is used for "interface". dns is copied; gateway lists the gateways of the
/// result's default routes (0.0.0.0/0, ::/0), as Multus writes it; default_route and
/// device_info are left for the caller.
[[nodiscard]] StatusEntry status_from_result(const std::string& name, const cni::CniResult& r,
                                             const std::string& ifname, bool is_default);
/// Encodes the annotation value: a compact JSON list of maps with the keys of 5.3 in the order
/// name, interface, ips, mac, mtu, default, dns, default-route, device-info, then Multus's
/// "gateway" (empty keys omitted; "default" always present; "mac" and "mtu" only with
/// "interface"; device-info copied verbatim).
[[nodiscard]] std::string encode_network_status(const std::vector<StatusEntry>& entries);
/// Checks the 5.2/5.3 invariants of a whole annotation: every entry has a name, exactly one
/// entry is "default", device-info (when set) is a map. Errors: kInternal naming the entry.
/// (Added by the nad owner.)
[[nodiscard]] Status check_network_status(const std::vector<StatusEntry>& entries);

}  // namespace plumb::nad
