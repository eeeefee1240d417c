// Damaged state (DEL and GC from records, cni-entry/pod/{del,gc}.cpp, engine/state): every kind
// of damage a record can suffer, at every position of a 3-attachment pod. DEL and GC tear down
// every attachment whose record is intact, report each damaged record by path after trying all
// (code 6), and keep it in quarantine so nothing it described is forgotten; GC goes on past
// damaged containers. A record with an operation of a newer plumb is no damage: DEL and GC keep
// it for that plumb, log it and succeed (downgrade_test.cpp). One node for the whole file: the pods share its
// bridges, each has its own namespace and container ID.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "engine/state/state.hpp"
#include "tests/support/bounded_run.hpp"
#include "tests/support/pod_fixture.hpp"

using plumb::test::BoundedProc;
using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::read_file;
using plumb::test::write_file;
namespace fs = std::filesystem;

namespace {

/// The kinds of damage, as found on nodes: lost writes, disks, hand edits, downgrades.
const std::vector<std::string> kDamages = {"empty",     "truncated", "garbage",     "wrong types",      "entry dropped",
                                           "not a list", "directory", "fifo",        "endless",          "unknown op"};
const std::vector<std::string> kIfnames = {"eth0", "net1", "net2"};  // the pod's attachments, by position

std::string dump(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return sb.GetString();
}

/// Damages the record at `path` as `kind` says.
void damage(const std::string& kind, const std::string& path) {
  const std::string text = read_file(path);
  REQUIRE_FALSE(text.empty());
  rapidjson::Document d;
  d.Parse(text.c_str());
  REQUIRE(d.IsObject());
  auto edit = [&](auto&& change) {
    change(d);
    write_file(path, dump(d));  // the integrity trailer is left as it was
  };
  if (kind == "empty") {
    write_file(path, "");
  } else if (kind == "truncated") {
    write_file(path, text.substr(0, text.size() / 2));
  } else if (kind == "garbage") {
    static constexpr char kGarbage[] = "\x7f\x45\x4c\x46\x02\x01\x01\x00 garbage \xff\xfe";
    write_file(path, std::string(kGarbage, sizeof kGarbage - 1));
  } else if (kind == "wrong types") {
    edit([](rapidjson::Document& r) { r["index"].SetString("zero"); });
  } else if (kind == "entry dropped") {
    edit([](rapidjson::Document& r) { r["undo"].Erase(r["undo"].Begin()); });
  } else if (kind == "not a list") {
    edit([](rapidjson::Document& r) { r["undo"].SetString("x"); });
  } else if (kind == "directory") {
    fs::remove(path);
    fs::create_directory(path);
  } else if (kind == "fifo") {
    fs::remove(path);
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  } else if (kind == "endless") {
    fs::remove(path);
    REQUIRE(::mknod(path.c_str(), S_IFCHR | 0600, makedev(1, 5)) == 0);  // reads like /dev/zero
  } else if (kind == "unknown op") {
    // Whole and verifiable, but with an operation only a newer plumb knows.
    auto rec = plumb::state::decode(text, path);
    REQUIRE(rec);
    rapidjson::Value op(rapidjson::kObjectType);
    op.AddMember("op", "teleport.restore", rec->undo.GetAllocator());
    rec->undo.PushBack(op, rec->undo.GetAllocator());
    write_file(path, plumb::state::encode(*rec));
  }
}

/// The node of this file: a light default network and two NADs, so every pod has three
/// attachments (eth0, net1, net2), each on its own bridge with its own host-local range.
struct DamagedNode {
  Node node;
  PodFixture fx{node};
  DamagedNode() {
    write_file(fx.default_conflist(), R"({"cniVersion": "1.1.0", "name": "default-net", "plugins": [{"type": "bridge",
      "bridge": "dmg0", "ipam": {"type": "host-local", "dataDir": ")" + fx.ipam_dir() + R"(", "subnet": "203.0.113.0/24"}}]})");
    fx.add_nad("kube-system", "b1", R"({"cniVersion":"1.1.0","name":"b1","type":"bridge","bridge":"dmg1","ipam":{"type":"host-local","dataDir":")" +
                                        fx.ipam_dir() + R"(","subnet":"198.51.100.0/24"}})");
    fx.add_nad("kube-system", "b2", R"({"cniVersion":"1.1.0","name":"b2","type":"bridge","bridge":"dmg2","ipam":{"type":"host-local","dataDir":")" +
                                        fx.ipam_dir() + R"(","subnet":"192.0.2.0/24"}})");
  }
  /// plumb's config (1.1.0 for GC); pods live in kube-system (a system namespace: no status file
  /// to write, so no fsync per ADD).
  std::string config(const std::string& extra = {}) const { return fx.config(extra, "1.1.0"); }

  /// Adds a pod "p<n>" (container "c<n>") with the three attachments.
  std::string add(int n) {
    const std::string name = "p" + std::to_string(n);
    fx.add_pod("kube-system", name, "b1,b2");
    std::string ns = node.add_netns(name);
    auto add = fx.run("ADD", "c" + std::to_string(n), ns, "kube-system", name, config());
    INFO(add.out, add.err);
    REQUIRE(add.exit_code == 0);
    REQUIRE(link_names(name) == std::set<std::string>{"lo", "eth0", "net1", "net2"});
    return ns;
  }
  /// The record of attachment `position` of pod n (containers/c<n>:eth0/; an older plumb's
  /// containers/c<n>/, so this file can be run against one).
  std::string record(int n, size_t position) const {
    const std::string file = "/" + std::to_string(position) + "-" + kIfnames[position] + ".json";
    const std::string dir = fx.state() + "/containers/c" + std::to_string(n);
    return fs::exists(dir + ":eth0" + file) ? dir + ":eth0" + file : dir + file;
  }
  /// host-local files held by container c<n> (their names: the addresses).
  std::vector<std::string> held(int n) const {
    std::vector<std::string> out;
    for (const auto& f : PodFixture::files_under(fx.ipam_dir())) {
      if (read_file(f).starts_with("c" + std::to_string(n) + "\r\n")) out.push_back(f);
    }
    return out;
  }
  BoundedProc verb(const std::string& command, int n, const std::string& conf) const {
    const std::string name = "p" + std::to_string(n);
    return plumb::test::run_bounded({plumb::test::plumb_binary()},
                                    {{"CNI_COMMAND", command}, {"CNI_CONTAINERID", "c" + std::to_string(n)},
                                     {"CNI_NETNS", "/run/netns/" + name}, {"CNI_IFNAME", "eth0"}, {"CNI_PATH", "/usr/lib/cni"},
                                     {"CNI_ARGS", "K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=" + name}},
                                    conf, {.seconds = 60});
  }
  /// Everything of pod n but the damaged attachment at `position` is gone.
  void only_damaged_left(int n, size_t position) const {
    const std::string name = "p" + std::to_string(n);
    CHECK(link_names(name) == std::set<std::string>{"lo", kIfnames[position]});
    CHECK(held(n).size() == 1);  // the damaged attachment's address, never released from an untrusted record
  }
};

std::string gc_config(const DamagedNode& dn, const std::string& valid) {
  std::string conf = dn.config();
  conf.insert(conf.size() - 1, R"(, "cni.dev/valid-attachments": )" + valid);
  return conf;
}

}  // namespace

TEST_CASE("DEL: every kind of damage at every position; the intact attachments go, the damaged record is reported and kept") {
  DamagedNode dn;
  int n = 0;
  std::vector<std::pair<int, std::string>> newer;  // pods whose record of a newer plumb DEL keeps, and that record
  for (const auto& kind : kDamages) {
    for (size_t position = 0; position < 3; ++position) {
      CAPTURE(kind);
      CAPTURE(position);
      ++n;
      dn.add(n);
      const std::string path = dn.record(n, position);
      damage(kind, path);
      BoundedProc del = dn.verb("DEL", n, dn.config());
      INFO(del.out, del.err);
      REQUIRE(del.exited());
      if (kind == "unknown op") {
        // Kept in place for the plumb that wrote it (the unknown operation is its newest: nothing
        // of it runs), logged by path; the DEL succeeds, and so does the next.
        CHECK(del.exit_code == 0);
        CHECK(del.err.find(path) != std::string::npos);
        dn.only_damaged_left(n, position);
        CHECK(fs::exists(path));
        BoundedProc again = dn.verb("DEL", n, dn.config());
        CHECK(again.exit_code == 0);
        newer.emplace_back(n, path);
        continue;
      }
      CHECK(del.exit_code == 1);
      auto [code, msg] = del.cni_error();
      CHECK(code == 6);
      CHECK(msg.find(path) != std::string::npos);
      dn.only_damaged_left(n, position);
      // Quarantined, so the next DEL completes and nothing of the key is left in containers/.
      const std::string kept = dn.fx.state() + "/quarantine/c" + std::to_string(n) + ":eth0/" + fs::path(path).filename().string();
      CHECK(fs::exists(fs::symlink_status(kept)));
      CHECK(msg.find(kept) != std::string::npos);
      BoundedProc again = dn.verb("DEL", n, dn.config());
      INFO(again.out, again.err);
      CHECK(again.exit_code == 0);
      CHECK_FALSE(fs::exists(dn.fx.state() + "/containers/c" + std::to_string(n) + ":eth0"));
      CHECK_FALSE(fs::exists(dn.fx.state() + "/locks/c" + std::to_string(n) + ":eth0"));
      dn.node.del_netns("p" + std::to_string(n));
    }
  }
  // GC keeps what only a newer plumb can undo too, and says so; nothing else is left.
  BoundedProc gc = dn.verb("GC", 0, gc_config(dn, "[]"));
  INFO(gc.out, gc.err);
  CHECK(gc.exit_code == 0);
  std::set<std::string> left;
  for (const auto& f : PodFixture::files_under(dn.fx.state() + "/containers")) left.insert(f);
  std::set<std::string> kept;
  for (const auto& [p, path] : newer) {
    kept.insert(path);
    CHECK(gc.err.find("c" + std::to_string(p) + ":eth0") != std::string::npos);
  }
  CHECK(left == kept);
}

TEST_CASE("GC: damaged containers at every position do not stop it; valid pods stay, damaged or not") {
  DamagedNode dn;
  std::vector<std::pair<int, size_t>> damaged;
  std::vector<std::string> paths;
  std::set<std::string> newer;  // the keys of the records of a newer plumb, which GC keeps for it
  int n = 0;
  for (const auto& kind : kDamages) {
    for (size_t position = 0; position < 3; ++position) {
      ++n;
      dn.add(n);
      const std::string path = dn.record(n, position);
      damage(kind, path);
      if (kind == "unknown op") {
        newer.insert("c" + std::to_string(n) + ":eth0");
        continue;
      }
      paths.push_back(path);
      damaged.emplace_back(n, position);
    }
  }
  // A healthy valid pod, and a valid pod with a damaged record: GC leaves both alone.
  const int healthy = ++n;
  dn.add(healthy);
  const int valid_damaged = ++n;
  dn.add(valid_damaged);
  damage("garbage", dn.record(valid_damaged, 1));
  const std::string valid = R"([{"containerID":"c)" + std::to_string(healthy) + R"(","ifname":"eth0"},{"containerID":"c)" +
                            std::to_string(valid_damaged) + R"(","ifname":"eth0"}])";
  BoundedProc gc = dn.verb("GC", 0, gc_config(dn, valid));
  INFO(gc.out.substr(0, 2000), gc.err.substr(0, 2000));
  REQUIRE(gc.exited());
  CHECK(gc.exit_code == 1);
  auto [code, msg] = gc.cni_error();
  CHECK(code == 6);
  for (const auto& path : paths) CHECK_MESSAGE(msg.find(path) != std::string::npos, path);
  for (const auto& key : newer) CHECK_MESSAGE(gc.err.find("GC container " + key.substr(0, key.find(':')) + " interface eth0: kept") != std::string::npos, key);
  for (auto [p, position] : damaged) {
    CAPTURE(p);
    dn.only_damaged_left(p, position);
    CHECK(fs::exists(dn.fx.state() + "/quarantine/c" + std::to_string(p) + ":eth0"));
  }
  std::set<std::string> keys;
  for (const auto& e : fs::directory_iterator(dn.fx.state() + "/containers")) keys.insert(e.path().filename().string());
  std::set<std::string> left = newer;
  left.insert({"c" + std::to_string(healthy) + ":eth0", "c" + std::to_string(valid_damaged) + ":eth0"});
  CHECK(keys == left);
  CHECK(link_names("p" + std::to_string(healthy)) == std::set<std::string>{"lo", "eth0", "net1", "net2"});
  CHECK(link_names("p" + std::to_string(valid_damaged)) == std::set<std::string>{"lo", "eth0", "net1", "net2"});
  // A second GC has nothing left to report.
  BoundedProc again = dn.verb("GC", 0, gc_config(dn, valid));
  INFO(again.out, again.err);
  CHECK(again.exit_code == 0);
}
