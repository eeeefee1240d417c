// The embedded local store: NADs and Pod manifests from a directory, network-status files.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "cni-entry/source/source.hpp"
#include "tests/support/syscall_count.hpp"
#include "tests/support/temp_dir.hpp"

using namespace plumb;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// A copy of tests/fixtures/local-store in a fresh /tmp directory, removed at scope exit.
struct Store {
  std::string parent;  // the mkdtemp dir; root is parent/store so escapes would land in parent
  std::string root;
  std::unique_ptr<source::PodSource> src;

  explicit Store(bool with_fixtures = true) {
    char tmpl[] = "/tmp/plumb-store-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    parent = tmpl;
    root = parent + "/store";
    fs::create_directories(root);
    if (with_fixtures) {
      fs::copy(std::string(PLUMB_FIXTURES) + "/local-store", root, fs::copy_options::recursive);
    }
    src = source::make_local_store(root);
  }
  ~Store() {
    std::error_code ec;
    fs::remove_all(parent, ec);
  }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories(fs::path(root + "/" + rel).parent_path());
    std::ofstream(root + "/" + rel) << text;
  }
  /// Every file under parent, relative to it.
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(parent)) {
      if (e.is_regular_file()) out.push_back(fs::relative(e.path(), parent).string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("network_attachment finds NADs across multi-document files, first file wins") {
  Store s;
  auto a = s.src->network_attachment("team-a", "net-a");
  REQUIRE_MESSAGE(a.has_value(), a.error().text());
  CHECK(a->name == "net-a");
  CHECK(a->namespace_ == "team-a");
  CHECK(contains(a->config, "\"br-a\""));

  // Second document of 10-team-a.yaml; 20-default.yml's shadowing copy is not returned.
  auto b = s.src->network_attachment("team-a", "net-b");
  REQUIRE(b.has_value());
  CHECK(contains(b->config, "\"macvlan\""));

  // No metadata.namespace means "default".
  auto d = s.src->network_attachment("default", "net-a");
  REQUIRE(d.has_value());
  CHECK(contains(d->config, "br-default"));

  // .json files are read too; .txt files are not.
  auto c = s.src->network_attachment("team-b", "net-c");
  REQUIRE(c.has_value());
  CHECK(contains(c->config, "ipvlan"));
  auto ignored = s.src->network_attachment("default", "ignored");
  REQUIRE_FALSE(ignored.has_value());
  CHECK(ignored.error().cni_code == cni_code::kNotFound);
}

TEST_CASE("network_attachment: kNotFound names namespace/name and the directory") {
  Store s;
  auto r = s.src->network_attachment("team-b", "net-a");
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kNotFound);
  CHECK(r.error().msg == "NetworkAttachmentDefinition team-b/net-a not found in " + s.root + "/nads");

  Store empty(false);  // no nads/ directory at all
  r = empty.src->network_attachment("default", "net-a");
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kNotFound);
  CHECK(r.error().msg == "NetworkAttachmentDefinition default/net-a not found in " + empty.root + "/nads");
}

TEST_CASE("network_attachment: a malformed NAD file is skipped with a warning naming it; only missing NADs fail") {
  Store s(false);
  s.write("nads/00-junk.yaml", "kind: NetworkAttachmentDefinition\napiVersion: k8s.cni.cncf.io/v1\nmetadata: {name: [\n");
  s.write("nads/01-deep.json", std::string(100000, '[') + std::string(100000, ']'));
  s.write("nads/10-good.yaml", "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: x\n"
                               "  namespace: default\nspec:\n  config: '{\"cniVersion\":\"1.0.0\",\"type\":\"loopback\"}'\n");
  auto found = s.src->network_attachment("default", "x");
  REQUIRE_MESSAGE(found.has_value(), found.error().text());
  CHECK(found->name == "x");
  auto warnings = s.src->take_warnings();
  REQUIRE(warnings.size() == 2);
  CHECK(contains(warnings[0], s.root + "/nads/00-junk.yaml"));
  CHECK(contains(warnings[1], s.root + "/nads/01-deep.json"));
  CHECK(s.src->take_warnings().empty());
  auto missing = s.src->network_attachment("default", "y");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().cni_code == cni_code::kNotFound);
  CHECK(contains(missing.error().msg, "skipped as malformed: 00-junk.yaml, 01-deep.json"));
  CHECK(s.src->take_warnings().empty());  // each malformed file is parsed, and warned about, once
}

TEST_CASE("pod_annotations reads metadata.annotations of the Pod manifest") {
  Store s;
  auto r = s.src->pod_annotations({"team-a", "web-0", ""});
  REQUIRE_MESSAGE(r.has_value(), r.error().text());
  REQUIRE(r->has_value());
  const auto& ann = **r;
  CHECK(ann.size() == 2);
  CHECK(ann.at("k8s.v1.cni.cncf.io/networks") ==
        R"([{"name": "net-a", "interface": "net1"}, {"name": "net-b", "namespace": "team-a"}])");
  CHECK(ann.at("example.com/other") == "42");

  auto plain = s.src->pod_annotations({"default", "plain", ""});
  REQUIRE(plain.has_value());
  REQUIRE(plain->has_value());
  CHECK((*plain)->empty());  // the pod exists, it just has no annotations

  auto missing = s.src->pod_annotations({"default", "no-such-pod", ""});
  REQUIRE(missing.has_value());
  CHECK_FALSE(missing->has_value());

  s.write("pods/default/broken.yaml", "metadata:\n  annotations: [a, b]\n");
  auto broken = s.src->pod_annotations({"default", "broken", ""});
  REQUIRE_FALSE(broken.has_value());
  CHECK(broken.error().cni_code == cni_code::kDecode);
  CHECK(contains(broken.error().msg, s.root + "/pods/default/broken.yaml"));
}

TEST_CASE("network-status is written atomically with its owner and removed on DEL") {
  Store s(false);
  source::PodRef pod{"team-a", "web-0", "uid-1"};
  const std::string path = s.root + "/status/team-a/web-0.json";
  REQUIRE(s.src->write_network_status(pod, R"([{"name":"x","default":true}])", "sandbox-1").has_value());  // dirs created
  CHECK(slurp(path) == R"([{"name":"x","default":true}])");
  CHECK(slurp(s.root + "/status/team-a/web-0.owner") == "sandbox-1");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);

  REQUIRE(s.src->write_network_status(pod, "[]", "sandbox-1").has_value());  // replaced
  CHECK(slurp(path) == "[]");
  CHECK(s.files() == std::vector<std::string>{"store/status/team-a/web-0.json", "store/status/team-a/web-0.owner"});  // no temp files

  REQUIRE(s.src->remove_network_status(pod, "sandbox-1").has_value());
  CHECK_FALSE(fs::exists(path));
  CHECK_FALSE(fs::exists(s.root + "/status/team-a/web-0.owner"));
  CHECK(s.src->remove_network_status(pod, "sandbox-1").has_value());  // already gone: fine
  CHECK(s.src->remove_network_status({"never", "written", ""}, "sandbox-1").has_value());
}

TEST_CASE(
    "network-status: the namespace's directory is opened once by its path and locked through that descriptor: a write "
    "opens 3 files, a removal 2") {
  Store s(false);
  source::PodRef pod{"team-a", "web-0", "uid-1"};
  // The first pod makes the directories and the recycled files' pool.
  REQUIRE(s.src->write_network_status({"team-a", "warm", ""}, "[0]", "sandbox-0").has_value());
  REQUIRE(s.src->remove_network_status({"team-a", "warm", ""}, "sandbox-0").has_value());
  const long write_opens = test::count_syscalls("openat", [&] {
    REQUIRE(s.src->write_network_status(pod, R"([{"name":"x","default":true}])", "sandbox-1").has_value());
  });
  const long remove_opens =
      test::count_syscalls("openat", [&] { REQUIRE(s.src->remove_network_status(pod, "sandbox-1").has_value()); });
  // Write: status/<namespace>, then "<pod>.owner" and "<pod>.json" each written before named.
  // Removal: status/<namespace> and the owner file read.
  CHECK(write_opens == 3);
  CHECK(remove_opens == 2);
  CHECK_FALSE(fs::exists(s.root + "/status/team-a/web-0.json"));
  CHECK_FALSE(fs::exists(s.root + "/status/team-a/web-0.owner"));
}

TEST_CASE("network-status: a killed writer's temporary files are found by name (replaced by the next write, removed by DEL), no listing; other pods' files stay") {
  Store s(false);
  source::PodRef pod{"team-a", "web-0", "uid-1"};
  const std::string dir = s.root + "/status/team-a/";
  REQUIRE(s.src->write_network_status(pod, "[1]", "sandbox-1").has_value());
  // What a writer killed before its rename leaves, for this pod and for another.
  s.write("status/team-a/web-0.json.tmp", "[half");
  s.write("status/team-a/web-0.owner.tmp", "sand");
  s.write("status/team-a/web-1.json.tmp", "[other");
  REQUIRE(s.src->write_network_status(pod, "[2]", "sandbox-1").has_value());  // replaces through them
  CHECK(slurp(dir + "web-0.json") == "[2]");
  CHECK_FALSE(fs::exists(dir + "web-0.json.tmp"));
  CHECK_FALSE(fs::exists(dir + "web-0.owner.tmp"));
  s.write("status/team-a/web-0.json.tmp", "[half");
  s.write("status/team-a/web-0.owner.tmp", "sand");
  REQUIRE(s.src->remove_network_status(pod, "sandbox-1").has_value());
  std::set<std::string> left;
  for (const auto& e : fs::directory_iterator(dir)) left.insert(e.path().filename().string());
  CHECK(left == std::set<std::string>{"web-1.json.tmp"});
}

TEST_CASE("removed network-status files are recycled: the next pod's are those inodes, holding only its bytes") {
  Store s(false);
  auto inode = [](const std::string& p) {
    struct stat st {};
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    return st.st_ino;
  };
  const std::string dir = s.root + "/status/team-a/";
  REQUIRE(s.src->write_network_status({"team-a", "web-0", "uid-1"}, R"([{"name":"a long status of the first pod"}])", "sandbox-1"));
  const std::set<ino_t> first{inode(dir + "web-0.json"), inode(dir + "web-0.owner")};
  REQUIRE(s.src->remove_network_status({"team-a", "web-0", "uid-1"}, "sandbox-1"));
  CHECK(std::distance(fs::directory_iterator(s.root + "/.plumb-recycled"), fs::directory_iterator()) == 2);
  REQUIRE(s.src->write_network_status({"team-a", "web-1", "uid-2"}, "[]", "sandbox-2"));
  CHECK(first == std::set<ino_t>{inode(dir + "web-1.json"), inode(dir + "web-1.owner")});
  CHECK(slurp(dir + "web-1.json") == "[]");
  CHECK(slurp(dir + "web-1.owner") == "sandbox-2");
  CHECK(fs::is_empty(s.root + "/.plumb-recycled"));
}

TEST_CASE("network-status belongs to the sandbox that wrote it: another sandbox's removal leaves it") {
  Store s(false);
  source::PodRef pod{"team-a", "web-0", "uid-1"};
  const std::string path = s.root + "/status/team-a/web-0.json";
  REQUIRE(s.src->write_network_status(pod, "[1]", "sandbox-1").has_value());
  REQUIRE(s.src->write_network_status(pod, "[2]", "sandbox-2").has_value());  // the pod's next sandbox
  REQUIRE(s.src->remove_network_status(pod, "sandbox-1").has_value());       // the old one's DEL, again
  CHECK(slurp(path) == "[2]");
  REQUIRE(s.src->remove_network_status(pod, "sandbox-2").has_value());
  CHECK_FALSE(fs::exists(path));
  // A status file written before owners were recorded goes with any sandbox's DEL, as before.
  s.write("status/team-a/web-0.json", "[0]");
  REQUIRE(s.src->remove_network_status(pod, "sandbox-3").has_value());
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("path-traversal namespaces and names are rejected before any path is formed") {
  Store s;
  const auto before = s.files();
  for (const auto& [ns, name] : std::vector<std::pair<std::string, std::string>>{
           {"../etc", "web-0"}, {"team-a", "a/b"}, {"team-a", ".."}, {"..", "x"}, {"team-a", "../../x"},
           {"", "web-0"}, {"team-a", ""}, {"Team-A", "web-0"}, {"team-a", "Web-0"}, {"a.b", "web-0"}}) {
    CAPTURE(ns);
    CAPTURE(name);
    source::PodRef pod{ns, name, ""};
    for (const auto& err : {s.src->write_network_status(pod, "[]", "c"), s.src->remove_network_status(pod, "c")}) {
      REQUIRE_FALSE(err.has_value());
      CHECK(err.error().cni_code == cni_code::kInvalidConfig);
      CHECK(contains(err.error().msg, "\"" + (nad::is_dns1123_label(ns) ? name : ns) + "\""));
    }
    auto ann = s.src->pod_annotations(pod);
    REQUIRE_FALSE(ann.has_value());
    CHECK(ann.error().cni_code == cni_code::kInvalidConfig);
  }
  for (const auto& [ns, name] : std::vector<std::pair<std::string, std::string>>{
           {"../etc", "net-a"}, {"team-a", "../net-a"}, {"team-a", "a/b"}, {"team-a", "a.b"}}) {
    auto r = s.src->network_attachment(ns, name);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().cni_code == cni_code::kInvalidConfig);
  }
  CHECK(s.files() == before);  // nothing written anywhere
  // A pod name may be a subdomain ("web.0"), a namespace may not.
  CHECK(s.src->write_network_status({"team-a", "web.0", ""}, "[]", "c").has_value());
  CHECK(fs::exists(s.root + "/status/team-a/web.0.json"));
}

TEST_CASE("local store IPAMClaims: read, status.ips written back, gone with the manifest") {
  plumb::test::TempDir d;
  auto store = source::make_local_store(d.path);
  auto missing = store->ipam_claim("default", "vm-a.blue");
  REQUIRE(missing.has_value());
  CHECK_FALSE(missing->has_value());
  CHECK(store->write_ipam_claim_status("default", "vm-a.blue", {{"192.0.2.5/24"}, "vm-a", "2026-01-02T03:04:05Z"})
            .error()
            .cni_code == cni_code::kNotFound);

  d.write("ipamclaims/default/vm-a.blue.yaml",
          "apiVersion: k8s.cni.cncf.io/v1alpha1\nkind: IPAMClaim\nmetadata:\n  name: vm-a.blue\nspec:\n  network: "
          "blue\n  interface: net1\n");
  auto fresh = store->ipam_claim("default", "vm-a.blue");
  REQUIRE(fresh.has_value());
  REQUIRE(fresh->has_value());
  CHECK((*fresh)->network == "blue");
  CHECK((*fresh)->interface == "net1");
  CHECK((*fresh)->ips.empty());

  REQUIRE(store
              ->write_ipam_claim_status("default", "vm-a.blue",
                                        {{"192.0.2.5/24", "2001:db8::5/64"}, "vm-a", "2026-01-02T03:04:05Z"})
              .has_value());
  auto held = store->ipam_claim("default", "vm-a.blue");
  REQUIRE(held.has_value());
  CHECK((*held)->ips == std::vector<std::string>{"192.0.2.5/24", "2001:db8::5/64"});

  fs::remove(d.path + "/ipamclaims/default/vm-a.blue.yaml");
  auto gone = store->ipam_claim("default", "vm-a.blue");
  REQUIRE(gone.has_value());
  CHECK_FALSE(gone->has_value());
  CHECK_FALSE(fs::exists(d.path + "/ipamclaims/default/vm-a.blue.status.json"));

  d.write("ipamclaims/default/preset.yaml", "spec:\n  network: blue\nstatus:\n  ips: [\"198.51.100.50/24\"]\n");
  auto preset = store->ipam_claim("default", "preset");
  REQUIRE(preset.has_value());
  CHECK((*preset)->ips == std::vector<std::string>{"198.51.100.50/24"});
  CHECK(store->ipam_claim("default", "../x").error().cni_code == cni_code::kInvalidConfig);
}
