// Issue 3's guarantees, against the real kernel in private node namespaces through the real
// binaries: DEL is total and idempotent, a SIGKILLed ADD is fully removed by the following DEL,
// GC removes exactly the stale attachments, CRI's repeated ADD, hostile input, full/read-only
// state directories, and 100 pods through 4 concurrent workers.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "engine/base/ip.hpp"
#include "tests/support/pod_fixture.hpp"
#include "tests/support/scale.hpp"

using plumb::test::address_files;
using plumb::test::ip_json;
using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;

namespace {

std::string bridge_nad(const std::string& bridge, const std::string& subnet, const std::string& ipam_dir) {
  return R"({"cniVersion": "0.4.0", "type": "bridge", "bridge": ")" + bridge +
         R"(", "ipMasq": true, "ipam": {"type": "host-local", "dataDir": ")" + ipam_dir + R"(", "ranges": [[{"subnet": ")" +
         subnet + R"("}]]}})";
}

/// Pod addresses in plumb's masquerade maps (elements), from `nft -j`.
size_t masq_elements() {
  Proc p = plumb::test::sh("nft -j list map inet plumb masq4 2>/dev/null; nft -j list map inet plumb masq6 2>/dev/null");
  size_t n = 0;
  for (size_t pos = 0; (pos = p.out.find("\"jump\"", pos)) != std::string::npos; ++pos) ++n;
  return n;
}

void setup(const PodFixture& fx) {
  fx.add_nad("default", "blue", bridge_nad("br-blue", "198.51.100.0/24", fx.ipam_dir()));
  fx.add_nad("default", "green", bridge_nad("br-green", "192.0.2.0/24", fx.ipam_dir()));
}

/// The node holds nothing of any pod: only `base` links, no IP files, records, elements, status.
/// With bridges_may_stay, the networks' bridges may remain (after a completed ADD, DEL leaves the
/// shared bridges as the reference plugin does); after an ADD that never completed they must go.
void check_clean(const PodFixture& fx, std::set<std::string> base, const std::string& pod_ns, bool bridges_may_stay = false) {
  auto now = link_names("");
  if (bridges_may_stay) {
    for (auto* b : {"plumb0", "br-blue", "br-green"}) now.erase(b), base.erase(b);
  }
  CHECK(now == base);
  if (!pod_ns.empty()) CHECK(link_names(pod_ns) == std::set<std::string>{"lo"});
  std::string leftover;
  for (auto& f : address_files(fx.ipam_dir())) leftover += f + " holds \"" + plumb::test::read_file(f) + "\"\n";
  INFO("IP files left: ", leftover);
  CHECK(address_files(fx.ipam_dir()).empty());
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
  CHECK(masq_elements() == 0);
  CHECK(PodFixture::files_under(fx.store() + "/status").empty());
}

}  // namespace

TEST_CASE("SIGKILL after every persisted intent of an ADD (plumb-faulty): the following DEL removes everything") {
  Node node;
  PodFixture fx(node);
  setup(fx);
  fx.add_pod("default", "crash", "blue,green");
  auto base = link_names("");
  std::string pod = node.add_netns("crash");
  unsigned killed = 0;
  for (unsigned step = 1; step < 60; ++step) {
    CAPTURE(step);
    Proc add = fx.run_with(plumb::test::plumb_faulty_binary(), {{"PLUMB_FAULT_AFTER_STEP", std::to_string(step)}}, "ADD",
                           "ctr-crash", pod, "default", "crash", fx.config());
    if (add.exit_code == 0) {
      // Past the last intent: the ADD completed. DEL it and stop.
      REQUIRE(fx.run("DEL", "ctr-crash", pod, "default", "crash", fx.config()).exit_code == 0);
      check_clean(fx, base, "crash", /*bridges_may_stay=*/true);
      break;
    }
    REQUIRE(add.exit_code == 128 + SIGKILL);
    ++killed;
    Proc del = fx.run("DEL", "ctr-crash", pod, "default", "crash", fx.config());
    INFO(del.out, del.err);
    REQUIRE(del.exit_code == 0);
    check_clean(fx, base, "crash");
  }
  // default (bridge: bridge?, veth, ipam, 2x masq) + two networks: at least 10 kill points.
  CHECK(killed >= 10);
}

TEST_CASE("SIGKILL at random moments of many ADDs (timed): the following DEL removes everything") {
  Node node;
  PodFixture fx(node);
  setup(fx);
  fx.add_pod("default", "timed", "blue,green");
  std::string pod = node.add_netns("timed");
  // One complete ADD/DEL first, so the shared bridges exist and every round is comparable.
  REQUIRE(fx.run("ADD", "ctr-timed", pod, "default", "timed", fx.config()).exit_code == 0);
  REQUIRE(fx.run("DEL", "ctr-timed", pod, "default", "timed", fx.config()).exit_code == 0);
  auto base = link_names("");
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> delay_us(0, 6000);
  int killed_midway = 0;
  for (int round = 0; round < 25; ++round) {
    CAPTURE(round);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      Proc p = fx.run("ADD", "ctr-timed", pod, "default", "timed", fx.config());
      _exit(p.exit_code == 0 ? 0 : 1);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
    // Kill the plumb process (our grandchild) and the child that waits for it: the whole group
    // would include us, so find plumb by its parent.
    std::string pids = plumb::test::sh("pgrep -P " + std::to_string(pid)).out;
    for (auto& line : std::vector<std::string>{pids}) {
      if (!line.empty()) {
        pid_t p = static_cast<pid_t>(std::stol(line));
        if (::kill(p, SIGKILL) == 0) ++killed_midway;
      }
    }
    int status = 0;
    waitpid(pid, &status, 0);
    Proc del = fx.run("DEL", "ctr-timed", pod, "default", "timed", fx.config());
    INFO(del.out, del.err);
    REQUIRE(del.exit_code == 0);
    check_clean(fx, base, "timed");
  }
  MESSAGE("ADDs killed midway: " << killed_midway << " of 25");
}

TEST_CASE("DEL of an unknown container, with an empty CNI_NETNS, with a deleted netns, and twice, succeeds") {
  Node node;
  PodFixture fx(node);
  setup(fx);
  auto base = link_names("");
  CHECK(fx.run("DEL", "never-added", "", "default", "nobody", fx.config()).exit_code == 0);
  CHECK(fx.run("DEL", "never-added", "/run/netns/does-not-exist", "default", "nobody", fx.config()).exit_code == 0);

  fx.add_pod("default", "gone", "blue");
  std::string pod = node.add_netns("gone");
  REQUIRE(fx.run("ADD", "ctr-gone", pod, "default", "gone", fx.config()).exit_code == 0);
  node.del_netns("gone");
  Proc del = fx.run("DEL", "ctr-gone", "", "default", "gone", fx.config());  // CNI_NETNS empty
  INFO(del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(fx.run("DEL", "ctr-gone", pod, "default", "gone", fx.config()).exit_code == 0);
  CHECK(ip_json("link show type veth").Size() == 0);
  CHECK(address_files(fx.ipam_dir()).empty());
  CHECK(PodFixture::files_under(fx.state()).empty());  // no records and no lock files
  CHECK(masq_elements() == 0);
  (void)base;
}

TEST_CASE("GC removes every attachment not in cni.dev/valid-attachments and nothing that is listed") {
  Node node;
  PodFixture fx(node);
  setup(fx);
  std::vector<std::string> pods;
  for (int i = 1; i <= 3; ++i) {
    std::string name = "gc" + std::to_string(i);
    fx.add_pod("default", name, "blue");
    pods.push_back(node.add_netns(name));
    REQUIRE(fx.run("ADD", "ctr-" + name, pods.back(), "default", name, fx.config()).exit_code == 0);
  }
  CHECK(address_files(fx.ipam_dir()).size() == 3 * 3);  // v4 + v6 default + blue per pod
  std::string gc_conf = fx.config(
      R"("cni.dev/valid-attachments": [{"containerID": "ctr-gc1", "ifname": "eth0"}], )"
      R"("cni.dev/attachments": [{"containerID": "ctr-gc3", "ifname": "eth0"}])",
      "1.1.0");
  Proc gc = fx.run("GC", "", "", "default", "", gc_conf);
  INFO(gc.out, gc.err);
  CHECK(gc.exit_code == 0);
  CHECK(link_names("gc2") == std::set<std::string>{"lo"});
  CHECK(link_names("gc1") == std::set<std::string>{"lo", "eth0", "net1"});
  CHECK(link_names("gc3") == std::set<std::string>{"lo", "eth0", "net1"});
  CHECK(address_files(fx.ipam_dir()).size() == 2 * 3);
  CHECK(masq_elements() == 2 * 3);
  CHECK_FALSE(std::filesystem::exists(fx.state() + "/containers/ctr-gc2:eth0"));
  CHECK_FALSE(std::filesystem::exists(fx.state() + "/locks/ctr-gc2:eth0"));
  // The kept pods are intact: CHECK passes.
  CHECK(fx.run("CHECK", "ctr-gc1", pods[0], "default", "gc1", fx.config()).exit_code == 0);
  CHECK(fx.run("CHECK", "ctr-gc3", pods[2], "default", "gc3", fx.config()).exit_code == 0);
}

TEST_CASE("CRI semantics: an ADD repeated for existing attachments returns the recorded result") {
  Node node;
  PodFixture fx(node);
  setup(fx);
  fx.add_pod("default", "cri", "blue");
  std::string pod = node.add_netns("cri");
  Proc a1 = fx.run("ADD", "ctr-cri", pod, "default", "cri", fx.config());
  REQUIRE(a1.exit_code == 0);
  Proc a2 = fx.run("ADD", "ctr-cri", pod, "default", "cri", fx.config());
  INFO(a2.out, a2.err);
  CHECK(a2.exit_code == 0);
  CHECK(a2.out == a1.out);
  CHECK(address_files(fx.ipam_dir()).size() == 3);
  CHECK(fx.run("DEL", "ctr-cri", pod, "default", "cri", fx.config()).exit_code == 0);
}

TEST_CASE("namespaceIsolation: a pod may use NADs of its namespace, default and globalNamespaces only") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("tenant-b", "secret", bridge_nad("br-secret", "198.51.100.0/24", fx.ipam_dir()));
  fx.add_nad("shared", "common", bridge_nad("br-common", "192.0.2.0/24", fx.ipam_dir()));
  std::string pod = node.add_netns("iso");
  std::string conf = fx.config(R"("namespaceIsolation": true, "globalNamespaces": "shared")");
  fx.add_pod("tenant-a", "iso", "tenant-b/secret");
  Proc add = fx.run("ADD", "ctr-iso", pod, "tenant-a", "iso", conf);
  CHECK(add.exit_code != 0);
  CHECK(add.out.find("tenant-a/iso") != std::string::npos);
  CHECK(add.out.find("tenant-b/secret") != std::string::npos);
  CHECK(add.out.find("namespaceIsolation") != std::string::npos);
  CHECK(link_names("iso") == std::set<std::string>{"lo"});
  fx.add_pod("tenant-a", "iso", "shared/common");
  Proc ok = fx.run("ADD", "ctr-iso", pod, "tenant-a", "iso", conf);
  INFO(ok.out, ok.err);
  CHECK(ok.exit_code == 0);
  CHECK(fx.run("DEL", "ctr-iso", pod, "tenant-a", "iso", conf).exit_code == 0);
}

TEST_CASE("hostile input never becomes a path or a crash") {
  Node node;
  PodFixture fx(node);
  std::string pod = node.add_netns("hostile");
  struct Case {
    std::string container_id, ifname, pod_ns, pod_name;
    const char* must_name;
  } cases[] = {
      {"../../etc", "eth0", "default", "hostile", "../../etc"},
      {"ctr-ok", "eth0/../x", "default", "hostile", "eth0/../x"},
      {"ctr-ok", "eth0", "../../etc", "hostile", "../../etc"},
      {"ctr-ok", "eth0", "default", "../../passwd", "../../passwd"},
  };
  for (auto& c : cases) {
    Proc add = fx.run("ADD", c.container_id, pod, c.pod_ns, c.pod_name, fx.config(), c.ifname);
    INFO(c.container_id, " ", c.ifname, " ", c.pod_ns, " ", c.pod_name, " -> ", add.out, add.err);
    CHECK(add.exit_code != 0);
    CHECK(add.exit_code < 128);  // an error, not a crash
    CHECK(add.out.find(c.must_name) != std::string::npos);
    CHECK(link_names("hostile") == std::set<std::string>{"lo"});
  }
  CHECK_FALSE(std::filesystem::exists(node.dir() + "/etc"));
  // A NAD reference that tries to leave the store.
  fx.add_pod("default", "hostile", "../../etc/passwd");
  Proc add = fx.run("ADD", "ctr-h2", pod, "default", "hostile", fx.config(R"("strictAnnotations": true)"));
  CHECK(add.exit_code != 0);
  CHECK(add.exit_code < 128);
  CHECK(link_names("hostile") == std::set<std::string>{"lo"});
  // Garbage on stdin.
  Proc garbage = fx.run("ADD", "ctr-h3", pod, "default", "hostile", "{\"cniVersion\": \"1.0.0\", \"name\": [");
  CHECK(garbage.exit_code == 1);
  CHECK(garbage.out.find("\"code\":6") != std::string::npos);
}

TEST_CASE("a full state directory fails the ADD cleanly; a read-only one still lets DEL tear down the kernel side") {
  Node node;
  PodFixture fx(node);
  setup(fx);
  fx.add_pod("default", "fault", "blue");
  auto base = link_names("");
  std::string pod = node.add_netns("fault");
  std::filesystem::create_directories(fx.state());
  REQUIRE(mount("tmpfs", fx.state().c_str(), "tmpfs", 0, "size=64k") == 0);
  struct Unmount {
    std::string path;
    ~Unmount() { umount2(path.c_str(), MNT_DETACH); }
  } unmount{fx.state()};

  // Full: fill the tmpfs, then ADD.
  plumb::test::sh("dd if=/dev/zero of=" + fx.state() + "/filler bs=4k count=100 2>/dev/null");
  Proc add = fx.run("ADD", "ctr-fault", pod, "default", "fault", fx.config());
  INFO(add.out, add.err);
  CHECK(add.exit_code != 0);
  CHECK(add.out.find("No space left on device") != std::string::npos);
  CHECK(link_names("") == base);
  CHECK(link_names("fault") == std::set<std::string>{"lo"});
  CHECK(address_files(fx.ipam_dir()).empty());
  std::filesystem::remove(fx.state() + "/filler");

  // Read-only after a good ADD: DEL tears the kernel side down and reports that the records
  // could not be removed; once writable again, a DEL completes.
  REQUIRE(fx.run("ADD", "ctr-fault", pod, "default", "fault", fx.config()).exit_code == 0);
  REQUIRE(mount(nullptr, fx.state().c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) == 0);
  Proc ro_add = fx.run("ADD", "ctr-other", node.add_netns("other"), "default", "other", fx.config());
  CHECK(ro_add.exit_code != 0);
  CHECK(ro_add.out.find("Read-only file system") != std::string::npos);
  CHECK(link_names("other") == std::set<std::string>{"lo"});
  Proc del = fx.run("DEL", "ctr-fault", pod, "default", "fault", fx.config());
  INFO(del.out, del.err);
  CHECK(del.exit_code != 0);
  CHECK(del.out.find("Read-only file system") != std::string::npos);
  CHECK(link_names("fault") == std::set<std::string>{"lo"});
  CHECK(ip_json("link show type veth").Size() == 0);
  CHECK(address_files(fx.ipam_dir()).empty());
  REQUIRE(mount(nullptr, fx.state().c_str(), nullptr, MS_REMOUNT, nullptr) == 0);
  CHECK(fx.run("DEL", "ctr-fault", pod, "default", "fault", fx.config()).exit_code == 0);
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
}

TEST_CASE("100 pods (24 under the sanitizers) added and deleted by 4 concurrent workers leave no link, IP file, element or record") {
  Node node;
  PodFixture fx(node);
  setup(fx);
  auto base = link_names("");
  constexpr int kPods = plumb::test::pod_count(100, 24), kWorkers = 4;
  std::vector<std::string> paths;
  for (int i = 0; i < kPods; ++i) {
    std::string name = "w" + std::to_string(i);
    fx.add_pod("default", name, i % 2 ? "blue" : "green");
    paths.push_back(node.add_netns(name));
  }
  std::string conf = fx.config();
  std::vector<pid_t> workers;
  for (int w = 0; w < kWorkers; ++w) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int failures = 0;
      for (int i = w; i < kPods; i += kWorkers) {
        std::string name = "w" + std::to_string(i);
        Proc a = fx.run("ADD", "ctr-" + name, paths[static_cast<size_t>(i)], "default", name, conf);
        if (a.exit_code != 0) ++failures, std::fprintf(stderr, "ADD %s: %s\n", name.c_str(), a.out.c_str());
      }
      for (int i = w; i < kPods; i += kWorkers) {
        std::string name = "w" + std::to_string(i);
        Proc d = fx.run("DEL", "ctr-" + name, paths[static_cast<size_t>(i)], "default", name, conf);
        if (d.exit_code != 0) ++failures, std::fprintf(stderr, "DEL %s: %s\n", name.c_str(), d.out.c_str());
      }
      _exit(failures == 0 ? 0 : 1);
    }
    workers.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : workers) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  CHECK(failed == 0);
  // The bridges stay (shared, as the reference plugin leaves them); nothing else does.
  auto now = link_names("");
  for (auto& b : {"plumb0", "br-blue", "br-green"}) now.erase(b);
  for (auto& b : {"plumb0", "br-blue", "br-green"}) base.erase(b);
  CHECK(now == base);
  CHECK(ip_json("link show type veth").Size() == 0);
  CHECK(address_files(fx.ipam_dir()).empty());
  CHECK(PodFixture::files_under(fx.state()).empty());
  CHECK(masq_elements() == 0);
  CHECK(PodFixture::files_under(fx.store() + "/status").empty());
}

TEST_CASE("CHECK verifies every attachment from the kernel and names the first difference") {
  Node node;
  PodFixture fx(node);
  setup(fx);
  fx.add_pod("default", "chk", "blue");
  std::string pod = node.add_netns("chk");
  Proc add = fx.run("ADD", "ctr-chk", pod, "default", "chk", fx.config());
  REQUIRE(add.exit_code == 0);
  std::string conf = fx.config(R"("prevResult": )" + add.out);
  REQUIRE(fx.run("CHECK", "ctr-chk", pod, "default", "chk", conf).exit_code == 0);
  // Each tamper is undone before the next (CHECK reports the first difference), except the last two:
  // the default network (eth0) is checked before net1.
  struct Tamper {
    const char* cmd;
    const char* must_name;
    const char* undo;
  } tampers[] = {
      {"ip -n chk route del default", "route 0.0.0.0/0 via 203.0.113.1", "ip -n chk route add default via 203.0.113.1 dev eth0"},
      {"ip -n chk link set dev net1 mtu 1400", "MTU 1400", "ip -n chk link set dev net1 mtu 1500"},
      {"ip -n chk addr flush dev net1", "lacks address 198.51.100.", nullptr},
      {"ip -n chk link set dev eth0 down", "eth0 is down", nullptr},
  };
  for (auto& t : tampers) {
    REQUIRE(plumb::test::sh(t.cmd).exit_code == 0);
    Proc check = fx.run("CHECK", "ctr-chk", pod, "default", "chk", conf);
    INFO(t.cmd, " -> ", check.out);
    CHECK(check.exit_code != 0);
    CHECK(check.out.find(t.must_name) != std::string::npos);
    if (t.undo != nullptr) {
      REQUIRE(plumb::test::sh(t.undo).exit_code == 0);
      CHECK(fx.run("CHECK", "ctr-chk", pod, "default", "chk", conf).exit_code == 0);
    }
  }
  CHECK(fx.run("CHECK", "never-added", pod, "default", "chk", conf).out.find("\"code\":3") != std::string::npos);
  CHECK(fx.run("DEL", "ctr-chk", pod, "default", "chk", fx.config()).exit_code == 0);
}

TEST_CASE("crash leftovers in host-local's directory: an empty address file is reclaimed by the ADD that meets it, not looked for by DEL") {
  Node node;
  PodFixture fx(node);
  std::string pod = node.add_netns("left");
  REQUIRE(fx.run("ADD", "ctr-left", pod, "default", "left", fx.config()).exit_code == 0);
  std::string dir = fx.ipam_dir() + "/default-net";
  // The address after the last one reserved: where the next ADD looks first.
  auto last = plumb::IpAddr::parse(plumb::test::read_file(dir + "/last_reserved_ip.0"));
  REQUIRE(last);
  REQUIRE(last->is_v4());
  const std::string next = last->str().substr(0, last->str().rfind('.') + 1) + std::to_string(std::stoi(last->str().substr(last->str().rfind('.') + 1)) + 1);
  plumb::test::write_file(dir + "/" + next, "");  // the reference plugin killed between create and write
  // DEL releases the pod's address and looks at nothing else of the network.
  REQUIRE(fx.run("DEL", "ctr-left", pod, "default", "left", fx.config()).exit_code == 0);
  CHECK(std::filesystem::exists(dir + "/" + next));
  // The next ADD meets the empty file first: nobody's, so its address is taken.
  REQUIRE(fx.run("ADD", "ctr-next", pod, "default", "left", fx.config()).exit_code == 0);
  CHECK(plumb::test::read_file(dir + "/" + next) == "ctr-next\r\neth0");
  REQUIRE(fx.run("DEL", "ctr-next", pod, "default", "left", fx.config()).exit_code == 0);
  CHECK(address_files(fx.ipam_dir()).empty());
}
