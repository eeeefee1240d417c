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

#include <cerrno>
#include <fstream>
#include <sstream>

#include "engine/base/text.hpp"
#include "engine/base/file.hpp"

namespace plumb::ipam {
namespace {

constexpr std::string_view kLineBreak = "\r\n";
constexpr std::string_view kLastReservedPrefix = "last_reserved_ip.";
/// Temporary files reserve() links into place; any found under the lock are crash leftovers.
constexpr std::string_view kReserveTmpPrefix = ".plumb-reserve.";

std::unexpected<Error> io_fail(int err, std::string msg) {
  return std::unexpected(Error{cni_code::kIo, err, std::move(msg), {}});
}



IpAddr first_host(const IpPrefix& subnet) { return subnet.network().addr.plus(1); }

/// Last address the reference allocates by default: the subnet's last, minus one for IPv4
/// (the broadcast address). Subnets are at most /30 here, so the last byte never borrows.
IpAddr default_end(const IpPrefix& subnet) {
  IpAddr a = subnet.last();
  if (a.is_v4()) a.bytes[3] = static_cast<uint8_t>(a.bytes[3] - 1);
  return a;
}

bool overlaps(const Range& a, const Range& b) {
  return a.start.family == b.start.family && a.start <= b.end && b.start <= a.end;
}

/// Reads an optional address field of a range and checks it lies in the subnet.
Result<std::optional<IpAddr>> range_addr(const json::Value& v, std::string_view key, const std::string& where,
                                         const IpPrefix& subnet) {
  auto text = PLUMB_TRY(json::get_string(v, key, where));
  if (!text) return std::optional<IpAddr>{};
  std::string field = where + "." + std::string(key);
  auto a = IpAddr::parse(*text);
  if (!a) return std::unexpected(a.error().within(field));
  if (a->family != subnet.addr.family) {
    return fail(cni_code::kInvalidConfig,
                field + " \"" + *text + "\" is not of the same address family as subnet " + subnet.str());
  }
  if (!subnet.contains(*a)) {
    return fail(cni_code::kInvalidConfig, field + " \"" + *text + "\" is not in subnet " + subnet.str());
  }
  return std::optional<IpAddr>(*a);
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

Status write_all(int fd, std::string_view data, const std::string& path) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_fail(errno, "host-local: write " + path);
    off += static_cast<size_t>(n);
  }
  return {};
}


/// <dataDir>/<network>, held under the reference's flock for the Store's lifetime.
class Store {
 public:
  /// Opens and locks the network's directory. With create, makes it (mode 0755, like the
  /// reference's MkdirAll); without, a missing directory yields nullopt (nothing is held).
  static Result<std::optional<Store>> open(const std::string& data_dir, const std::string& network, bool create) {
    std::string dir = data_dir;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    dir += "/" + network;
    if (create) {
      PLUMB_TRY(plumb::mkdir_p(dir, 0755));  // the reference creates dataDir 0755
    } else {
      struct stat st{};
      if (::stat(dir.c_str(), &st) != 0) {
        if (errno == ENOENT) return std::optional<Store>{};
        return io_fail(errno, "host-local: stat " + dir);
      }
    }
    std::string lock = dir + "/lock";
    int fd = ::open(lock.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return io_fail(errno, "host-local: open lock file " + lock);
    Store s(dir, fd);
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno != EINTR) return io_fail(errno, "host-local: flock " + lock);
    }
    return std::optional<Store>(std::move(s));
  }

  Store(Store&& o) noexcept : dir_(std::move(o.dir_)), fd_(o.fd_) { o.fd_ = -1; }
  Store& operator=(Store&&) = delete;
  Store(const Store&) = delete;
  ~Store() {
    if (fd_ >= 0) ::close(fd_);  // closing the only descriptor releases the flock
  }

  [[nodiscard]] const std::string& dir() const { return dir_; }

  /// Every file named by an address, with its trimmed content. Unreadable files are skipped,
  /// as the reference does.
  [[nodiscard]] Result<std::vector<Entry>> entries() const {
    DIR* d = ::opendir(dir_.c_str());
    if (d == nullptr) return io_fail(errno, "host-local: read directory " + dir_);
    std::vector<Entry> out;
    while (dirent* de = ::readdir(d)) {
      std::string name = de->d_name;
      if (name == "." || name == ".." || (de->d_type != DT_REG && de->d_type != DT_UNKNOWN)) continue;
      if (name.starts_with(kReserveTmpPrefix)) {
        ::unlink((dir_ + "/" + name).c_str());  // a reserve() killed before its link(2): we hold the lock
        continue;
      }
      auto ip = IpAddr::parse(name);
      if (!ip) continue;
      std::string content;
      if (!read_small(dir_ + "/" + name, content)) continue;
      if (text::trim(content).empty()) {
        // Written by a plugin killed between creating and filling the file (the reference
        // plugin creates then writes): nobody can own it, and we hold the lock.
        ::unlink((dir_ + "/" + name).c_str());
        continue;
      }
      out.push_back(Entry{*ip, name, std::string(text::trim(content))});
    }
    ::closedir(d);
    return out;
  }

  /// Creates the file for `ip` (O_EXCL) holding the owner; false if it already exists. Records
  /// `ip` as last_reserved_ip.<rangeset>.
  ///
  /// The file appears with its content in one step: the owner is written to a temporary file that
  /// is then link(2)ed to the address's name (EEXIST when taken). A plumb killed half-way leaves
  /// at most a temporary file (removed by the next open of the store), never an empty address
  /// file that no DEL could attribute.
  [[nodiscard]] Result<bool> reserve(const Ids& ids, const IpAddr& ip, size_t rangeset) const {
    std::string path = dir_ + "/" + ip.str();
    std::string tmp = dir_ + "/" + std::string(kReserveTmpPrefix) + std::to_string(::getpid());
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return io_fail(errno, "host-local: create " + tmp);
    Status st = write_all(fd, ids.exact, tmp);
    if (::close(fd) != 0 && st) st = io_fail(errno, "host-local: close " + tmp);
    if (st && ::link(tmp.c_str(), path.c_str()) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      if (err == EEXIST) return false;
      return io_fail(err, "host-local: create " + path);
    }
    ::unlink(tmp.c_str());
    if (!st) return std::unexpected(st.error());
    std::string last = dir_ + "/" + std::string(kLastReservedPrefix) + std::to_string(rangeset);
    fd = ::open(last.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) st = io_fail(errno, "host-local: write " + last);
    if (fd >= 0) {
      st = write_all(fd, ip.str(), last);
      ::close(fd);
    }
    if (!st) {
      ::unlink(path.c_str());
      return std::unexpected(st.error());
    }
    return true;
  }

  /// Content of last_reserved_ip.<rangeset>, if present and an address.
  [[nodiscard]] std::optional<IpAddr> last_reserved(size_t rangeset) const {
    std::string content;
    if (!read_small(dir_ + "/" + std::string(kLastReservedPrefix) + std::to_string(rangeset), content)) return {};
    auto ip = IpAddr::parse(text::trim(content));
    if (!ip) return {};
    return *ip;
  }

  /// Removes the file `name`; a missing file is not an error.
  [[nodiscard]] Status remove(const std::string& name) const {
    std::string path = dir_ + "/" + name;
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return io_fail(errno, "host-local: remove " + path);
    return {};
  }

 private:
  Store(std::string dir, int fd) : dir_(std::move(dir)), fd_(fd) {}

  static bool read_small(const std::string& path, std::string& out) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return false;
    char buf[1024];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
      if (out.size() > size_t{64} * 1024) break;  // not one of ours
    }
    ::close(fd);
    return true;
  }

  std::string dir_;
  int fd_ = -1;
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

    // runtimeConfig.ipRanges (capability) are prepended to the configured range sets.
    std::vector<RangeSet> sets;
    if (req.runtime_config != nullptr) {
      const json::Value* rr = PLUMB_TRY(json::get_array(*req.runtime_config, "ipRanges", "runtimeConfig", true));
      if (rr != nullptr) {
        for (rapidjson::SizeType i = 0; i < rr->Size(); ++i) {
          sets.push_back(PLUMB_TRY(parse_range_set((*rr)[i], "runtimeConfig.ipRanges[" + std::to_string(i) + "]")));
        }
      }
    }
    if (sets.empty()) {
      sets = cfg_.ranges;
    } else {
      sets.insert(sets.end(), cfg_.ranges.begin(), cfg_.ranges.end());
      PLUMB_TRY(check_range_sets_disjoint(sets, "runtimeConfig.ipRanges + ipam.ranges"));
    }

    // Each requested address must fall in a range; one per range set.
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

    cni::CniResult result;
    if (!cfg_.resolv_conf.empty()) result.dns = PLUMB_TRY(parse_resolv_conf(cfg_.resolv_conf));
    result.routes = cfg_.routes;

    auto store_opt = PLUMB_TRY(Store::open(cfg_.data_dir, req.network_name, true));
    const Store& store = *store_opt;
    std::vector<Entry> entries = PLUMB_TRY(store.entries());

    std::vector<std::string> created;
    auto rollback = [&](Error e) -> std::unexpected<Error> {
      for (auto& name : created) (void)store.remove(name);
      return std::unexpected(std::move(e));
    };

    for (size_t i = 0; i < sets.size(); ++i) {
      const RangeSet& set = sets[i];
      // A repeated ADD returns what the container already holds in this set (reference GetByID).
      std::optional<IpAddr> held;
      for (const Entry& e : entries) {
        if (!held && match(e, ids) != Match::None && range_for(set, e.ip)) held = e.ip;
      }
      IpAddr got;
      if (held) {
        if (want[i] && *want[i] != *held) {
          return rollback(Error{cni_code::kConflict, 0,
                                "container " + ids.id + " interface " + req.ifname + " already holds " + held->str() +
                                    " in " + net + "; requested IP " + want[i]->str() + " not given",
                                {}});
        }
        got = *held;
      } else if (want[i]) {
        const Range& r = set[*range_for(set, *want[i])];
        if (!r.allocatable(*want[i])) {
          const char* what = *want[i] == r.gateway ? "the gateway" : "the network or broadcast address";
          return rollback(Error{cni_code::kIpamExhausted, 0,
                                "requested IP " + want[i]->str() + " is " + what + " of " + r.str() + " in " + net, {}});
        }
        auto ok = store.reserve(ids, *want[i], i);
        if (!ok) return rollback(ok.error());
        if (!*ok) {
          return rollback(Error{cni_code::kIpamExhausted, 0,
                                "requested IP " + want[i]->str() + " is already allocated in " + net, {}});
        }
        created.push_back(want[i]->str());
        got = *want[i];
      } else {
        RangeIter it(set, store.last_reserved(i));
        bool done = false;
        while (auto cand = it.next()) {
          auto ok = store.reserve(ids, cand->first, i);
          if (!ok) return rollback(ok.error());
          if (*ok) {
            got = cand->first;
            done = true;
            break;
          }
        }
        if (!done) {
          return rollback(Error{cni_code::kIpamExhausted, 0,
                                "no free address in " + range_set_str(set) + " for " + net, {}});
        }
        created.push_back(got.str());
      }
      const Range& r = set[*range_for(set, got)];
      result.ips.push_back(cni::IpConfig{IpPrefix{got, r.subnet.len}, r.gateway, std::nullopt});
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
  HostLocalConfig cfg_;
};

}  // namespace

bool Range::contains(const IpAddr& a) const {
  return a.family == start.family && subnet.contains(a) && start <= a && a <= end;
}

bool Range::allocatable(const IpAddr& a) const {
  if (!contains(a) || a == gateway) return false;
  if (a.is_v4() && (a == subnet.addr || a == subnet.last())) return false;
  return true;
}

std::string Range::str() const { return subnet.str() + " (" + start.str() + "-" + end.str() + ")"; }

std::string range_set_str(const RangeSet& set) {
  std::string out;
  for (const Range& r : set) out += (out.empty() ? "" : ", ") + r.str();
  return out;
}

std::optional<size_t> range_for(const RangeSet& set, const IpAddr& a) {
  for (size_t i = 0; i < set.size(); ++i) {
    if (set[i].contains(a)) return i;
  }
  return std::nullopt;
}

Result<Range> parse_range(const json::Value& v, const std::string& where) {
  if (!v.IsObject()) return fail(cni_code::kInvalidConfig, where + " must be an object, got " + json::dump(v));
  auto text = PLUMB_TRY(json::get_string(v, "subnet", where));
  if (!text) return fail(cni_code::kInvalidConfig, where + ".subnet is missing");
  auto p = IpPrefix::parse(*text);
  if (!p) return std::unexpected(p.error().within(where + ".subnet"));
  if (p->network() != *p) {
    return fail(cni_code::kInvalidConfig, where + ".subnet \"" + *text + "\" has host bits set (the network is " +
                                              p->network().str() + ")");
  }
  if (p->len + 2u > p->max_len()) {
    return fail(cni_code::kInvalidConfig, where + ".subnet \"" + *text + "\" is too small to allocate from");
  }
  Range r;
  r.subnet = *p;
  auto gw = PLUMB_TRY(range_addr(v, "gateway", where, r.subnet));
  auto start = PLUMB_TRY(range_addr(v, "rangeStart", where, r.subnet));
  auto end = PLUMB_TRY(range_addr(v, "rangeEnd", where, r.subnet));
  r.gateway = gw ? *gw : first_host(r.subnet);
  r.start = start ? *start : first_host(r.subnet);
  r.end = end ? *end : default_end(r.subnet);
  if (r.end < r.start) {
    return fail(cni_code::kInvalidConfig,
                where + ".rangeStart " + r.start.str() + " is after " + where + ".rangeEnd " + r.end.str());
  }
  return r;
}

Result<RangeSet> parse_range_set(const json::Value& v, const std::string& where) {
  if (!v.IsArray()) return fail(cni_code::kInvalidConfig, where + " must be an array of ranges, got " + json::dump(v));
  if (v.Empty()) return fail(cni_code::kInvalidConfig, where + " is an empty range set");
  RangeSet set;
  for (rapidjson::SizeType j = 0; j < v.Size(); ++j) {
    std::string at = where + "[" + std::to_string(j) + "]";
    Range r = PLUMB_TRY(parse_range(v[j], at));
    if (!set.empty() && r.subnet.addr.family != set.front().subnet.addr.family) {
      return fail(cni_code::kInvalidConfig, where + " mixes IPv4 and IPv6 ranges (" + set.front().subnet.str() +
                                                " and " + r.subnet.str() + "); use one range set per family");
    }
    for (size_t k = 0; k < set.size(); ++k) {
      if (overlaps(set[k], r)) {
        return fail(cni_code::kInvalidConfig, where + "[" + std::to_string(k) + "] " + set[k].str() + " and " + at +
                                                  " " + r.str() + " overlap");
      }
    }
    set.push_back(r);
  }
  return set;
}

Status check_range_sets_disjoint(const std::vector<RangeSet>& sets, std::string_view where) {
  for (size_t i = 0; i < sets.size(); ++i) {
    for (size_t j = i + 1; j < sets.size(); ++j) {
      for (const Range& a : sets[i]) {
        for (const Range& b : sets[j]) {
          if (overlaps(a, b)) {
            return fail(cni_code::kInvalidConfig, std::string(where) + ": range set " + std::to_string(i) + " (" +
                                                      a.str() + ") overlaps range set " + std::to_string(j) + " (" +
                                                      b.str() + ")");
          }
        }
      }
    }
  }
  return {};
}

Result<HostLocalConfig> parse_host_local_config(const json::Value& ipam) {
  if (!ipam.IsObject()) return fail(cni_code::kInvalidConfig, "ipam must be an object, got " + json::dump(ipam));
  HostLocalConfig c;
  if (json::find(ipam, "subnet") != nullptr) {
    c.ranges.push_back(RangeSet{PLUMB_TRY(parse_range(ipam, "ipam"))});
  } else {
    for (const char* key : {"rangeStart", "rangeEnd", "gateway"}) {
      if (json::find(ipam, key) != nullptr) {
        return fail(cni_code::kInvalidConfig, std::string("ipam.") + key + " is set without ipam.subnet");
      }
    }
  }
  const json::Value* ranges = PLUMB_TRY(json::get_array(ipam, "ranges", "ipam"));
  if (ranges != nullptr) {
    for (rapidjson::SizeType i = 0; i < ranges->Size(); ++i) {
      c.ranges.push_back(PLUMB_TRY(parse_range_set((*ranges)[i], "ipam.ranges[" + std::to_string(i) + "]")));
    }
  }
  if (c.ranges.empty()) return fail(cni_code::kInvalidConfig, "ipam has no ranges: set ipam.ranges or ipam.subnet");
  PLUMB_TRY(check_range_sets_disjoint(c.ranges, "ipam.ranges"));
  c.routes = PLUMB_TRY(detail::parse_routes(ipam, "ipam"));
  auto dir = PLUMB_TRY(json::get_string(ipam, "dataDir", "ipam"));
  if (dir && !dir->empty()) c.data_dir = *dir;
  auto resolv = PLUMB_TRY(json::get_string(ipam, "resolvConf", "ipam"));
  if (resolv) c.resolv_conf = *resolv;
  return c;
}

RangeIter::RangeIter(const RangeSet& set, const std::optional<IpAddr>& last_reserved) : set_(set) {
  if (!last_reserved) return;
  if (auto idx = range_for(set, *last_reserved)) {
    idx_ = *idx;
    cur_ = *last_reserved;  // the first next() moves past it
  }
}

std::optional<std::pair<IpAddr, size_t>> RangeIter::next() {
  if (set_.empty()) return std::nullopt;
  for (;;) {
    const Range* r = &set_[idx_];
    if (!cur_) {
      cur_ = r->start;
      first_ = cur_;
    } else {
      if (*cur_ == r->end) {
        idx_ = (idx_ + 1) % set_.size();
        r = &set_[idx_];
        cur_ = r->start;
      } else {
        cur_ = cur_->plus(1);
      }
      if (!first_) {
        first_ = cur_;
      } else if (*cur_ == *first_) {
        return std::nullopt;  // one full turn
      }
    }
    if (r->allocatable(*cur_)) return std::pair{*cur_, idx_};
  }
}

Result<cni::Dns> parse_resolv_conf(const std::string& path) {
  auto content = read_file(path, "host-local ipam.resolvConf");
  if (!content) return std::unexpected(Error{cni_code::kIo, content.error().sys_errno, content.error().msg, {}});
  cni::Dns dns;
  for (std::string_view line : text::split(*content, '\n')) {
    std::string_view t = text::trim(line);
    if (t.empty() || t.front() == '#' || t.front() == ';') continue;
    std::istringstream fields{std::string(t)};
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    if (f.size() < 2) continue;
    if (f[0] == "nameserver") {
      dns.nameservers.push_back(f[1]);
    } else if (f[0] == "domain") {
      dns.domain = f[1];
    } else if (f[0] == "search") {
      dns.search.insert(dns.search.end(), f.begin() + 1, f.end());
    } else if (f[0] == "options") {
      dns.options.insert(dns.options.end(), f.begin() + 1, f.end());
    }
  }
  return dns;
}

namespace detail {

Result<std::unique_ptr<Ipam>> make_host_local(const json::Value& ipam) {
  HostLocalConfig cfg = PLUMB_TRY(parse_host_local_config(ipam));
  return std::unique_ptr<Ipam>(std::make_unique<HostLocal>(std::move(cfg)));
}

}  // namespace detail
}  // namespace plumb::ipam
