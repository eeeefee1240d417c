// IPAMClaims: hand a claim to the IPAM (host-local, the cluster IPAM), publish its addresses,
// release them at GC (claims.hpp).
#include "engine/base/file.hpp"
#include "engine/base/text.hpp"
#include "cni-entry/pod/claims.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <vector>

#include "engine/state/state.hpp"
#include "ipam/ipam.hpp"

namespace plumb::pod::claims {
namespace {

const std::string kOwnerPrefix = "ipamclaim:";

std::string claims_dir(const std::string& state_dir) { return state_dir + "/ipamclaims"; }


/// An IPAM that can hold addresses for a claim.
bool holds_for_owner(const drivers::ParsedPlugin& p) { return p.config->ipam.ipam && p.config->ipam.ipam->supports_owner(); }

/// A network name usable as a file name (host-local validates the same before using it).
bool file_safe(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos && s.find('\0') == std::string::npos &&
         s.size() <= 200;
}

}  // namespace

Result<std::optional<Use>> prepare(source::PodSource& src, const std::string& state_dir,
                                   const std::string& pod_namespace, const nad::SelectionElement* element,
                                   const std::vector<drivers::ParsedPlugin>& parsed, const std::string& network, Log& log) {
  if (element == nullptr || element->ipam_claim_reference.empty()) return std::optional<Use>{};
  const std::string who = "IPAMClaim " + pod_namespace + "/" + element->ipam_claim_reference;
  if (std::none_of(parsed.begin(), parsed.end(), holds_for_owner)) {
    log.warning("network " + network + ": ignoring \"ipam-claim-reference\" " + who +
                ": none of the network's plugins uses an IPAM plumb can tie to a claim (host-local, whereabouts, plumb-cluster)");
    return std::optional<Use>{};
  }
  if (!file_safe(network))
    return fail(cni_code::kInvalidConfig, "network name \"" + network + "\" cannot name an IPAMClaim record");

  Use use;
  use.namespace_ = pod_namespace;
  use.name = element->ipam_claim_reference;
  use.owner = kOwnerPrefix + pod_namespace + "/" + use.name;

  // Under the claims lock: a GC releasing a deleted claim of the same name finishes first.
  const auto dir = std::make_shared<const Dir>(PLUMB_TRY(Dir::open(claims_dir(state_dir), 0700)));
  auto lock = PLUMB_TRY(state::lock_file(dir, "lock"));
  auto claim = PLUMB_TRY(src.ipam_claim(use.namespace_, use.name));
  if (!claim) {
    return fail(cni_code::kNotFound,
                who + " (\"ipam-claim-reference\" of network " + network + ") not found in " + src.describe());
  }
  use.had_ips = !claim->ips.empty();
  use.ips = claim->ips;

  for (const auto& p : parsed) {
    if (!holds_for_owner(p)) continue;
    // The GC record, written before the IPAM takes any address.
    json::Document rec(rapidjson::kObjectType);
    auto& ra = rec.GetAllocator();
    json::set_string(rec, "claim", use.namespace_ + "/" + use.name, ra);
    json::set_string(rec, "owner", use.owner, ra);
    json::set_string(rec, "network", network, ra);
    json::Value ipam_copy;
    ipam_copy.CopyFrom(*p.config->ipam.conf, ra);
    json::set(rec, "ipam", std::move(ipam_copy), ra);
    auto rec_dir = PLUMB_TRY(PLUMB_TRY(dir->sub(use.namespace_, 0700)).sub(use.name, 0700));
    auto st = rec_dir.write_atomic(network + ".json", json::dump(rec));
    if (!st) return std::unexpected(st.error().within("record the addresses of " + who + " for GC"));
  }
  return std::optional<Use>(std::move(use));
}

Status publish(source::PodSource& src, const Use& use, const cni::CniResult& result, const std::string& pod_name) {
  if (use.had_ips || result.ips.empty()) return {};
  source::IpamClaimStatus status{{}, pod_name, text::utc_now_rfc3339()};
  status.ips.reserve(result.ips.size());
  for (const auto& ip : result.ips) status.ips.push_back(ip.address.str());
  auto st = src.write_ipam_claim_status(use.namespace_, use.name, status);
  if (!st) return std::unexpected(st.error().within("IPAMClaim " + use.namespace_ + "/" + use.name));
  return {};
}

namespace {

/// Releases the addresses recorded in `claim_dir` (one record per network) for the deleted
/// claim `ns`/`name`, removing each record whose release succeeded. Every failure goes to
/// `note`. Returns true when every record was released (the directory may go).
bool release_claim(const Dir& claim_dir, const std::string& ns, const std::string& name, const ipam::ClusterAccess& cluster,
                   Log& log, const std::function<void(const Error&)>& note) {
  auto files = claim_dir.list();
  if (!files) {
    note(files.error());
    return false;
  }
  bool all_released = true;
  for (const auto& f : *files) {
    const std::string path = claim_dir.path_of(f.name);
    auto text = claim_dir.read(f.name, "IPAMClaim record", 1u << 20);
    if (!text) {
      note(text.error());
      all_released = false;
      continue;
    }
    auto rec = json::parse(*text, path);
    const json::Value* ipam_conf = nullptr;
    std::optional<std::string> network, owner;
    if (rec && rec->IsObject()) {
      ipam_conf = json::find(*rec, "ipam");
      if (auto v = json::get_string(*rec, "network", path)) network = *v;
      if (auto v = json::get_string(*rec, "owner", path)) owner = *v;
    }
    if (ipam_conf == nullptr || !network || !owner || owner->rfind(kOwnerPrefix, 0) != 0) {
      note(Error{cni_code::kDecode, 0, "IPAMClaim record " + path + " is not readable; left in place", {}});
      all_released = false;
      continue;
    }
    auto ipam = ipam::make(*ipam_conf, nullptr, &cluster);
    Status st = ipam ? Status{} : Status(std::unexpected(ipam.error()));
    if (ipam) {
      ipam::Request req;
      req.container_id = *owner;
      req.owner = *owner;
      req.network_name = *network;
      req.ipam = ipam_conf;
      st = (*ipam)->del(req);
    }
    if (!st) {
      note(st.error().within("release the addresses of deleted IPAMClaim " + ns + "/" + name + " in network " + *network));
      all_released = false;
      continue;
    }
    if (auto rm = claim_dir.remove(f.name); !rm) note(rm.error());
    log.info("GC: released the addresses of deleted IPAMClaim " + ns + "/" + name + " in network " + *network);
  }
  return all_released;
}

}  // namespace

Status gc(source::PodSource& src, const std::string& state_dir, const ipam::ClusterAccess& cluster, Log& log) {
  auto opened = Dir::open(claims_dir(state_dir));
  if (!opened && opened.error().cni_code == cni_code::kNotFound) return {};  // no claim was ever used here
  const auto dir = std::make_shared<const Dir>(PLUMB_TRY(std::move(opened)));
  auto lock = PLUMB_TRY(state::lock_file(dir, "lock"));
  std::optional<Error> first;
  const std::function<void(const Error&)> note = [&](const Error& e) {
    log.error("GC: " + e.text());
    if (!first) first = e;
  };
  for (const auto& ns : PLUMB_TRY(dir->list())) {
    if (ns.name == "lock" || !nad::is_dns1123_label(ns.name)) continue;
    auto ns_dir = dir->sub(ns.name);  // a link here is refused (ELOOP), never followed
    if (!ns_dir) {
      note(ns_dir.error());
      continue;
    }
    for (const auto& claim : PLUMB_TRY(ns_dir->list())) {
      if (!nad::is_dns1123_subdomain(claim.name)) continue;
      auto found = src.ipam_claim(ns.name, claim.name);
      if (!found) {
        note(found.error().within("look up IPAMClaim " + ns.name + "/" + claim.name + " (its addresses are kept)"));
        continue;
      }
      if (*found) continue;  // still there: its addresses stay
      auto claim_dir = ns_dir->sub(claim.name);
      if (!claim_dir) {
        note(claim_dir.error());
        continue;
      }
      if (release_claim(*claim_dir, ns.name, claim.name, cluster, log, note)) (void)ns_dir->remove_dir(claim.name);
    }
    (void)dir->remove_dir(ns.name);  // false (kept) while it holds other claims
  }
  if (first) return std::unexpected(*first);
  return {};
}

}  // namespace plumb::pod::claims
