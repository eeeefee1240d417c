#include "ebpf/loader.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

#include "engine/base/file.hpp"
#include "engine/netlink/socket.hpp"

// The skeleton is generated C (bpftool gen skeleton); it is not written for C++ warning levels.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wold-style-cast"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuseless-cast"
#endif
#include "bandwidth.skel.h"
#pragma GCC diagnostic pop

namespace plumb::ebpf {
namespace {

constexpr uint64_t kNsPerSec = 1'000'000'000;
constexpr uint64_t kGsoMaxBytes = 65536;

constexpr std::string_view kPinPrefix = "bandwidth_v";

std::string pin_dir_of(const std::string& bpffs_dir, uint32_t abi = PLUMB_BW_ABI_VERSION) {
  return bpffs_dir + "/" + pin_name(abi);
}

/// The ABI of a pin directory's name ("bandwidth_v<N>"), nullopt for any other name (the
/// temporary directories of load_and_pin included).
std::optional<uint32_t> abi_of_pin_name(std::string_view name) {
  if (!name.starts_with(kPinPrefix)) return std::nullopt;
  std::string_view digits = name.substr(kPinPrefix.size());
  uint32_t abi = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), abi);
  if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;
  return abi;
}

/// "/proc/self/fd/<dir fd>/<name>": a path the bpf(2) pin and get commands resolve inside the
/// directory held open, never through a link planted at the directory's path since (Debian 12's
/// libbpf 1.1 has no bpf_obj_pin_opts/BPF_F_PATH_FD).
std::string fd_path(const Dir& dir, std::string_view name) {
  return "/proc/self/fd/" + std::to_string(dir.fd()) + "/" + std::string(name);
}

std::string key_text(const plumb_bw_key& k) {
  const bool pod = (k.hook & PLUMB_BW_HOOK_POD) != 0;
  return std::string(pod ? "pod-side id " : "ifindex ") + std::to_string(k.ifindex) + " " +
         hook_name(static_cast<Hook>(k.hook & ~PLUMB_BW_HOOK_POD));
}

/// libbpf prints through a global callback; while plumb calls into libbpf's loader the messages
/// are collected here and end up in the error's details (library code never logs).
std::string* g_libbpf_log = nullptr;

int capture_libbpf(enum libbpf_print_level level, const char* fmt, va_list ap) {
  if (level == LIBBPF_DEBUG || g_libbpf_log == nullptr || g_libbpf_log->size() > 16384) return 0;
  char buf[1024];
  int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  if (n > 0) g_libbpf_log->append(buf, std::min(static_cast<size_t>(n), sizeof buf - 1));
  return 0;
}

class LibbpfLog {
 public:
  LibbpfLog() : prev_(libbpf_set_print(capture_libbpf)) { g_libbpf_log = &text_; }
  ~LibbpfLog() {
    libbpf_set_print(prev_);
    g_libbpf_log = nullptr;
  }
  LibbpfLog(const LibbpfLog&) = delete;
  LibbpfLog& operator=(const LibbpfLog&) = delete;
  const std::string& text() const { return text_; }

 private:
  libbpf_print_fn_t prev_;
  std::string text_;
};

struct SkelDeleter {
  void operator()(plumb_bandwidth* s) const { plumb_bandwidth__destroy(s); }
};

bool on_bpffs(const std::string& path) {
  struct statfs st {};
  return ::statfs(path.c_str(), &st) == 0 && static_cast<unsigned long>(st.f_type) == BPF_FS_MAGIC;
}

/// bpffs_dir opened (Dir: its own name never a link), on a bpf filesystem; created 0700 when
/// missing and its parent is on bpffs. Errors: kInvalidConfig (not absolute, not on bpffs); kIo
/// naming the path (ELOOP for a link).
Result<Dir> open_bpffs_dir(const std::string& bpffs_dir) {
  if (bpffs_dir.empty() || bpffs_dir.front() != '/') {
    return fail(cni_code::kInvalidConfig, "plumb config.bpffsDir \"" + bpffs_dir + "\" must be an absolute path");
  }
  auto dir = Dir::open(bpffs_dir);
  if (!dir && dir.error().cni_code == cni_code::kNotFound) {
    std::string parent = bpffs_dir.substr(0, std::max<size_t>(bpffs_dir.find_last_of('/'), 1));
    if (!on_bpffs(parent)) {
      return fail(cni_code::kInvalidConfig, "plumb config.bpffsDir \"" + bpffs_dir + "\": its parent " + parent +
                                                " is not on a bpf filesystem (mount -t bpf bpf " + parent + ")");
    }
    // mkdir(2) never follows a link at the last component (EEXIST; then open() refuses it).
    if (::mkdir(bpffs_dir.c_str(), 0700) != 0 && errno != EEXIST) return fail_errno(errno, "create bpffs directory " + bpffs_dir);
    dir = Dir::open(bpffs_dir);
  }
  if (!dir) return std::unexpected(dir.error());
  struct statfs st {};
  if (::fstatfs(dir->fd(), &st) != 0 || static_cast<unsigned long>(st.f_type) != BPF_FS_MAGIC) {
    return fail(cni_code::kInvalidConfig, "plumb config.bpffsDir \"" + bpffs_dir + "\" is not on a bpf filesystem");
  }
  return dir;
}

/// The pinned object `name` in `pins`, never through a link at its name. Errors: kIo (ELOOP)
/// for a link; kKernel when it cannot be opened (an incomplete pin directory).
Result<UniqueFd> open_pin(const Dir& pins, std::string_view name) {
  const std::string path = pins.path_of(name);
  auto st = PLUMB_TRY(pins.stat(name));
  if (st && S_ISLNK(st->st_mode)) return fail_errno(ELOOP, "open pin " + path + ": a symbolic link, not followed");
  int fd = bpf_obj_get(fd_path(pins, name).c_str());
  if (fd < 0) {
    return std::unexpected(Error{cni_code::kKernel, errno, "open pin " + path,
                                 "the pins under " + pins.path() + " are incomplete; remove that directory so plumb reloads the programs"});
  }
  return UniqueFd(fd);
}

Result<bpf_map_info> map_info(int fd, const std::string& path) {
  bpf_map_info info{};
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return fail_errno(errno, "inspect pinned map " + path);
  return info;
}

Status check_map(int fd, const std::string& path, uint32_t type, uint32_t key_size, uint32_t value_size) {
  const bpf_map_info info = PLUMB_TRY(map_info(fd, path));
  if (info.type != type || info.key_size != key_size || info.value_size != value_size) {
    return fail(cni_code::kKernel, "pinned map " + path + " has type/key/value sizes " + std::to_string(info.type) + "/" +
                                       std::to_string(info.key_size) + "/" + std::to_string(info.value_size) + ", expected " +
                                       std::to_string(type) + "/" + std::to_string(key_size) + "/" + std::to_string(value_size) +
                                       " (ABI v" + std::to_string(PLUMB_BW_ABI_VERSION) + ")");
  }
  return {};
}

Status check_prog(int fd, const std::string& path) {
  bpf_prog_info info{};
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return fail_errno(errno, "inspect pinned program " + path);
  if (info.type != BPF_PROG_TYPE_SCHED_CLS) {
    return fail(cni_code::kKernel, "pinned program " + path + " is of type " + std::to_string(info.type) + ", not sched_cls");
  }
  return {};
}

/// Removes the temporary pin directory `tmp_name` (held open as `tmp`) of `bpffs` and its pins.
void remove_tmp_pins(const Dir& bpffs, const Dir& tmp, const std::string& tmp_name) {
  for (const char* name : {PLUMB_BW_PIN_PROG_HOST_INGRESS, PLUMB_BW_PIN_PROG_HOST_EGRESS, PLUMB_BW_PIN_PROG_EDT_EGRESS,
                           PLUMB_BW_PIN_MAP_STATE, PLUMB_BW_PIN_MAP_NODE}) {
    (void)tmp.remove(name);
  }
  (void)bpffs.remove_dir(tmp_name);
}

/// Loads the skeleton, chooses the mode and pins everything as `bpffs`/`dir_name` (atomically,
/// via a temporary directory, all relative to `bpffs`). Losing the race to a concurrent loader
/// is success: its pins are used.
Status load_and_pin(const Dir& bpffs, const std::string& dir_name) {
  LibbpfLog log;
  std::unique_ptr<plumb_bandwidth, SkelDeleter> skel(plumb_bandwidth__open());
  if (!skel) return fail(cni_code::kKernelFeature, "open the bandwidth BPF object", log.text());
  if (int err = plumb_bandwidth__load(skel.get()); err != 0) {
    return std::unexpected(Error{cni_code::kKernelFeature, -err, "load the bandwidth BPF programs (needs cls_bpf, bpf_spin_lock, kernel >= 5.7)", log.text()});
  }
  auto fq = kernel_has_fq();
  plumb_bw_node node{PLUMB_BW_ABI_VERSION, (fq && *fq) ? PLUMB_BW_MODE_EDT_FQ : PLUMB_BW_MODE_TOKEN_BUCKET};
  uint32_t zero = 0;
  if (bpf_map_update_elem(bpf_map__fd(skel->maps.plumb_bw_node), &zero, &node, BPF_ANY) != 0) {
    return fail_errno(errno, "initialise the bandwidth node map");
  }

  uint64_t rnd = PLUMB_TRY(random_owner());
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "%d_%016llx", static_cast<int>(::getpid()), static_cast<unsigned long long>(rnd));
  // bpffs refuses names containing '.' (EPERM).
  const std::string tmp_name = dir_name + "_tmp_" + suffix;
  if (::mkdirat(bpffs.fd(), tmp_name.c_str(), 0700) != 0) return fail_errno(errno, "create " + bpffs.path_of(tmp_name));
  auto tmp = bpffs.sub(tmp_name);
  if (!tmp) {
    (void)bpffs.remove_dir(tmp_name);
    return std::unexpected(tmp.error());
  }
  const std::pair<const char*, int> pins[] = {
      {PLUMB_BW_PIN_PROG_HOST_INGRESS, bpf_program__fd(skel->progs.tb_host_ingress)},
      {PLUMB_BW_PIN_PROG_HOST_EGRESS, bpf_program__fd(skel->progs.tb_host_egress)},
      {PLUMB_BW_PIN_PROG_EDT_EGRESS, bpf_program__fd(skel->progs.edt_host_egress)},
      {PLUMB_BW_PIN_MAP_STATE, bpf_map__fd(skel->maps.plumb_bw_state)},
      {PLUMB_BW_PIN_MAP_NODE, bpf_map__fd(skel->maps.plumb_bw_node)},
  };
  for (auto& [name, fd] : pins) {
    if (bpf_obj_pin(fd, fd_path(*tmp, name).c_str()) != 0) {
      int e = errno;
      remove_tmp_pins(bpffs, *tmp, tmp_name);
      return fail_errno(e, "pin " + tmp->path_of(name));
    }
  }
  if (::renameat(bpffs.fd(), tmp_name.c_str(), bpffs.fd(), dir_name.c_str()) != 0) {
    int e = errno;
    remove_tmp_pins(bpffs, *tmp, tmp_name);
    if (e != EEXIST && e != ENOTEMPTY) return fail_errno(e, "move pins " + tmp->path() + " to " + bpffs.path_of(dir_name));
  }
  return {};
}

}  // namespace

std::string pin_name(uint32_t abi) { return std::string(kPinPrefix) + std::to_string(abi); }

const char* hook_name(Hook h) { return h == Hook::HostIngress ? "host-ingress" : "host-egress"; }

Result<BucketParams> bucket_params(const Limit& limit) {
  if (limit.rate_bps == 0 || limit.burst_bits == 0) {
    return fail(cni_code::kInvalidConfig, "bandwidth: rate " + std::to_string(limit.rate_bps) + " and burst " +
                                              std::to_string(limit.burst_bits) + " must both be non-zero");
  }
  using u128 = unsigned __int128;
  auto ns_of_bits = [&](u128 bits) -> u128 { return bits * kNsPerSec / limit.rate_bps; };
  BucketParams p;
  p.burst_ns = static_cast<uint64_t>(std::min<u128>(ns_of_bits(limit.burst_bits), u128(1) << 62));
  u128 gso = ns_of_bits(u128(kGsoMaxBytes) * 8);
  u128 mark = std::max<u128>(kMarkDelayNs, gso);
  u128 horizon = std::max<u128>(kHorizonNs, mark + 2 * gso);
  horizon = std::min<u128>(horizon, kMaxHorizonNs);
  if (mark >= horizon) mark = horizon / 2;
  p.mark_ns = static_cast<uint64_t>(mark);
  p.horizon_ns = static_cast<uint64_t>(horizon);
  return p;
}

Result<uint64_t> random_owner() {
  uint64_t v = 0;
  if (::getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) return fail_errno(errno, "getrandom for a bandwidth owner id");
  return v == 0 ? 1 : v;
}

Result<bool> kernel_has_fq() {
  Result<bool> result = false;
  std::thread probe([&result] {
    // This thread alone moves to a new, empty network namespace; it dies with the thread.
    if (::unshare(CLONE_NEWNET) != 0) {
      result = fail_errno(errno, "probe sch_fq: create a throwaway network namespace");
      return;
    }
    auto nl = netlink::Socket::open();
    if (!nl) {
      result = std::unexpected(nl.error());
      return;
    }
    netlink::Message m(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_EXCL);
    auto* t = m.put_header<tcmsg>();
    t->tcm_family = AF_UNSPEC;
    t->tcm_ifindex = 1;  // lo, the only device of a new namespace
    t->tcm_parent = TC_H_ROOT;
    m.put_str(TCA_KIND, "fq");
    auto st = nl->request(m, "probe sch_fq on lo of a throwaway namespace");
    if (st) {
      result = true;
    } else if (st.error().sys_errno == ENOENT || st.error().sys_errno == EOPNOTSUPP) {
      result = false;
    } else {
      result = std::unexpected(st.error());
    }
  });
  probe.join();
  return result;
}

Programs::Programs(Programs&& o) noexcept { *this = std::move(o); }

Programs& Programs::operator=(Programs&& o) noexcept {
  if (this != &o) {
    close_all();
    tb_ingress_ = std::exchange(o.tb_ingress_, -1);
    tb_egress_ = std::exchange(o.tb_egress_, -1);
    edt_egress_ = std::exchange(o.edt_egress_, -1);
    state_ = std::exchange(o.state_, -1);
    node_ = std::exchange(o.node_, -1);
    mode_ = o.mode_;
    pin_dir_ = std::move(o.pin_dir_);
  }
  return *this;
}

Programs::~Programs() { close_all(); }

void Programs::close_all() {
  for (int* fd : {&tb_ingress_, &tb_egress_, &edt_egress_, &state_, &node_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

Result<std::optional<Programs>> Programs::open_existing(const std::string& bpffs_dir, uint32_t abi) {
  auto bpffs = Dir::open(bpffs_dir);
  if (!bpffs && bpffs.error().cni_code == cni_code::kNotFound) return std::optional<Programs>{};
  if (!bpffs) return std::unexpected(bpffs.error());
  return open_in(*bpffs, abi);
}

Result<std::optional<Programs>> Programs::open_in(const Dir& bpffs, uint32_t abi) {
  auto pins = bpffs.sub(pin_name(abi));  // a link there is refused (ELOOP), naming its path
  if (!pins && pins.error().cni_code == cni_code::kNotFound) return std::optional<Programs>{};
  if (!pins) return std::unexpected(pins.error());
  const std::string& pin_dir = pins->path();
  Programs p;
  p.pin_dir_ = pin_dir;
  auto get = [&](const char* name, int* fd) -> Status {
    *fd = PLUMB_TRY(open_pin(*pins, name)).release();
    return {};
  };
  PLUMB_TRY(get(PLUMB_BW_PIN_PROG_HOST_INGRESS, &p.tb_ingress_));
  PLUMB_TRY(get(PLUMB_BW_PIN_PROG_HOST_EGRESS, &p.tb_egress_));
  PLUMB_TRY(get(PLUMB_BW_PIN_PROG_EDT_EGRESS, &p.edt_egress_));
  PLUMB_TRY(get(PLUMB_BW_PIN_MAP_STATE, &p.state_));
  PLUMB_TRY(get(PLUMB_BW_PIN_MAP_NODE, &p.node_));
  PLUMB_TRY(check_prog(p.tb_ingress_, pin_dir + "/" PLUMB_BW_PIN_PROG_HOST_INGRESS));
  PLUMB_TRY(check_prog(p.tb_egress_, pin_dir + "/" PLUMB_BW_PIN_PROG_HOST_EGRESS));
  PLUMB_TRY(check_prog(p.edt_egress_, pin_dir + "/" PLUMB_BW_PIN_PROG_EDT_EGRESS));
  PLUMB_TRY(check_map(p.state_, pin_dir + "/" PLUMB_BW_PIN_MAP_STATE, BPF_MAP_TYPE_HASH, sizeof(plumb_bw_key), sizeof(plumb_bw_state)));
  PLUMB_TRY(check_map(p.node_, pin_dir + "/" PLUMB_BW_PIN_MAP_NODE, BPF_MAP_TYPE_ARRAY, sizeof(uint32_t), sizeof(plumb_bw_node)));
  uint32_t zero = 0;
  plumb_bw_node node{};
  if (bpf_map_lookup_elem(p.node_, &zero, &node) != 0) return fail_errno(errno, "read " + pin_dir + "/" PLUMB_BW_PIN_MAP_NODE);
  if (node.abi_version != abi || node.mode > PLUMB_BW_MODE_EDT_FQ) {
    return fail(cni_code::kKernel, pin_dir + "/" PLUMB_BW_PIN_MAP_NODE " says ABI v" + std::to_string(node.abi_version) + " mode " +
                                       std::to_string(node.mode) + "; expected ABI v" + std::to_string(abi));
  }
  p.mode_ = static_cast<Mode>(node.mode);
  return std::optional<Programs>(std::move(p));
}

Result<Programs> Programs::load_or_open(const std::string& bpffs_dir) {
  const Dir bpffs = PLUMB_TRY(open_bpffs_dir(bpffs_dir));
  if (auto p = PLUMB_TRY(open_in(bpffs))) return std::move(*p);
  PLUMB_TRY(load_and_pin(bpffs, pin_name()));
  // The first load of this ABI on the node (an upgrade): earlier ABIs' pins nothing uses go now;
  // those still holding entries go with the DEL of their last attachment (remove_entries'
  // callers). Not this ADD's failure when that cannot be done.
  (void)prune_unused_pins(bpffs_dir);
  auto p = PLUMB_TRY(open_in(bpffs));
  if (!p) return fail(cni_code::kKernel, "bandwidth programs were pinned under " + pin_dir_of(bpffs_dir) + " but are not there");
  return std::move(*p);
}

int Programs::prog_fd(Hook h) const {
  if (h == Hook::HostEgress && mode_ == Mode::EdtFq) return edt_egress_;
  return token_bucket_fd(h);
}

const char* Programs::prog_name(Hook h) const {
  if (h == Hook::HostIngress) return PLUMB_BW_PIN_PROG_HOST_INGRESS;
  return mode_ == Mode::EdtFq ? PLUMB_BW_PIN_PROG_EDT_EGRESS : PLUMB_BW_PIN_PROG_HOST_EGRESS;
}

Result<uint32_t> Programs::prog_id(Hook h) const {
  bpf_prog_info info{};
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(prog_fd(h), &info, &len) != 0) return fail_errno(errno, std::string("inspect program ") + prog_name(h));
  return info.id;
}

Status Programs::configure(int ifindex, Hook h, const Limit& limit, uint64_t owner) const {
  return configure(host_key(ifindex, h), limit, owner, false);
}

Status Programs::configure(const plumb_bw_key& key, const Limit& limit, uint64_t owner, bool exclusive) const {
  BucketParams p = PLUMB_TRY(bucket_params(limit));
  plumb_bw_state v{};
  v.owner = owner;
  v.rate_bps = limit.rate_bps;
  v.burst_bits = limit.burst_bits;
  v.burst_ns = p.burst_ns;
  v.mark_ns = p.mark_ns;
  v.horizon_ns = p.horizon_ns;
  if (!exclusive) return write(key, v);
  if (bpf_map_update_elem(state_, &key, &v, BPF_NOEXIST | BPF_F_LOCK) != 0) {
    if (errno == EEXIST) return fail(cni_code::kConflict, "bandwidth state of " + key_text(key) + " exists");
    return fail_errno(errno, "write bandwidth state of " + key_text(key));
  }
  return {};
}

Status Programs::write(const plumb_bw_key& key, const plumb_bw_state& value) const {
  if (bpf_map_update_elem(state_, &key, &value, BPF_ANY | BPF_F_LOCK) != 0) {
    return fail_errno(errno, "write bandwidth state of " + key_text(key));
  }
  return {};
}

Result<std::optional<plumb_bw_state>> Programs::read(int ifindex, Hook h) const { return read(host_key(ifindex, h)); }

Result<std::optional<plumb_bw_state>> Programs::read(const plumb_bw_key& key) const {
  plumb_bw_state v{};
  if (bpf_map_lookup_elem_flags(state_, &key, &v, BPF_F_LOCK) != 0) {
    if (errno == ENOENT) return std::optional<plumb_bw_state>{};
    return fail_errno(errno, "read bandwidth state of " + key_text(key));
  }
  return std::optional<plumb_bw_state>(v);
}

Result<bool> Programs::remove(int ifindex, Hook h, uint64_t owner) const { return remove(host_key(ifindex, h), owner); }

Result<bool> Programs::remove(const plumb_bw_key& key, uint64_t owner) const {
  auto cur = PLUMB_TRY(read(key));
  if (!cur || cur->owner != owner) return false;
  if (bpf_map_delete_elem(state_, &key) != 0) {
    if (errno == ENOENT) return false;
    return fail_errno(errno, "delete bandwidth state of " + key_text(key));
  }
  return true;
}

Result<std::vector<std::pair<plumb_bw_key, plumb_bw_state>>> Programs::entries() const {
  std::vector<std::pair<plumb_bw_key, plumb_bw_state>> out;
  plumb_bw_key key{};
  plumb_bw_key next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(state_, prev, &next) == 0) {
    plumb_bw_state v{};
    if (bpf_map_lookup_elem_flags(state_, &next, &v, BPF_F_LOCK) == 0) out.emplace_back(next, v);
    key = next;
    prev = &key;
  }
  if (errno != ENOENT) return fail_errno(errno, "iterate the bandwidth state map");
  return out;
}

namespace {

/// Whether the map `fd` (pinned at `path`) has no entry.
Result<bool> map_is_empty(int fd, const std::string& path) {
  const bpf_map_info info = PLUMB_TRY(map_info(fd, path));
  std::vector<unsigned char> key(std::max<uint32_t>(info.key_size, 1));
  if (bpf_map_get_next_key(fd, nullptr, key.data()) == 0) return false;
  if (errno == ENOENT) return true;
  return fail_errno(errno, "iterate " + path);
}

}  // namespace

Status remove_entries(const std::string& pin_dir, const std::vector<plumb_bw_key>& keys, uint64_t owner) {
  auto pins = Dir::open(pin_dir);
  if (!pins && pins.error().cni_code == cni_code::kNotFound) return {};
  if (!pins) return std::unexpected(pins.error());
  if (!PLUMB_TRY(pins->stat(PLUMB_BW_PIN_MAP_STATE))) return {};
  const UniqueFd map = PLUMB_TRY(open_pin(*pins, PLUMB_BW_PIN_MAP_STATE));
  const std::string path = pins->path_of(PLUMB_BW_PIN_MAP_STATE);
  const bpf_map_info info = PLUMB_TRY(map_info(map.get(), path));
  if (info.key_size != sizeof(plumb_bw_key) || info.value_size < PLUMB_BW_OWNER_OFFSET + sizeof owner) {
    return fail(cni_code::kKernel, "pinned map " + path + " has key/value sizes " + std::to_string(info.key_size) + "/" +
                                       std::to_string(info.value_size) + ": not the bandwidth state map of any plumb ABI");
  }
  std::vector<unsigned char> value(info.value_size);
  for (const plumb_bw_key& key : keys) {
    // Under the entry's lock where its layout has one (every ABI so far); else a plain read.
    int r = bpf_map_lookup_elem_flags(map.get(), &key, value.data(), BPF_F_LOCK);
    if (r != 0 && errno == EINVAL) r = bpf_map_lookup_elem(map.get(), &key, value.data());
    if (r != 0 && errno == ENOENT) continue;
    if (r != 0) return fail_errno(errno, "read bandwidth state of " + key_text(key) + " in " + path);
    uint64_t found = 0;
    std::memcpy(&found, value.data() + PLUMB_BW_OWNER_OFFSET, sizeof found);
    if (found != owner) continue;  // another attachment's since (an ifindex reused)
    if (bpf_map_delete_elem(map.get(), &key) != 0 && errno != ENOENT) {
      return fail_errno(errno, "delete bandwidth state of " + key_text(key) + " in " + path);
    }
  }
  return {};
}

Result<std::vector<std::string>> prune_unused_pins(const std::string& bpffs_dir) {
  std::vector<std::string> removed;
  auto bpffs = Dir::open(bpffs_dir);
  if (!bpffs && bpffs.error().cni_code == cni_code::kNotFound) return removed;
  if (!bpffs) return std::unexpected(bpffs.error());
  for (const auto& e : PLUMB_TRY(bpffs->list())) {
    auto abi = abi_of_pin_name(e.name);
    if (e.type != DT_DIR || !abi || *abi == PLUMB_BW_ABI_VERSION) continue;
    const Dir pins = PLUMB_TRY(bpffs->sub(e.name));
    if (!PLUMB_TRY(pins.stat(PLUMB_BW_PIN_MAP_STATE))) continue;
    {
      const UniqueFd map = PLUMB_TRY(open_pin(pins, PLUMB_BW_PIN_MAP_STATE));
      if (!PLUMB_TRY(map_is_empty(map.get(), pins.path_of(PLUMB_BW_PIN_MAP_STATE)))) continue;
    }
    // An older plumb still running (an upgrade under way) may have opened these pins: what it
    // attaches keeps its programs and map alive without them.
    for (const auto& pin : PLUMB_TRY(pins.list())) PLUMB_TRY(pins.remove(pin.name));
    if (PLUMB_TRY(bpffs->remove_dir(e.name))) removed.push_back(pins.path());
  }
  return removed;
}

}  // namespace plumb::ebpf
