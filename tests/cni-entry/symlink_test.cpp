// No write follows a planted link: a symbolic link at each path plumb writes under stateDir,
// host-local's dataDir and storeDir (lock files, record directories, address files,
// last_reserved_ip, network-status and its owner file, the directories holding them) makes the
// verb fail naming that path, and the link's target is neither created nor changed. And every
// directory and file plumb creates has the mode plumb asks for, whatever the runtime's umask.
// (Device-info and the engine's Dir itself: tests/engine/devinfo, tests/engine/base/file_test.)
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "tests/support/bounded_run.hpp"
#include "tests/support/kube_cluster.hpp"
#include "tests/support/pod_fixture.hpp"

using plumb::test::BoundedProc;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::read_file;
using plumb::test::write_file;
namespace fs = std::filesystem;

namespace {

struct Planted {
  Node node;
  PodFixture fx{node};
  std::string victim_file = node.dir() + "/victim";
  std::string victim_dir = node.dir() + "/victim-dir";
  int n = 0;

  Planted() {
    write_file(victim_file, "precious");
    fs::create_directories(victim_dir);
    fx.add_pod("default", "web", "");
    // One ADD and DEL first: the directories plumb keeps (state, IPAM, status) exist, as on a node.
    REQUIRE(add(node.add_netns("warm")).exit_code == 0);
    REQUIRE(verb("DEL", "/run/netns/warm").exit_code == 0);
  }
  std::string cid() const { return "ctr-" + std::to_string(n); }
  std::string next_key() const { return "ctr-" + std::to_string(n + 1) + ":eth0"; }
  BoundedProc verb(const std::string& command, const std::string& netns, const std::string& extra = {}, mode_t umask = 022) const {
    return plumb::test::run_bounded({plumb::test::plumb_binary()},
                                    {{"CNI_COMMAND", command}, {"CNI_CONTAINERID", cid()}, {"CNI_NETNS", netns}, {"CNI_IFNAME", "eth0"},
                                     {"CNI_PATH", "/usr/lib/cni"}, {"CNI_ARGS", "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web"}},
                                    fx.config(extra), {.umask = umask});
  }
  BoundedProc add(const std::string& netns, const std::string& extra = {}) {
    ++n;
    return verb("ADD", netns, extra);
  }
  /// The next ADD, with a link planted at `at` first (to the victim file, or directory when `dir`),
  /// fails naming `at`; the victim is untouched and no interface is left in the pod.
  void refused(const std::string& at, bool dir, const std::string& extra = {}) {
    CAPTURE(at);
    fs::create_directories(fs::path(at).parent_path());
    fs::remove(at);  // the file plumb made there before (lock, cursor, status), if any
    fs::create_symlink(dir ? victim_dir : victim_file, at);
    const std::string pod = node.add_netns("pod" + std::to_string(n + 1));
    BoundedProc p = add(pod, extra);
    INFO(p.out, p.err);
    CHECK(p.exited());
    CHECK(p.exit_code == 1);
    CHECK(p.cni_error().second.find(at) != std::string::npos);
    CHECK(read_file(victim_file) == "precious");
    CHECK(fs::is_empty(victim_dir));
    CHECK(plumb::test::link_names("pod" + std::to_string(n)) == std::set<std::string>{"lo"});
    fs::remove(at);
    (void)verb("DEL", pod);  // whatever the failed ADD left is removed
  }
};

}  // namespace

TEST_CASE("a link planted at any path plumb writes is refused by name and never followed") {
  Planted p;
  const std::string state = p.fx.state(), ipam = p.fx.ipam_dir() + "/default-net", status = p.fx.store() + "/status/default";
  p.refused(state + "/locks/" + p.next_key(), false);                      // the key's lock file
  p.refused(state + "/containers/" + p.next_key(), true);                  // its record directory
  p.refused(ipam + "/lock", false);                                         // host-local's lock
  p.refused(ipam + "/last_reserved_ip.0", false);                           // host-local's round-robin cursor
  p.refused(status + "/web.owner", false, R"("statusErrorsFatal": true)");  // network-status owner
  p.refused(status + "/web.json", false, R"("statusErrorsFatal": true)");   // network-status
  fs::remove_all(status);
  p.refused(status, true, R"("statusErrorsFatal": true)");                  // the namespace's status directory
  fs::remove_all(ipam);
  p.refused(ipam, true);                                                    // host-local's network directory
  fs::rename(state + "/locks", state + "/locks.real");
  p.refused(state + "/locks", true);                                        // the locks directory itself
}

TEST_CASE("links planted at the IPAMClaim paths (GC records and their lock, storeDir's status file) are refused by name") {
  Planted p;
  p.fx.add_nad("default", "blue", plumb::test::bridge_net("br-blue", "198.51.100.0/24", p.fx.ipam_dir()));
  p.fx.add_pod("default", "web", R"([{"name": "blue", "ipam-claim-reference": "vm-a.blue"}])");
  const std::string store_ns = p.fx.store() + "/ipamclaims/default", claims = p.fx.state() + "/ipamclaims";
  write_file(store_ns + "/vm-a.blue.yaml",
             "apiVersion: k8s.cni.cncf.io/v1alpha1\nkind: IPAMClaim\nmetadata:\n  name: vm-a.blue\n  namespace: default\n"
             "spec:\n  network: blue\n  interface: net1\n");
  p.refused(claims + "/lock", false);    // the claims lock
  p.refused(claims + "/default", true);  // the namespace's GC record directory
  const std::string pod = p.node.add_netns("claim");
  REQUIRE(p.add(pod).exit_code == 0);
  REQUIRE(p.verb("DEL", pod).exit_code == 0);
  REQUIRE(fs::exists(claims + "/default/vm-a.blue/blue.json"));
  REQUIRE(fs::exists(store_ns + "/vm-a.blue.status.json"));

  // storeDir: the claim is gone and the namespace's directory is a link to one that still holds
  // a status file: plumb does not remove it through the link.
  const std::string victim_store = p.node.dir() + "/victim-store";
  fs::rename(store_ns, victim_store);
  fs::remove(victim_store + "/vm-a.blue.yaml");
  fs::create_directory_symlink(victim_store, store_ns);
  BoundedProc add = p.add(p.node.add_netns("claim2"));
  INFO(add.out, add.err);
  CHECK(add.exit_code == 1);
  CHECK(add.cni_error().second.find(store_ns) != std::string::npos);
  CHECK(fs::exists(victim_store + "/vm-a.blue.status.json"));
  fs::remove(store_ns);
  fs::rename(victim_store, store_ns);

  // GC of the deleted claim: its record directory is a link; nothing behind it is released.
  const std::string victim_claim = p.node.dir() + "/victim-claim";
  fs::rename(claims + "/default/vm-a.blue", victim_claim);
  fs::create_directory_symlink(victim_claim, claims + "/default/vm-a.blue");
  const auto held = plumb::test::PodFixture::files_under(p.fx.ipam_dir() + "/blue");
  const std::string conf = p.fx.config({}, "1.1.0");
  auto gc = plumb::test::run_bounded({plumb::test::plumb_binary()}, {{"CNI_COMMAND", "GC"}, {"CNI_PATH", "/usr/lib/cni"}},
                                     conf.substr(0, conf.rfind('}')) + R"(, "cni.dev/valid-attachments": []})");
  INFO(gc.out, gc.err);
  CHECK(gc.exit_code == 1);
  CHECK(gc.cni_error().second.find(claims + "/default/vm-a.blue") != std::string::npos);
  CHECK(fs::exists(victim_claim + "/blue.json"));
  CHECK(plumb::test::PodFixture::files_under(p.fx.ipam_dir() + "/blue") == held);  // the claim's address is kept
}

TEST_CASE("a link planted at a key's quarantine directory is refused by name: the damaged record stays, the target untouched") {
  Planted p;
  const std::string pod = p.node.add_netns("pod");
  REQUIRE(p.add(pod).exit_code == 0);
  const std::string key = p.cid() + ":eth0", rec = p.fx.state() + "/containers/" + key + "/0-eth0.json";
  write_file(rec, "{\"damaged\": ");
  const std::string at = p.fx.state() + "/quarantine/" + key;
  fs::create_directories(p.fx.state() + "/quarantine");
  fs::create_directory_symlink(p.victim_dir, at);
  BoundedProc del = p.verb("DEL", pod);
  INFO(del.out, del.err);
  CHECK(del.exit_code == 1);
  CHECK(del.cni_error().second.find(at) != std::string::npos);
  CHECK(fs::is_empty(p.victim_dir));
  CHECK(read_file(rec) == "{\"damaged\": ");  // kept where it was: nothing is forgotten
  fs::remove(at);
  (void)p.verb("DEL", pod);
}

TEST_CASE("a link planted at the log file is never written through") {
  Planted p;
  const std::string log = p.node.dir() + "/plumb.log";
  fs::create_symlink(p.victim_file, log);
  const std::string pod = p.node.add_netns("pod");
  BoundedProc add = p.add(pod, R"("logFile": ")" + log + R"(")");
  INFO(add.out, add.err);
  CHECK(add.exit_code == 0);
  CHECK(read_file(p.victim_file) == "precious");
  fs::remove(log);
  CHECK(p.verb("DEL", pod).exit_code == 0);
  const std::string again = p.node.add_netns("again");
  CHECK(p.add(again, R"("logFile": ")" + log + R"(")").exit_code == 0);
  CHECK(read_file(log).find("ADD " + p.cid()) != std::string::npos);  // the same setting logs once no link is there
  CHECK(p.verb("DEL", again).exit_code == 0);
}

TEST_CASE("links planted at address files are taken addresses: skipped, never written through") {
  Planted p;
  const std::string ipam = p.fx.ipam_dir() + "/default-net";
  for (int i = 1; i <= 10; ++i) fs::create_symlink(p.victim_file, ipam + "/203.0.113." + std::to_string(i));
  const std::string pod = p.node.add_netns("pod");
  BoundedProc add = p.add(pod);
  INFO(add.out, add.err);
  CHECK(add.exit_code == 0);
  CHECK(add.out.find("203.0.113.11/24") != std::string::npos);
  CHECK(read_file(p.victim_file) == "precious");
  for (int i = 1; i <= 10; ++i) CHECK(fs::is_symlink(ipam + "/203.0.113." + std::to_string(i)));
  CHECK(p.verb("DEL", pod).exit_code == 0);
  CHECK(read_file(p.victim_file) == "precious");
}

TEST_CASE("a link where a state record should be is reported by DEL, moved aside, its target untouched") {
  Planted p;
  const std::string pod = p.node.add_netns("pod");
  REQUIRE(p.add(pod).exit_code == 0);
  const std::string rec = p.fx.state() + "/containers/" + p.cid() + ":eth0/0-eth0.json";
  write_file(p.victim_file, read_file(rec));  // a valid record, but not where plumb keeps it
  fs::remove(rec);
  fs::create_symlink(p.victim_file, rec);
  BoundedProc del = p.verb("DEL", pod);
  INFO(del.out, del.err);
  CHECK(del.exit_code == 1);
  CHECK(del.cni_error().first == 6);
  CHECK(del.cni_error().second.find(rec) != std::string::npos);
  CHECK(fs::is_symlink(p.fx.state() + "/quarantine/" + p.cid() + ":eth0/0-eth0.json"));
  CHECK(p.verb("DEL", pod).exit_code == 0);
}

TEST_CASE("under umask 000 nothing plumb creates is group- or world-writable") {
  Planted p;
  fs::remove_all(p.fx.state());
  fs::remove_all(p.fx.ipam_dir());
  fs::remove_all(p.fx.store() + "/status");
  ++p.n;
  const std::string pod = p.node.add_netns("open");
  BoundedProc add = p.verb("ADD", pod, {}, 0);
  INFO(add.out, add.err);
  REQUIRE(add.exit_code == 0);
  std::map<std::string, mode_t> modes;
  auto note = [&](const std::string& path) {
    struct stat st {};
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    modes[path] = st.st_mode & 07777;
  };
  for (const std::string& root : {p.fx.state(), p.fx.ipam_dir(), p.fx.store() + "/status"}) {
    note(root);
    for (const auto& e : fs::recursive_directory_iterator(root)) note(e.path().string());
  }
  for (const auto& [path, mode] : modes) {
    CAPTURE(path);
    CHECK((mode & 0022) == 0);
  }
  CHECK(modes[p.fx.store() + "/status/default"] == 0755);
  CHECK(modes[p.fx.store() + "/status/default/web.json"] == 0644);
  CHECK(modes[p.fx.state() + "/containers/" + p.cid() + ":eth0"] == 0700);
  CHECK(modes[p.fx.state() + "/containers/" + p.cid() + ":eth0/0-eth0.json"] == 0600);
  CHECK(modes[p.fx.state() + "/locks/" + p.cid() + ":eth0"] == 0600);
  CHECK(modes[p.fx.ipam_dir() + "/default-net"] == 0755);
  CHECK(modes[p.fx.ipam_dir() + "/default-net/lock"] == 0644);
  CHECK(p.verb("DEL", pod).exit_code == 0);
}
