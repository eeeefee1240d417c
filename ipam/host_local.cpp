// host-local IPAM, on-disk compatible with the reference plugin (containernetworking/plugins
// plugins/ipam/host-local, backend/disk): one file per address under <dataDir>/<network>/ named
// by the address and holding "<containerID>\r\n<ifname>", last_reserved_ip.<range set index>
// holding the last address handed out from that set, and every change made under flock(LOCK_EX)
// on <dataDir>/<network>/lock, the same lock the reference takes, so the two exclude each other.
#include "ipam/host_local.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>

#include "engine/base/file.hpp"
#include "engine/base/recycler.hpp"
#include "engine/base/text.hpp"

namespace plumb::ipam {
namespace {

constexpr std::string_view kLineBreak = "\r\n";
constexpr std::string_view kLastReservedPrefix = "last_reserved_ip.";
/// What of last_reserved_ip.<N> is read: an address and blanks (an IPv6 address is at most 45 bytes).
constexpr size_t kLastReservedMaxBytes = 256;
/// The temporary file reserve() links into place where the filesystem has no unnamed files: one
/// name per network directory (every reservation holds its lock), so a crash leftover is removed
/// by the next reservation that needs it. Files of this prefix found under the lock (the
/// ".plumb-reserve.<pid>" of earlier plumbs) are crash leftovers.
constexpr std::string_view kReserveTmp = ".plumb-reserve";
/// <dataDir>/.plumb-recycled: address files released, renamed into place for the next
/// reservations instead of new inodes (engine/base/recycler.hpp). A CNI network name starts with
/// an alphanumeric character, so no network's directory has this name; the reference reads
/// only its network's directory.
constexpr const char* kRecycled = ".plumb-recycled";

std::unexpected<Error> io_fail(int err, std::string msg) {
  return std::unexpected(Error{cni_code::kIo, err, std::move(msg), {}});
}

struct Ids {
  std::string id;      // trimmed container ID, or the owner override (IPAMClaim)
  std::string exact;   // file content written by current plugins: id \r\n ifname
  bool by_owner = false;  // an owner override: files match on their first line alone
};

/// Ids for addresses held by `owner` (IPAMClaim) on behalf of interface `ifname`.
Result<Ids> owner_ids(const std::string& owner, const std::string& ifname) {
  std::string id(text::trim(owner));
  if (id.empty() || id.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos) {
    return fail(cni_code::kInvalidConfig, "host-local: allocation owner \"" + owner + "\" is empty or contains a line break");
  }
  if (ifname.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos) {
    return fail(cni_code::kInvalidEnv, "host-local: CNI_IFNAME \"" + ifname + "\" contains a line break");
  }
  return Ids{id, id + std::string(kLineBreak) + ifname, true};
}

Result<Ids> check_ids(const Request& req, bool need_ifname) {
  std::string id(text::trim(req.container_id));
  if (id.empty()) return fail(cni_code::kInvalidEnv, "host-local: CNI_CONTAINERID is empty");
  if (id.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos) {
    return fail(cni_code::kInvalidEnv, "host-local: CNI_CONTAINERID \"" + id + "\" contains a line break");
  }
  if (need_ifname && req.ifname.empty()) return fail(cni_code::kInvalidEnv, "host-local: CNI_IFNAME is empty");
  if (req.ifname.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos) {
    return fail(cni_code::kInvalidEnv, "host-local: CNI_IFNAME \"" + req.ifname + "\" contains a line break");
  }
  return Ids{id, id + std::string(kLineBreak) + req.ifname};
}

/// One address file of the store.
struct Entry {
  IpAddr ip;
  std::string name;
  std::string content;  // trimmed
};

enum class Match { None, Exact, Legacy };

Match match(const Entry& e, const Ids& ids) {
  if (ids.by_owner) {
    // A claim's addresses follow the claim whatever interface name the pod gives them.
    std::string_view first(e.content);
    first = first.substr(0, first.find_first_of("\r\n"));
    return text::trim(first) == ids.id ? Match::Exact : Match::None;
  }
  if (e.content == ids.exact) return Match::Exact;
  if (e.content == ids.id) return Match::Legacy;
  return Match::None;
}

/// <dataDir>/<network>, held under the reference's flock for the Store's lifetime. Every file is
/// opened relative to the directory's descriptor, never through a symbolic link (Dir).
class Store {
 public:
  /// Opens and locks the network's directory. With create, makes it (mode 0755, like the
  /// reference's MkdirAll); without, a missing directory yields nullopt (nothing is held).
  ///
  /// The network's directory is opened by its whole path, the data directory never on its own:
  /// the network name is validated (no '/', not "." or ".."), so that path's last component is
  /// the network's, opened without following a link as Dir::sub would. The recycled files'
  /// directory is opened and listed once per invocation, and a daemon worker's once for all
  /// while its path names it (Recycler::shared by path), not once per network.
  static Result<std::optional<Store>> open(const std::string& data_dir, const std::string& network, bool create) {
    const std::optional<mode_t> mode = create ? std::optional<mode_t>(0755) : std::nullopt;  // the reference's 0755
    auto dir = Dir::open(data_dir + "/" + network, mode);
    if (!dir && dir.error().cni_code == cni_code::kNotFound && !create) return std::optional<Store>{};
    if (!dir) return std::unexpected(dir.error().within("host-local"));
    int fd = PLUMB_TRY(dir->open_lock("lock", 0644));
    Store s(std::move(*dir), fd, Recycler::shared(data_dir, kRecycled));
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno != EINTR) return io_fail(errno, "host-local: flock " + s.dir_.path_of("lock"));
    }
    return std::optional<Store>(std::move(s));
  }

  Store(Store&& o) noexcept : dir_(std::move(o.dir_)), fd_(o.fd_), recycled_(o.recycled_), last_(std::move(o.last_)) {
    o.fd_ = -1;
  }
  Store& operator=(Store&&) = delete;
  Store(const Store&) = delete;
  ~Store() {
    if (fd_ >= 0) ::close(fd_);  // closing the only descriptor releases the flock
  }

  [[nodiscard]] const std::string& dir() const { return dir_.path(); }

  /// Every file named by an address, with its trimmed content. Unreadable files are skipped,
  /// as the reference does.
  [[nodiscard]] Result<std::vector<Entry>> entries() const {
    std::vector<Entry> out;
    for (const auto& de : PLUMB_TRY(dir_.list())) {
      const std::string& name = de.name;
      if (de.type != DT_REG) continue;
      if (name.starts_with(kReserveTmp) ||
          (name.starts_with(kLastReservedPrefix) && name.find(".tmp.") != std::string::npos)) {
        (void)dir_.remove(name);  // a reserve() killed before its link(2) or rename: we hold the lock
        continue;
      }
      auto ip = IpAddr::parse(name);
      if (!ip) continue;
      std::string content;
      if (!read_small(name, content)) continue;
      if (text::trim(content).empty()) {
        // Written by a plugin killed between creating and filling the file (the reference
        // plugin creates then writes): nobody can own it, and we hold the lock.
        (void)dir_.remove(name);
        continue;
      }
      out.push_back(Entry{*ip, name, std::string(text::trim(content))});
    }
    return out;
  }

  /// Creates the file for `ip` (O_EXCL) holding the owner; false if it already exists. Records
  /// `ip` as last_reserved_ip.<rangeset>.
  ///
  /// The file appears with its content in one step (a recycled file written, then renamed in
  /// place with RENAME_NOREPLACE; else Dir::create_whole: EEXIST when taken), never as an empty
  /// address file that no DEL could attribute. Where the filesystem has no unnamed files, a plumb
  /// killed half-way leaves at most the temporary file ".plumb-reserve" (removed by the next
  /// reservation that needs it, and by any look at every file: entries()).
  ///
  /// An empty file found at the address is an allocator's crash leftover (one killed between
  /// creating and writing it: the reference plugin creates, then writes; every allocator writes
  /// under the lock we hold): nobody owns it, so it is removed and the address taken. It is
  /// reclaimed where an allocation meets it, not looked for on every DEL (a stat of every file
  /// of the network: a DEL then cost more with every pod on the node).
  [[nodiscard]] Result<bool> reserve(const Ids& ids, const IpAddr& ip, size_t rangeset) const {
    const std::string name = ip.str();
    bool linked = PLUMB_TRY(create_owned(name, ids));
    if (!linked && reclaim_empty(name)) linked = PLUMB_TRY(create_owned(name, ids));
    if (!linked) return false;
    auto st = write_last_reserved(ip, rangeset);
    if (!st) {
      (void)remove(name);
      return std::unexpected(st.error());
    }
    return true;
  }

  /// Creates the address file `name` holding the owner, whole or not at all (a recycled file
  /// written, then renamed in place; else Dir::create_whole): false when `name` exists.
  [[nodiscard]] Result<bool> create_owned(const std::string& name, const Ids& ids) const {
    auto placed = recycled_->place(dir_, name, ids.exact, 0644);
    if (!placed) return std::unexpected(placed.error().within("host-local"));
    if (*placed) return **placed;
    auto created = dir_.create_whole(name, ids.exact, {.mode = 0644}, kReserveTmp);
    if (!created) return std::unexpected(created.error().within("host-local"));
    return *created;
  }

  /// Removes `name` when it is an empty regular file (under the lock: a crash leftover, see
  /// reserve()); true when it did.
  [[nodiscard]] bool reclaim_empty(const std::string& name) const {
    auto st = dir_.stat(name);
    if (!st || !*st || !S_ISREG((*st)->st_mode) || (*st)->st_size != 0) return false;
    return dir_.remove(name).has_value();
  }

  /// "container <id> interface <ifname>" holding address `ip` (the file's content), for errors.
  [[nodiscard]] std::string holder(const IpAddr& ip) const {
    auto content = owner_of(ip);
    if (!content) return "another owner";
    auto lines = text::split(*content, '\n');
    std::string id(text::trim(lines.empty() ? std::string_view() : lines[0]));
    std::string ifname(text::trim(lines.size() > 1 ? lines[1] : std::string_view()));
    return "container " + id + (ifname.empty() ? std::string() : " interface " + ifname);
  }

  /// Writes `ip` to last_reserved_ip.<rangeset> in place (not O_TRUNC, which made ext4 flush and
  /// discard on every ADD): through the descriptor last_reserved() left open for this range set,
  /// else by name (Dir::write_in_place). Both allocators write it under the lock; a writer killed
  /// in between leaves at worst another address there, which only moves where the next search
  /// starts.
  [[nodiscard]] Status write_last_reserved(const IpAddr& ip, size_t rangeset) const {
    const std::string name = std::string(kLastReservedPrefix) + std::to_string(rangeset);
    const std::string text = ip.str();
    if (last_.fd.get() >= 0 && last_.rangeset == rangeset) {
      UniqueFd fd = std::move(last_.fd);
      const auto len = static_cast<off_t>(text.size());
      if (::pwrite(fd.get(), text.data(), text.size(), 0) == static_cast<ssize_t>(text.size()) &&
          (last_.size <= len || ::ftruncate(fd.get(), len) == 0) && ::close(fd.release()) == 0) {
        return {};
      }
      // Whatever failed, the write by name below says why (or succeeds).
    }
    auto st = dir_.write_in_place(name, text, 0644);
    if (!st) return std::unexpected(st.error().within("host-local"));
    return {};
  }

  /// Content of last_reserved_ip.<rangeset>, if present and an address. The file (a regular one
  /// of the reference's mode 0644) stays open for write_last_reserved: one open per allocation.
  [[nodiscard]] std::optional<IpAddr> last_reserved(size_t rangeset) const {
    const std::string name = std::string(kLastReservedPrefix) + std::to_string(rangeset);
    UniqueFd fd(::openat(dir_.fd(), name.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    struct stat st {};
    std::string content;
    if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      // Missing, or not writable here (a read-only mount): read by name as the reference does.
      if (fd.get() >= 0 || errno == ENOENT || !read_small(name, content)) return {};
    } else if (st.st_size > static_cast<off_t>(kLastReservedMaxBytes)) {
      if (!read_small(name, content)) return {};  // an address and many blanks: read whole
    } else {
      char buf[kLastReservedMaxBytes];
      const ssize_t n = ::pread(fd.get(), buf, sizeof buf, 0);
      if (n > 0) content.assign(buf, static_cast<size_t>(n));
      if ((st.st_mode & 07777) == 0644) last_ = LastReserved{std::move(fd), st.st_size, rangeset};
    }
    auto ip = IpAddr::parse(text::trim(content));
    if (!ip) return {};
    return *ip;
  }

  /// The trimmed content of the file of `ip` (its owner), nullopt when there is none.
  [[nodiscard]] std::optional<std::string> owner_of(const IpAddr& ip) const {
    std::string content;
    if (!read_small(ip.str(), content)) return {};
    return std::string(text::trim(content));
  }

  /// Removes the file `name` (into the recycled files); a missing file is not an error.
  [[nodiscard]] Status remove(const std::string& name) const {
    auto st = recycled_->recycle(dir_, name);
    if (!st) return std::unexpected(st.error().within("host-local"));
    return {};
  }

 private:
  Store(Dir dir, int fd, Recycler& recycled) : dir_(std::move(dir)), fd_(fd), recycled_(&recycled) {}

  /// A small regular file of the directory (never through a link, never blocking on a FIFO).
  bool read_small(const std::string& name, std::string& out) const {
    auto text = dir_.read(name, "host-local", size_t{64} * 1024);
    if (!text) return false;
    out = std::move(*text);
    return true;
  }

  Dir dir_;
  int fd_ = -1;
  Recycler* recycled_;  // shared by the stores of its dataDir (Recycler::shared)
  /// last_reserved_ip.<rangeset> as last_reserved() opened it, for write_last_reserved().
  struct LastReserved {
    UniqueFd fd;
    off_t size = 0;
    size_t rangeset = 0;
  };
  mutable LastReserved last_;
};

/// Requested addresses in the reference's order: CNI_ARGS IP= (comma separated), args.cni.ips,
/// runtimeConfig.ips. Each may be bare or CIDR (the address is taken). Duplicates dropped.
Result<std::vector<IpAddr>> requested_ips(const Request& req) {
  const auto texts = PLUMB_TRY(detail::requested_ip_texts(req));
  std::vector<IpAddr> out;
  for (auto& [src, text] : texts) {
    auto p = IpPrefix::parse(text, true);
    if (!p) return std::unexpected(p.error().within("host-local: requested IP in " + src));
    bool dup = false;
    for (auto& a : out) dup = dup || a == p->addr;
    if (!dup) out.push_back(p->addr);
  }
  return out;
}

class HostLocal final : public Ipam {
 public:
  explicit HostLocal(HostLocalConfig cfg) : cfg_(std::move(cfg)) {}

  Result<cni::CniResult> add(const Request& req) override {
    PLUMB_TRY(detail::validate_network_name(req.network_name));
    const std::string& owner = req.owner;
    Ids ids = owner.empty() ? PLUMB_TRY(check_ids(req, true)) : PLUMB_TRY(owner_ids(owner, req.ifname));
    const std::string net = "network \"" + req.network_name + "\"";
    std::vector<RangeSet> sets = PLUMB_TRY(range_sets(req));
    std::vector<std::optional<IpAddr>> want = PLUMB_TRY(requested_per_set(req, sets, net));

    cni::CniResult result;
    if (!cfg_.resolv_conf.empty()) result.dns = PLUMB_TRY(parse_resolv_conf(cfg_.resolv_conf));
    result.routes = cfg_.routes;

    auto store_opt = PLUMB_TRY(Store::open(cfg_.data_dir, req.network_name, true));
    const Store& store = *store_opt;
    std::vector<Entry> entries = PLUMB_TRY(entries_for_add(store, req));
    std::vector<std::string> created;  // files this ADD made: removed again if a later set fails
    for (size_t i = 0; i < sets.size(); ++i) {
      auto got = take_one(store, entries, ids, req.ifname, sets[i], i, want[i], net, created);
      if (!got) {
        for (auto& name : created) (void)store.remove(name);
        return std::unexpected(got.error());
      }
      const Range& r = sets[i][*range_for(sets[i], *got)];
      result.ips.push_back(cni::IpConfig{IpPrefix{*got, r.subnet.len}, r.gateway, std::nullopt});
    }
    return result;
  }

  bool supports_owner() const override { return true; }

  Status del(const Request& req) override {
    PLUMB_TRY(detail::validate_network_name(req.network_name));
    // Only an explicit owner releases claim-held addresses (GC of a deleted claim); a pod's DEL
    // releases by container ID: nothing of the claim.
    Ids ids = req.owner.empty() ? PLUMB_TRY(check_ids(req, false)) : PLUMB_TRY(owner_ids(req.owner, req.ifname));
    auto store = PLUMB_TRY(Store::open(cfg_.data_dir, req.network_name, false));
    if (!store) return {};
    // The released files alone: nothing else of the network is looked at (crash leftovers are
    // reclaimed where an ADD meets them, Store::reserve).
    if (req.owner.empty() && PLUMB_TRY(release_held(*store, ids, req.held))) return {};
    std::vector<Entry> entries = PLUMB_TRY(store->entries());
    // Files of the current format first; only if there are none, ones holding just the ID
    // (written by plugins older than ifname tracking), as the reference's ReleaseByID.
    for (Match want : {Match::Exact, Match::Legacy}) {
      bool found = false;
      Status first_err;
      for (const Entry& e : entries) {
        if (match(e, ids) != want) continue;
        found = true;
        Status st = store->remove(e.name);
        if (!st && first_err) first_err = st;
      }
      if (!first_err) return first_err;
      if (found) break;
    }
    return {};
  }

  Status check(const Request& req, const cni::CniResult& prev) override {
    PLUMB_TRY(detail::validate_network_name(req.network_name));
    const std::string& owner = req.owner;
    Ids ids = owner.empty() ? PLUMB_TRY(check_ids(req, false)) : PLUMB_TRY(owner_ids(owner, req.ifname));
    auto store = PLUMB_TRY(Store::open(cfg_.data_dir, req.network_name, false));
    const std::string who = "container " + ids.id + " interface " + req.ifname;
    if (!store) {
      return fail(cni_code::kNotFound, "host-local: " + who + " holds no address in network \"" +
                                           req.network_name + "\" (no directory under " + cfg_.data_dir + ")");
    }
    std::vector<Entry> entries = PLUMB_TRY(store->entries());
    auto holds = [&](const IpAddr& ip) {
      for (const Entry& e : entries) {
        if (e.ip == ip && match(e, ids) != Match::None) return true;
      }
      return false;
    };
    if (prev.ips.empty()) {
      for (const Entry& e : entries) {
        if (match(e, ids) != Match::None) return {};
      }
      return fail(cni_code::kNotFound, "host-local: " + who + " holds no address in " + store->dir());
    }
    for (const cni::IpConfig& ip : prev.ips) {
      if (!holds(ip.address.addr)) {
        return fail(cni_code::kNotFound,
                    "host-local: " + ip.address.addr.str() + " is not held by " + who + " in " + store->dir());
      }
    }
    return {};
  }

 private:
  /// The allocation files ADD must look at: none when the caller vouches that this container and
  /// interface hold nothing yet (Request::first_allocation; not for an IPAMClaim owner, whose
  /// addresses outlive pods), else every one (the reference's GetByID). The allocation itself
  /// needs no list: it starts after last_reserved_ip and lets O_EXCL/link(2) find a free file.
  static Result<std::vector<Entry>> entries_for_add(const Store& store, const Request& req) {
    if (req.first_allocation && req.owner.empty()) return std::vector<Entry>{};
    return store.entries();
  }

  /// DEL's fast path: removes the files of `held` that name this container and interface.
  /// Returns true when that released everything: every configured range set had one of them
  /// (host-local gives one address per set). False: the caller looks at every file.
  Result<bool> release_held(const Store& store, const Ids& ids, const std::vector<IpAddr>& held) const {
    if (held.empty()) return false;
    std::vector<bool> released(cfg_.ranges.size(), false);
    for (const IpAddr& ip : held) {
      auto owner = store.owner_of(ip);
      if (!owner || *owner != ids.exact) continue;
      PLUMB_TRY(store.remove(ip.str()));
      for (size_t i = 0; i < cfg_.ranges.size(); ++i) {
        if (range_for(cfg_.ranges[i], ip)) released[i] = true;
      }
    }
    return std::all_of(released.begin(), released.end(), [](bool b) { return b; });
  }

  /// runtimeConfig.ipRanges (the capability) prepended to the configured range sets. Errors:
  /// kInvalidConfig naming the range; overlapping sets.
  Result<std::vector<RangeSet>> range_sets(const Request& req) const {
    std::vector<RangeSet> sets;
    if (req.runtime_config != nullptr) {
      const json::Value* rr = PLUMB_TRY(json::get_array(*req.runtime_config, "ipRanges", "runtimeConfig", true));
      if (rr != nullptr) {
        for (rapidjson::SizeType i = 0; i < rr->Size(); ++i) {
          sets.push_back(PLUMB_TRY(parse_range_set((*rr)[i], "runtimeConfig.ipRanges[" + std::to_string(i) + "]")));
        }
      }
    }
    if (sets.empty()) return cfg_.ranges;
    sets.insert(sets.end(), cfg_.ranges.begin(), cfg_.ranges.end());
    PLUMB_TRY(check_range_sets_disjoint(sets, "runtimeConfig.ipRanges + ipam.ranges"));
    return sets;
  }

  /// The requested address of each range set (one per set, each inside a range). Errors:
  /// kIpamExhausted naming the address and the ranges.
  static Result<std::vector<std::optional<IpAddr>>> requested_per_set(const Request& req, const std::vector<RangeSet>& sets,
                                                                      const std::string& net) {
    std::vector<IpAddr> requested = PLUMB_TRY(requested_ips(req));
    std::vector<std::optional<IpAddr>> want(sets.size());
    for (const IpAddr& ip : requested) {
      std::optional<size_t> set;
      for (size_t i = 0; i < sets.size() && !set; ++i) {
        if (range_for(sets[i], ip)) set = i;
      }
      if (!set) {
        std::string all;
        for (auto& s : sets) all += (all.empty() ? "" : "; ") + range_set_str(s);
        return fail(cni_code::kIpamExhausted,
                    "requested IP " + ip.str() + " is not inside any range of " + net + " (" + all + ")");
      }
      if (want[*set]) {
        return fail(cni_code::kIpamExhausted, "requested IPs " + want[*set]->str() + " and " + ip.str() +
                                                  " are both in range set " + std::to_string(*set) + " (" +
                                                  range_set_str(sets[*set]) + "); host-local gives one address per range set");
      }
      want[*set] = ip;
    }
    return want;
  }

  /// The address of range set `i` for this container: the one it already holds (a repeated ADD,
  /// the reference's GetByID), the requested one, or the next free one in the reference's
  /// round-robin order. Files it creates are appended to `created`. Errors: kConflict (holds
  /// another than requested), kIpamExhausted (taken, gateway/network/broadcast, none free), I/O.
  static Result<IpAddr> take_one(const Store& store, const std::vector<Entry>& entries, const Ids& ids,
                                 const std::string& ifname, const RangeSet& set, size_t i,
                                 const std::optional<IpAddr>& want, const std::string& net,
                                 std::vector<std::string>& created) {
    for (const Entry& e : entries) {
      if (match(e, ids) == Match::None || !range_for(set, e.ip)) continue;
      if (want && *want != e.ip) {
        return fail(cni_code::kConflict, "container " + ids.id + " interface " + ifname + " already holds " +
                                             e.ip.str() + " in " + net + "; requested IP " + want->str() + " not given");
      }
      return e.ip;
    }
    if (want) {
      const Range& r = set[*range_for(set, *want)];
      if (!r.allocatable(*want)) {
        const char* what = *want == r.gateway ? "the gateway" : "the network or broadcast address";
        return fail(cni_code::kIpamExhausted, "requested IP " + want->str() + " is " + what + " of " + r.str() + " in " + net);
      }
      if (!PLUMB_TRY(store.reserve(ids, *want, i))) {
        return fail(cni_code::kIpamExhausted,
                    "requested IP " + want->str() + " is already allocated in " + net + " to " + store.holder(*want));
      }
      created.push_back(want->str());
      return *want;
    }
    RangeIter it(set, store.last_reserved(i));
    while (auto cand = it.next()) {
      if (PLUMB_TRY(store.reserve(ids, cand->first, i))) {
        created.push_back(cand->first.str());
        return cand->first;
      }
    }
    return fail(cni_code::kIpamExhausted, "no free address in " + range_set_str(set) + " for " + net);
  }

  HostLocalConfig cfg_;
};

}  // namespace

namespace detail {

Result<std::unique_ptr<Ipam>> make_host_local(const json::Value& ipam) {
  HostLocalConfig cfg = PLUMB_TRY(parse_host_local_config(ipam));
  return std::unique_ptr<Ipam>(std::make_unique<HostLocal>(std::move(cfg)));
}

}  // namespace detail
}  // namespace plumb::ipam
