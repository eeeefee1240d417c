// IPAMClaims: hand a claim to the IPAM (host-local, the cluster IPAM), publish its addresses,
// release them at GC (claims.hpp).
#include "engine/base/file.hpp"
#include "cni-entry/pod/claims.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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
  auto dir = PLUMB_TRY(Dir::open(claims_dir(state_dir), 0700));
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
    auto rec_dir = PLUMB_TRY(PLUMB_TRY(dir.sub(use.namespace_, 0700)).sub(use.name, 0700));
    auto st = rec_dir.write_atomic(network + ".json", json::dump(rec));
    if (!st) return std::unexpected(st.error().within("record the addresses of " + who + " for GC"));
  }
  return std::optional<Use>(std::move(use));
}

Status publish(source::PodSource& src, const Use& use, const cni::CniResult& result) {
  if (use.had_ips || result.ips.empty()) return {};
  std::vector<std::string> ips;
  ips.reserve(result.ips.size());
  for (const auto& ip : result.ips) ips.push_back(ip.address.str());
  auto st = src.write_ipam_claim_ips(use.namespace_, use.name, ips);
  if (!st) return std::unexpected(st.error().within("IPAMClaim " + use.namespace_ + "/" + use.name));
  return {};
}

Status gc(source::PodSource& src, const std::string& state_dir, const ipam::ClusterAccess& cluster, Log& log) {
  const std::string dir = claims_dir(state_dir);
  struct stat sb {};
  if (::stat(dir.c_str(), &sb) != 0) return {};  // no claim was ever used here
  auto lock = PLUMB_TRY(state::lock_file(PLUMB_TRY(Dir::open(dir)), "lock"));
  std::optional<Error> first;
  auto note = [&](const Error& e) {
    log.error("GC: " + e.text());
    if (!first) first = e;
  };
  for (const auto& ns : PLUMB_TRY(list_dir(dir))) {
    if (ns == "lock" || !nad::is_dns1123_label(ns)) continue;
    const std::string ns_dir = dir + "/" + ns;
    for (const auto& name : PLUMB_TRY(list_dir(ns_dir))) {
      if (!nad::is_dns1123_subdomain(name)) continue;
      const std::string claim_dir = ns_dir + "/" + name;
      auto claim = src.ipam_claim(ns, name);
      if (!claim) {
        note(claim.error().within("look up IPAMClaim " + ns + "/" + name + " (its addresses are kept)"));
        continue;
      }
      if (*claim) continue;  // still there: its addresses stay
      auto files = list_dir(claim_dir);
      if (!files) {
        note(files.error());
        continue;
      }
      bool all_released = true;
      for (const auto& f : *files) {
        const std::string path = claim_dir + "/" + f;
        auto text = read_file(path, "IPAMClaim record");
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
          note(st.error().within("release the addresses of deleted IPAMClaim " + ns + "/" + name + " in network " +
                                 *network));
          all_released = false;
          continue;
        }
        if (::unlink(path.c_str()) != 0 && errno != ENOENT) note(Error{cni_code::kIo, errno, "remove " + path, {}});
        log.info("GC: released the addresses of deleted IPAMClaim " + ns + "/" + name + " in network " + *network);
      }
      if (all_released) ::rmdir(claim_dir.c_str());
    }
    ::rmdir(ns_dir.c_str());  // fails (kept) while it holds other claims
  }
  if (first) return std::unexpected(*first);
  return {};
}

}  // namespace plumb::pod::claims
