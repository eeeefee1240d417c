// The bandwidth programs driven directly with BPF_PROG_TEST_RUN (needs root for BPF, hence an
// integration test): the token bucket's conform / exceed / refill behaviour, the horizon with ECN
// marking, GSO wire accounting, and the EDT program's departure stamps. Programs are loaded through
// the production loader into a private bpffs of the case.
//
// Time: the programs read the real CLOCK_MONOTONIC (bpf_ktime_get_ns); there is no clock override
// in production code. Tests control time instead by choosing rates so that the refill during the
// test's own runtime is negligible (exceed: 100 bytes per second against 1000-byte frames), by
// writing the bucket's virtual clock from user space (CLOCK_MONOTONIC is the same clock), and, for
// refill, by sleeping a known minimum (time can only add tokens, so a sleep of at least one
// packet's cost makes the next packet conform whatever the machine's load). `repeat` runs many
// packets back to back inside one syscall, where assertions then use the counters in the map.
#include <doctest/doctest.h>

#include <bpf/bpf.h>
#include <linux/pkt_cls.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>
#include <vector>

#include "ebpf/loader.hpp"
#include "tests/support/private_node.hpp"

using plumb::ebpf::Hook;
using plumb::ebpf::Programs;
using plumb::test::Node;
using plumb::test::PrivateBpffs;

namespace {

constexpr uint32_t kLo = 1;  // BPF_PROG_TEST_RUN runs skbs on the namespace's loopback device

uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint16_t ip_checksum(const uint8_t* p, size_t n) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < n; i += 2) sum += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

/// An Ethernet + IPv4 + TCP frame of `len` bytes (192.0.2.1 -> 192.0.2.2) with ECN bits `ecn`.
std::vector<uint8_t> frame(size_t len, uint8_t ecn) {
  std::vector<uint8_t> f(len, 0);
  const uint8_t macs[12] = {0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1};
  std::memcpy(f.data(), macs, 12);
  f[12] = 0x08;
  f[13] = 0x00;
  uint8_t* ip = f.data() + 14;
  ip[0] = 0x45;
  ip[1] = ecn;
  uint16_t tot = static_cast<uint16_t>(len - 14);
  ip[2] = static_cast<uint8_t>(tot >> 8);
  ip[3] = static_cast<uint8_t>(tot);
  ip[8] = 64;
  ip[9] = 6;  // TCP
  const uint8_t addrs[8] = {192, 0, 2, 1, 192, 0, 2, 2};
  std::memcpy(ip + 12, addrs, 8);
  uint16_t ck = ip_checksum(ip, 20);
  ip[10] = static_cast<uint8_t>(ck >> 8);
  ip[11] = static_cast<uint8_t>(ck);
  uint8_t* tcp = ip + 20;
  tcp[12] = 0x50;  // data offset 5 words
  return f;
}

struct Run {
  int ret = -1;
  std::vector<uint8_t> out;
  __sk_buff ctx_out{};
};

/// One BPF_PROG_TEST_RUN of `prog` with `data`, `repeat` times; ctx_in may set tstamp/gso.
Run test_run(int prog, const std::vector<uint8_t>& data, uint32_t repeat = 1, const __sk_buff* ctx_in = nullptr) {
  Run r;
  r.out.assign(data.size() + 256, 0);
  __sk_buff ctx{};
  if (ctx_in != nullptr) ctx = *ctx_in;
  bpf_test_run_opts o{};
  o.sz = sizeof o;
  o.data_in = data.data();
  o.data_size_in = static_cast<uint32_t>(data.size());
  o.data_out = r.out.data();
  o.data_size_out = static_cast<uint32_t>(r.out.size());
  o.ctx_in = &ctx;
  o.ctx_size_in = sizeof ctx;
  o.ctx_out = &r.ctx_out;
  o.ctx_size_out = sizeof r.ctx_out;
  o.repeat = repeat;
  int err = bpf_prog_test_run_opts(prog, &o);
  INFO("bpf_prog_test_run_opts: ", std::strerror(errno));
  REQUIRE(err == 0);
  r.ret = static_cast<int>(o.retval);
  r.out.resize(o.data_size_out);
  return r;
}

plumb_bw_state state_of(const Programs& p, Hook h) {
  auto s = p.read(static_cast<int>(kLo), h);
  REQUIRE(s);
  REQUIRE(s->has_value());
  return **s;
}

/// A raw entry: rate in bits/s, times in ns.
plumb_bw_state entry(uint64_t rate_bps, uint64_t burst_ns, uint64_t mark_ns, uint64_t horizon_ns) {
  plumb_bw_state s{};
  s.owner = 7;
  s.rate_bps = rate_bps;
  s.burst_ns = burst_ns;
  s.mark_ns = mark_ns;
  s.horizon_ns = horizon_ns;
  return s;
}

Programs load(const PrivateBpffs& fs) {
  auto p = Programs::load_or_open(fs.dir() + "/plumb");
  INFO((p ? std::string() : p.error().text() + " " + p.error().details));
  REQUIRE(p);
  return std::move(*p);
}

}  // namespace

TEST_CASE("token bucket: a full bucket passes its burst, the excess is dropped and not charged") {
  Node node;
  PrivateBpffs fs(node);
  Programs p = load(fs);
  // 800 bit/s = 100 bytes/s: a 1000-byte frame costs 10 s of tokens, so the refill during the
  // test (milliseconds) is far below one frame. Burst: exactly 5 frames. No horizon: pure policer.
  const uint64_t rate = 800, cost = 10'000'000'000ull;
  REQUIRE(p.write({kLo, PLUMB_BW_HOOK_HOST_INGRESS}, entry(rate, 5 * cost, 0, 0)));
  auto f = frame(1000, 0);
  uint64_t before_first = mono_ns();
  uint64_t after_first = 0;
  for (int i = 0; i < 5; ++i) {
    CAPTURE(i);
    CHECK(test_run(p.token_bucket_fd(Hook::HostIngress), f).ret == TC_ACT_OK);  // conform
    if (i == 0) after_first = mono_ns();
  }
  CHECK(test_run(p.token_bucket_fd(Hook::HostIngress), f).ret == TC_ACT_SHOT);  // exceed
  CHECK(test_run(p.token_bucket_fd(Hook::HostIngress), f, 100).ret == TC_ACT_SHOT);
  auto s = state_of(p, Hook::HostIngress);
  CHECK(s.passed_pkts == 5);
  CHECK(s.passed_bytes == 5000);
  CHECK(s.dropped_pkts == 101);
  CHECK(s.dropped_bytes == 101000);
  CHECK(s.marked_pkts == 0);
  // Drops are not charged: the full bucket started at (first run - burst) and the 5 passed
  // frames moved the virtual clock by exactly the burst, back to the time of the first run.
  CHECK(s.t_empty_ns >= before_first);
  CHECK(s.t_empty_ns <= after_first);
  // The other hook's entry is separate: host egress has none, so everything passes there.
  CHECK(test_run(p.token_bucket_fd(Hook::HostEgress), f, 50).ret == TC_ACT_OK);
}

TEST_CASE("token bucket: refill after time passes, capped at the burst") {
  Node node;
  PrivateBpffs fs(node);
  Programs p = load(fs);
  // 8 kbit/s = 1 kB/s: a 1000-byte frame costs 1 s. Burst: one frame. No horizon.
  const uint64_t rate = 8'000, cost = 1'000'000'000;
  REQUIRE(p.write({kLo, PLUMB_BW_HOOK_HOST_EGRESS}, entry(rate, cost, 0, 0)));
  const int prog = p.token_bucket_fd(Hook::HostEgress);
  auto f = frame(1000, 0);
  test_run(prog, f, 20);  // the first passes, the rest find the bucket empty
  auto s1 = state_of(p, Hook::HostEgress);
  CHECK(s1.passed_pkts >= 1);
  CHECK(s1.dropped_pkts >= 1);
  CHECK(test_run(prog, f).ret == TC_ACT_SHOT);  // still empty (unless this very run waited 1 s)
  // Refill: sleep at least one frame's cost (time only adds tokens, load cannot make this fail).
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  CHECK(test_run(prog, f).ret == TC_ACT_OK);
  // Cap: a long pause refills at most `burst` (one frame), not three frames' worth.
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  auto before = state_of(p, Hook::HostEgress);
  test_run(prog, f, 10);
  auto after = state_of(p, Hook::HostEgress);
  CHECK(after.passed_pkts - before.passed_pkts >= 1);
  CHECK(after.passed_pkts - before.passed_pkts <= 2);  // 2 only if the 10 runs spanned 1 s
  CHECK(after.dropped_pkts - before.dropped_pkts >= 8);
}

TEST_CASE("token bucket: within the horizon deficits pass, beyond mark ECN-capable packets get CE, beyond the horizon all drop") {
  Node node;
  PrivateBpffs fs(node);
  Programs p = load(fs);
  // 800 bit/s: a 100-byte frame costs 1 s. Empty bucket (burst 0), mark at 1.5 s of deficit,
  // horizon at 3.5 s: frame 1 leaves a 1 s deficit (pass), frames 2 and 3 leave 2 s and 3 s
  // (CE-marked), frame 4 would leave 4 s (drop). Refill during the test: 100 bytes/s, i.e. a
  // stall of 500 ms between runs would be needed to cross a threshold.
  REQUIRE(p.write({kLo, PLUMB_BW_HOOK_HOST_INGRESS}, entry(800, 0, 1'500'000'000, 3'500'000'000)));
  const int prog = p.token_bucket_fd(Hook::HostIngress);
  auto ect0 = frame(100, 2);
  auto r1 = test_run(prog, ect0);
  CHECK(r1.ret == TC_ACT_OK);
  CHECK((r1.out[15] & 3) == 2);  // not marked
  for (int i = 0; i < 2; ++i) {
    auto r = test_run(prog, ect0);
    CHECK(r.ret == TC_ACT_OK);
    REQUIRE(r.out.size() == ect0.size());
    CHECK((r.out[15] & 3) == 3);                  // CE
    CHECK(ip_checksum(r.out.data() + 14, 20) == 0);  // header checksum still valid
  }
  CHECK(test_run(prog, ect0).ret == TC_ACT_SHOT);   // beyond the horizon
  CHECK(test_run(prog, frame(100, 0)).ret == TC_ACT_SHOT);  // non-ECT too
  auto s = state_of(p, Hook::HostIngress);
  CHECK(s.passed_pkts == 3);
  CHECK(s.marked_pkts == 2);
  CHECK(s.dropped_pkts == 2);
}

TEST_CASE("token bucket: packets that are not ECN-capable pass unchanged up to the horizon (no early drop)") {
  Node node;
  PrivateBpffs fs(node);
  Programs p = load(fs);
  // As above (800 bit/s, 100-byte frames of 1 s, empty bucket) with mark 0.5 s, horizon 3.5 s.
  REQUIRE(p.write({kLo, PLUMB_BW_HOOK_HOST_INGRESS}, entry(800, 0, 500'000'000, 3'500'000'000)));
  const int prog = p.token_bucket_fd(Hook::HostIngress);
  auto not_ect = frame(100, 0);
  for (int i = 1; i <= 3; ++i) {  // deficits of 1, 2, 3 s: all beyond mark, within the horizon
    CAPTURE(i);
    auto r = test_run(prog, not_ect);
    CHECK(r.ret == TC_ACT_OK);
    CHECK(r.out == not_ect);  // not a byte changed
  }
  CHECK(test_run(prog, not_ect).ret == TC_ACT_SHOT);  // 4 s > horizon
  auto s = state_of(p, Hook::HostIngress);
  CHECK(s.passed_pkts == 3);
  CHECK(s.marked_pkts == 0);
  CHECK(s.dropped_pkts == 1);
}

TEST_CASE("token bucket: a GSO skb is charged the headers of every segment") {
  Node node;
  PrivateBpffs fs(node);
  Programs p = load(fs);
  REQUIRE(p.write({kLo, PLUMB_BW_HOOK_HOST_INGRESS}, entry(1'000'000'000, 1'000'000'000, 0, 0)));
  auto f = frame(3000, 0);
  __sk_buff ctx{};
  ctx.gso_segs = 4;
  ctx.gso_size = 736;
  CHECK(test_run(p.token_bucket_fd(Hook::HostIngress), f, 1, &ctx).ret == TC_ACT_OK);
  auto s = state_of(p, Hook::HostIngress);
  CHECK(s.passed_pkts == 1);
  CHECK(s.passed_bytes == 3000 + 3 * (14 + 20 + 20));  // Ethernet + IPv4 + TCP repeated 3 more times
}

TEST_CASE("EDT program: departures are stamped at the rate, CE beyond mark, drop beyond the horizon") {
  Node node;
  PrivateBpffs fs(node);
  Programs p = load(fs);
  // 16 kbit/s: a 1000-byte frame costs 500 ms. Burst one frame, mark 1.25 s, horizon 2.25 s
  // (every threshold 250 ms away from where the frames land).
  REQUIRE(p.write({kLo, PLUMB_BW_HOOK_HOST_EGRESS}, entry(16'000, 500'000'000, 1'250'000'000, 2'250'000'000)));
  const int prog = p.edt_fd();
  auto f = frame(1000, 1);  // ECT(1)
  uint64_t t0 = mono_ns();
  auto r0 = test_run(prog, f);
  CHECK(r0.ret == TC_ACT_OK);
  CHECK(r0.ctx_out.tstamp == 0);  // the burst covers it: leaves now, not stamped
  uint64_t last = t0;
  for (int i = 1; i <= 4; ++i) {
    CAPTURE(i);
    auto r = test_run(prog, f);
    uint64_t t1 = mono_ns();
    CHECK(r.ret == TC_ACT_OK);
    // departure = start + i * 500 ms (give or take the time the runs took)
    CHECK(r.ctx_out.tstamp >= t0 + static_cast<uint64_t>(i) * 500'000'000);
    CHECK(r.ctx_out.tstamp <= t1 + static_cast<uint64_t>(i) * 500'000'000);
    CHECK(r.ctx_out.tstamp > last);
    last = r.ctx_out.tstamp;
    CHECK((r.out[15] & 3) == (i >= 3 ? 3 : 1));  // delays of 1.5 s and 2 s exceed mark: CE
  }
  CHECK(test_run(prog, f).ret == TC_ACT_SHOT);  // would wait 2.5 s > horizon
  auto s = state_of(p, Hook::HostEgress);
  CHECK(s.passed_pkts == 5);
  CHECK(s.marked_pkts == 2);
  CHECK(s.dropped_pkts == 1);
}

TEST_CASE("loader: a link planted at bpffsDir, at the pin directory or at a pin is refused by name, never followed") {
  Node node;
  PrivateBpffs fs(node);
  namespace sfs = std::filesystem;
  const std::string dir = fs.dir() + "/plumb", target = fs.dir() + "/elsewhere";
  sfs::create_directory(target);
  auto refused = [&](const std::string& at, auto&& r) {
    CAPTURE(at);
    REQUIRE_FALSE(r);
    CAPTURE(r.error().text());
    CHECK(r.error().text().find(at) != std::string::npos);
    CHECK(r.error().sys_errno == ELOOP);
    CHECK(sfs::is_empty(target));  // nothing pinned through the link
  };
  // bpffsDir itself.
  sfs::create_directory_symlink(target, dir);
  refused(dir, Programs::load_or_open(dir));
  refused(dir, Programs::open_existing(dir));
  sfs::remove(dir);
  // The pin directory bandwidth_v<ABI> under it.
  sfs::create_directory(dir);
  const std::string pins = dir + "/bandwidth_v" + std::to_string(PLUMB_BW_ABI_VERSION);
  sfs::create_directory_symlink(target, pins);
  refused(pins, Programs::load_or_open(dir));
  refused(pins, Programs::open_existing(dir));
  sfs::remove(pins);
  // One pin: the real one moved aside and a link put in its place.
  REQUIRE(Programs::load_or_open(dir));
  const std::string state = pins + "/" PLUMB_BW_PIN_MAP_STATE;
  sfs::rename(state, pins + "/moved");
  sfs::create_symlink(pins + "/moved", state);
  refused(state, Programs::open_existing(dir));
}

TEST_CASE("loader: programs are loaded once and pinned; a second open reuses the pins; bucket parameters") {
  Node node;
  PrivateBpffs fs(node);
  std::string dir = fs.dir() + "/plumb";
  auto a = Programs::load_or_open(dir);
  REQUIRE(a);
  auto b = Programs::load_or_open(dir);
  REQUIRE(b);
  auto ida = a->prog_id(Hook::HostIngress);
  auto idb = b->prog_id(Hook::HostIngress);
  REQUIRE(ida);
  REQUIRE(idb);
  CHECK(*ida == *idb);  // the same kernel program: reused, not loaded again
  CHECK(a->mode() == plumb::ebpf::Mode::TokenBucket);  // this kernel has no sch_fq
  auto fq = plumb::ebpf::kernel_has_fq();
  REQUIRE(fq);
  CHECK_FALSE(*fq);
  CHECK(access((dir + "/bandwidth_v2/" PLUMB_BW_PIN_MAP_STATE).c_str(), F_OK) == 0);
  // Not on bpffs: refused with a clear error, nothing created.
  auto bad = Programs::load_or_open(node.dir() + "/not-bpffs");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().msg.find("bpf filesystem") != std::string::npos);
  // DEL-side open of a directory where nothing was loaded: nothing, and nothing loaded.
  auto none = Programs::open_existing(fs.dir() + "/other");
  REQUIRE(none);
  CHECK_FALSE(none->has_value());

  auto bp = plumb::ebpf::bucket_params({50'000'000, 1'000'000});
  REQUIRE(bp);
  CHECK(bp->burst_ns == 20'000'000);             // 1 Mbit at 50 Mbit/s = 20 ms
  CHECK(bp->mark_ns == 10'485'760);              // one 64 KiB skb at 50 Mbit/s
  CHECK(bp->horizon_ns == 200'000'000);          // TCP's minimum RTO
  auto slow = plumb::ebpf::bucket_params({1'000'000, 1'000'000});
  REQUIRE(slow);
  CHECK(slow->mark_ns == 524'288'000);           // one 64 KiB skb at 1 Mbit/s
  CHECK(slow->horizon_ns == 524'288'000 * 3);    // mark + two 64 KiB skbs: larger than 200 ms
  CHECK_FALSE(plumb::ebpf::bucket_params({0, 1}));
  CHECK_FALSE(plumb::ebpf::bucket_params({1, 0}));
}

TEST_CASE("loader: concurrent first loads by separate processes converge on one set of pins") {
  Node node;
  PrivateBpffs fs(node);
  std::string dir = fs.dir() + "/plumb";
  // Four processes (as four concurrent CNI ADDs on a fresh node) race to load and pin; each
  // reports the kernel id of the program it ended up with through a pipe.
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  std::vector<pid_t> kids;
  for (int i = 0; i < 4; ++i) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      auto p = Programs::load_or_open(dir);
      uint32_t id = 0;
      if (p) {
        auto got = p->prog_id(Hook::HostIngress);
        if (got) id = *got;
      }
      ssize_t n = write(fds[1], &id, sizeof id);
      _exit(n == sizeof id && id != 0 ? 0 : 1);
    }
    kids.push_back(pid);
  }
  close(fds[1]);
  for (pid_t k : kids) {
    int status = 0;
    REQUIRE(waitpid(k, &status, 0) == k);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  std::set<uint32_t> ids;
  uint32_t id = 0;
  while (read(fds[0], &id, sizeof id) == sizeof id) ids.insert(id);
  close(fds[0]);
  CHECK(ids.size() == 1);  // everyone uses the winner's programs
  std::set<std::string> entries;
  for (auto& e : std::filesystem::directory_iterator(dir)) entries.insert(e.path().filename().string());
  CHECK(entries == std::set<std::string>{"bandwidth_v2"});  // no temporary directory left behind
  auto p = Programs::load_or_open(dir);
  REQUIRE(p);
  CHECK(ids.count(*p->prog_id(Hook::HostIngress)) == 1);
}
