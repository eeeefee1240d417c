// The embedded PodSource: NADs and Pod manifests in a directory, network-status written back as
// files (see source.hpp for the layout). Every namespace/name is validated before it becomes part
// of a path.
#include "engine/base/file.hpp"
#include "engine/base/file_memo.hpp"
#include "engine/base/recycler.hpp"
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "engine/base/text.hpp"
#include "engine/base/yaml.hpp"
#include "cni-entry/source/source.hpp"

namespace plumb::source {
namespace {

namespace fs = std::filesystem;

Status check_namespace(const std::string& what, const std::string& ns) {
  if (!nad::is_dns1123_label(ns)) {
    return fail(cni_code::kInvalidConfig, what + " namespace \"" + ns + "\" is not a valid DNS-1123 label");
  }
  return {};
}

Status check_pod(const PodRef& pod) {
  PLUMB_TRY(check_namespace("pod", pod.namespace_));
  if (!nad::is_dns1123_subdomain(pod.name)) {
    return fail(cni_code::kInvalidConfig, "pod name \"" + pod.name + "\" is not a valid DNS-1123 subdomain");
  }
  return {};
}

/// Reads a whole file. nullopt when it does not exist; errors: kIo naming the path.
Result<std::optional<std::string>> read_optional(const std::string& path) {
  auto text = plumb::read_file(path);
  if (!text) {
    if (text.error().sys_errno == ENOENT) return std::optional<std::string>{};
    return std::unexpected(text.error());
  }
  return std::optional<std::string>(std::move(*text));
}

/// The NAD files parsed, by path: kept across the invocations a daemon worker serves, re-read
/// when a file changes (file_memo.hpp).
FileMemo<std::vector<nad::NetworkAttachmentDefinition>>& nad_memo() {
  static FileMemo<std::vector<nad::NetworkAttachmentDefinition>> memo;
  return memo;
}

/// Takes an exclusive flock on a status directory through its own descriptor: one namespace's
/// status files change under it, so a DEL's owner check and removal never interleave with another
/// sandbox's write. Held until `dir` is closed (no other descriptor is opened for it).
Status lock_dir(const Dir& dir) {
  while (::flock(dir.fd(), LOCK_EX) != 0) {
    if (errno != EINTR) return std::unexpected(Error{cni_code::kIo, errno, "lock " + dir.path(), {}});
  }
  return {};
}

/// True when a status file's recorded owner is `owner` ("<containerID>:<ifname>"); an owner
/// written by an older plumb is a bare container ID and matches that container.
bool same_owner(std::string_view written, std::string_view owner) {
  written = text::trim(written);
  if (written == owner) return true;
  return written.find(':') == std::string_view::npos && written == owner.substr(0, owner.find(':'));
}

class LocalStore final : public PodSource {
 public:
  explicit LocalStore(std::string root) : root_(std::move(root)) {}

  Result<std::optional<std::map<std::string, std::string>>> pod_annotations(const PodRef& pod) override {
    using Annotations = std::map<std::string, std::string>;
    PLUMB_TRY(check_pod(pod));
    const std::string path = root_ + "/pods/" + pod.namespace_ + "/" + pod.name + ".yaml";
    auto text = PLUMB_TRY(read_optional(path));
    if (!text) return std::optional<Annotations>{};
    Annotations out;
    const json::Document doc = PLUMB_TRY(yaml::load(*text, "pod manifest " + path));
    if (doc.IsNull()) return std::optional<Annotations>(std::move(out));
    if (!doc.IsObject()) return fail(cni_code::kDecode, "pod manifest " + path + " is not a YAML map");
    const json::Value* meta = json::find(doc, "metadata");
    if (meta == nullptr) return std::optional<Annotations>(std::move(out));
    if (!meta->IsObject()) return fail(cni_code::kDecode, "pod manifest " + path + ": metadata is not a map");
    const json::Value* ann = json::find(*meta, "annotations");
    if (ann == nullptr) return std::optional<Annotations>(std::move(out));
    if (!ann->IsObject()) return fail(cni_code::kDecode, "pod manifest " + path + ": metadata.annotations is not a map");
    for (const auto& kv : ann->GetObject()) {
      const std::string key(kv.name.GetString(), kv.name.GetStringLength());
      if (!kv.value.IsString() && !kv.value.IsNull()) {
        return fail(cni_code::kDecode, "pod manifest " + path + ": annotation \"" + key + "\" is not a string: " + json::quote(kv.value));
      }
      out[key] = kv.value.IsNull() ? std::string{} : std::string(kv.value.GetString(), kv.value.GetStringLength());
    }
    return std::optional<Annotations>(std::move(out));
  }

  Result<nad::NetworkAttachmentDefinition> network_attachment(const std::string& namespace_, const std::string& name) override {
    PLUMB_TRY(check_namespace("NetworkAttachmentDefinition", namespace_));
    if (!nad::is_dns1123_label(name)) {
      return fail(cni_code::kInvalidConfig, "NetworkAttachmentDefinition name \"" + name + "\" is not a valid DNS-1123 label");
    }
    const std::string dir = root_ + "/nads";
    const std::string who = namespace_ + "/" + name;
    auto listed = nad_files(dir);
    if (!listed && listed.error().sys_errno == ENOENT) {
      return fail(cni_code::kNotFound, "NetworkAttachmentDefinition " + who + " not found in " + dir);
    }
    const std::vector<fs::path>& files = *PLUMB_TRY(listed);
    // A malformed file fails only the pods whose NAD cannot be found elsewhere: it is skipped
    // with a warning (kubectl would have refused it; one bad file must not stop every pod).
    std::string skipped;
    for (const auto& f : files) {
      // Each file is parsed once per invocation (and by a daemon worker once while it does not
      // change): a pod's networks are looked up one by one, and several NADs often share a file
      // (YAML parsing was a third of an ADD's instructions). A malformed one is remembered for
      // the invocation too: parsed and warned about once.
      auto cached = parsed_.find(f.string());
      if (cached == parsed_.end() && !malformed_.contains(f.string())) {
        auto nads = nad_memo().get(f.string(), {}, nad::parse_nad_yaml);
        if (!nads && nads.error().sys_errno == ENOENT) continue;  // removed while we scanned
        if (!nads) {
          warnings_.push_back("local store: skipped " + f.string() + ": " + nads.error().text());
          malformed_.insert(f.string());
        } else {
          cached = parsed_.emplace(f.string(), std::move(*nads)).first;
        }
      }
      if (cached == parsed_.end()) {
        skipped += (skipped.empty() ? " (skipped as malformed: " : ", ") + f.filename().string();
        continue;
      }
      for (const auto& n : *cached->second) {
        if (n.namespace_ == namespace_ && n.name == name) return n;
      }
    }
    if (!skipped.empty()) skipped += ")";
    return fail(cni_code::kNotFound, "NetworkAttachmentDefinition " + who + " not found in " + dir + skipped);
  }

  std::vector<std::string> take_warnings() override { return std::exchange(warnings_, {}); }

  Status write_network_status(const PodRef& pod, const std::string& status_json, const std::string& owner) override {
    PLUMB_TRY(check_pod(pod));
    // One open of the namespace's directory by its path (the namespace is a DNS-1123 label: one
    // component, not followed if a link), as remove_network_status opens it; made when missing.
    auto dir = PLUMB_TRY(Dir::open(root_ + "/status/" + pod.namespace_, 0755));
    PLUMB_TRY(lock_dir(dir));
    // No fsync (two disk flushes per ADD): network-status describes a pod's networks, which do not
    // outlive a power loss either; the rename still gives readers the old or the new file. A
    // pod's first status takes recycled files, written before they are named.
    Recycler& pool = recycled();
    for (const auto& [name, text] : {std::pair{pod.name + ".owner", std::string_view(owner)}, std::pair{pod.name + ".json", std::string_view(status_json)}}) {
      auto placed = PLUMB_TRY(pool.place(dir, name, text, 0644));
      // Replaced through "<name>.tmp" (we hold the directory's lock): remove_network_status
      // finds a killed writer's by name.
      const std::string tmp = name + ".tmp";
      if (!placed || !*placed) PLUMB_TRY(dir.write_atomic(name, text, {.mode = 0644, .locked_tmp = tmp}));
    }
    return {};
  }

  std::string describe() const override { return "local store " + root_; }

  Status ready() override {
    if (::access(root_.c_str(), R_OK | X_OK) != 0) {
      return fail(cni_code::kPluginNotAvailable, "store directory " + root_ + " is not readable");
    }
    return {};
  }

  Result<std::optional<IpamClaim>> ipam_claim(const std::string& namespace_, const std::string& name) override {
    const std::string base = PLUMB_TRY(claim_base(namespace_, name));
    const std::string path = base + ".yaml";
    auto text = PLUMB_TRY(read_optional(path));
    if (!text) {
      // The claim is gone: the status plumb wrote for it goes too, so a new claim of the same
      // name starts without addresses, as a re-created API object does.
      // Relative to the namespace's directory, opened without following a link (as
      // write_ipam_claim_status writes it): a planted link is refused, naming its path.
      auto dir = Dir::open(root_ + "/ipamclaims/" + namespace_);
      if (!dir && dir.error().cni_code != cni_code::kNotFound && dir.error().sys_errno != ENOTDIR) {
        return std::unexpected(dir.error().within("remove " + base + ".status.json"));
      }
      if (dir) PLUMB_TRY(dir->remove(name + ".status.json"));
      return std::optional<IpamClaim>{};
    }
    IpamClaim c;
    c.namespace_ = namespace_;
    c.name = name;
    const json::Document doc = PLUMB_TRY(yaml::load(*text, "IPAMClaim manifest " + path));
    if (!doc.IsObject() && !doc.IsNull()) return fail(cni_code::kDecode, "IPAMClaim manifest " + path + " is not a YAML map");
    if (const json::Value* spec = doc.IsObject() ? json::find(doc, "spec") : nullptr; spec != nullptr && spec->IsObject()) {
      if (const json::Value* v = json::find(*spec, "network"); v != nullptr && v->IsString()) c.network = v->GetString();
      if (const json::Value* v = json::find(*spec, "interface"); v != nullptr && v->IsString()) c.interface = v->GetString();
    }
    const json::Value* status = doc.IsObject() ? json::find(doc, "status") : nullptr;
    if (status != nullptr && status->IsObject()) c.ips = PLUMB_TRY(ip_list(*status, "IPAMClaim manifest " + path + ": status.ips"));
    // What plumb wrote wins over the manifest's own status.
    auto written = PLUMB_TRY(read_optional(base + ".status.json"));
    if (written) {
      auto ips = PLUMB_TRY(written_ips(*written, base + ".status.json"));
      if (!ips.empty()) c.ips = std::move(ips);
    }
    return std::optional<IpamClaim>(std::move(c));
  }

  Status write_ipam_claim_status(const std::string& namespace_, const std::string& name, const IpamClaimStatus& status) override {
    const std::string base = PLUMB_TRY(claim_base(namespace_, name));
    auto dir = Dir::open(root_ + "/ipamclaims/" + namespace_);
    auto manifest = dir ? dir->stat(name + ".yaml") : Result<std::optional<struct stat>>(std::unexpected(dir.error()));
    if (!manifest || !*manifest) {
      if (!manifest && manifest.error().cni_code != cni_code::kNotFound) return std::unexpected(manifest.error());
      return fail(cni_code::kNotFound, "IPAMClaim " + namespace_ + "/" + name + " not found (" + base + ".yaml)");
    }
    return dir->write_atomic(name + ".status.json", json::dump(ipam_claim_status_json(status)), {.mode = 0644, .fsync = true});
  }

  Status remove_network_status(const PodRef& pod, const std::string& owner) override {
    PLUMB_TRY(check_pod(pod));
    auto opened = Dir::open(root_ + "/status/" + pod.namespace_);
    if (!opened) return opened.error().cni_code == cni_code::kNotFound ? Status{} : Status(std::unexpected(opened.error()));
    const Dir& dir = *opened;
    PLUMB_TRY(lock_dir(dir));
    // Only the attachments that wrote the status remove it (a file without an owner was written
    // by a plumb before owners were recorded: removed as then).
    auto written_by = dir.read(pod.name + ".owner", "network-status owner", 4096);
    if (!written_by && written_by.error().cni_code != cni_code::kNotFound) return std::unexpected(written_by.error());
    if (written_by && !same_owner(*written_by, owner)) return {};
    return remove_status_files(dir, pod.name);
  }

  Result<std::vector<std::string>> remove_unvouched_status(const std::function<bool(std::string_view)>& vouched) override {
    std::vector<std::string> removed;
    auto opened = Dir::open(root_ + "/status");
    if (!opened && opened.error().cni_code == cni_code::kNotFound) return removed;
    if (!opened) return std::unexpected(opened.error());
    Status first;
    for (const auto& ns : PLUMB_TRY(opened->list())) {
      if (ns.type != DT_DIR || !nad::is_dns1123_label(ns.name)) continue;
      auto st = remove_unvouched_in(*opened, ns.name, vouched, removed);
      if (!st && first) first = st;
    }
    if (!first) return std::unexpected(first.error());
    return removed;
  }

 private:
  /// Removes the network-status of pod `name` in `dir` (the namespace's, locked): its files go to
  /// the recycled ones. A writer killed between creating its temporary file and the rename
  /// leaves "<name>.json.tmp" or "<name>.owner.tmp" (write_network_status): removed by name,
  /// without listing the namespace's directory (a file per pod: a DEL would cost more with every
  /// pod). The status goes before its owner: a removal killed half-way leaves at most the owner.
  Status remove_status_files(const Dir& dir, const std::string& name) const {
    Recycler& pool = recycled();
    PLUMB_TRY(pool.recycle(dir, name + ".json"));
    (void)pool.recycle(dir, name + ".owner");
    (void)dir.remove(name + ".json.tmp");
    (void)dir.remove(name + ".owner.tmp");
    return {};
  }

  /// remove_unvouched_status() in namespace `ns` of `status`: every "<pod>.owner" read under
  /// the namespace's lock; "namespace/pod" of each status removed appended to `removed`.
  Status remove_unvouched_in(const Dir& status, const std::string& ns, const std::function<bool(std::string_view)>& vouched,
                             std::vector<std::string>& removed) const {
    const Dir dir = PLUMB_TRY(status.sub(ns));
    PLUMB_TRY(lock_dir(dir));
    Status first;
    for (const auto& e : PLUMB_TRY(dir.list())) {
      constexpr std::string_view kOwner = ".owner";
      if (e.type != DT_REG || !e.name.ends_with(kOwner)) continue;
      const std::string pod = e.name.substr(0, e.name.size() - kOwner.size());
      if (!nad::is_dns1123_subdomain(pod)) continue;
      auto owner = dir.read(e.name, "network-status owner", 4096);
      if (!owner && owner.error().cni_code == cni_code::kNotFound) continue;
      Status st = owner ? Status{} : Status(std::unexpected(owner.error()));
      if (owner && !vouched(text::trim(*owner))) {
        st = remove_status_files(dir, pod);
        if (st) removed.push_back(ns + "/" + pod);
      }
      if (!st && first) first = st;
    }
    return first;
  }

  /// <root>/.plumb-recycled: network-status files removed, renamed into place for the next pods'
  /// instead of new inodes (engine/base/recycler.hpp); without it, files are created and unlinked.
  [[nodiscard]] Recycler& recycled() const { return Recycler::shared(root_, ".plumb-recycled"); }

  /// <root>/ipamclaims/<namespace>/<name> after validating both.
  Result<std::string> claim_base(const std::string& namespace_, const std::string& name) const {
    PLUMB_TRY(check_namespace("IPAMClaim", namespace_));
    if (!nad::is_dns1123_subdomain(name)) {
      return fail(cni_code::kInvalidConfig, "IPAMClaim name \"" + name + "\" is not a valid DNS-1123 subdomain");
    }
    return root_ + "/ipamclaims/" + namespace_ + "/" + name;
  }

  /// The "ips" list of a status file plumb wrote (JSON, read as YAML: JSON is YAML).
  static Result<std::vector<std::string>> written_ips(const std::string& text, const std::string& path) {
    const json::Document doc = PLUMB_TRY(yaml::load(text, path));
    if (!doc.IsObject() || json::find(doc, "ips") == nullptr) return fail(cni_code::kDecode, path + " has no \"ips\" list");
    return ip_list(doc, path + ": \"ips\"");
  }

  /// The member "ips" of `obj`: a list of strings (none when absent). Errors: kDecode naming `what`.
  static Result<std::vector<std::string>> ip_list(const json::Value& obj, const std::string& what) {
    std::vector<std::string> out;
    const json::Value* ips = json::find(obj, "ips");
    if (ips == nullptr) return out;
    if (!ips->IsArray()) return fail(cni_code::kDecode, what + " is not a list");
    for (const auto& ip : ips->GetArray()) {
      if (!ip.IsString()) return fail(cni_code::kDecode, what + " holds a non-string: " + json::quote(ip));
      out.emplace_back(ip.GetString(), ip.GetStringLength());
    }
    return out;
  }

  /// The NAD files of `dir` (*.yaml, *.yml, *.json, regular), sorted; listed once per process
  /// (a pod's networks are looked up one by one). Errors: kIo with the errno (ENOENT: no
  /// directory) naming it.
  Result<const std::vector<fs::path>*> nad_files(const std::string& dir) {
    if (nad_files_) return &*nad_files_;
    std::error_code ec;
    std::vector<fs::path> files;
    fs::directory_iterator it(dir, ec);
    for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
      std::error_code sec;
      if (!fs::is_regular_file(it->path(), sec)) continue;
      const std::string ext = it->path().extension().string();
      if (ext == ".yaml" || ext == ".yml" || ext == ".json") files.push_back(it->path());
    }
    if (ec) return std::unexpected(Error{cni_code::kIo, ec.value(), "list " + dir, {}});
    std::sort(files.begin(), files.end());
    nad_files_ = std::move(files);
    return &*nad_files_;
  }

  std::string root_;
  std::vector<std::string> warnings_;
  std::optional<std::vector<fs::path>> nad_files_;  ///< nad_files(), once listed
  std::map<std::string, std::shared_ptr<const std::vector<nad::NetworkAttachmentDefinition>>> parsed_;  ///< NAD file -> its NADs
  std::set<std::string> malformed_;  ///< NAD files that did not parse (skipped)
};

}  // namespace

std::unique_ptr<PodSource> make_local_store(const std::string& root) { return std::make_unique<LocalStore>(root); }

}  // namespace plumb::source
