// whereabouts' keys around the cluster IPAM (ipam/cluster_whereabouts.cpp), with the keys as
// whereabouts' README writes them: the flat-file configuration (configuration_path first, then
// the default paths; the NAD's keys win, the file fills what the NAD leaves out), "addresses"
// (static addresses), CNI_ARGS IP= (static addresses, not a request from the pool) and
// GATEWAY=, and the decorator that adds them to every result and keeps them out of CHECK.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/base/json.hpp"
#include "ipam/cluster.hpp"
#include "ipam/cluster_internal.hpp"
#include "tests/support/temp_dir.hpp"

using namespace plumb;
namespace cl = plumb::ipam::cluster;
namespace in = plumb::ipam::cluster::internal;

namespace {

json::Document doc(const std::string& text) {
  auto d = json::parse(text, "test json");
  REQUIRE_MESSAGE(d.has_value(), text);
  return std::move(*d);
}

/// Writes `text` to `dir`/`rel`, making the directories on the way.
void put(const std::string& dir, const std::string& rel, const std::string& text) {
  const std::filesystem::path p = dir + "/" + rel;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

cni::IpConfig ipc(const char* cidr, const char* gw = nullptr) {
  return cni::IpConfig{IpPrefix::parse(cidr).value(), gw ? std::optional<IpAddr>(IpAddr::parse(gw).value()) : std::nullopt, std::nullopt};
}

/// The pool's side of the decorator: one fixed address, and what CHECK was asked.
class FakePool final : public ipam::Ipam {
 public:
  Result<cni::CniResult> add(const ipam::Request&) override {
    cni::CniResult r;
    r.ips.push_back(ipc("192.0.2.10/24", "192.0.2.1"));
    return r;
  }
  Status del(const ipam::Request&) override { return {}; }
  Status check(const ipam::Request&, const cni::CniResult& prev) override {
    checked = prev.ips;
    return {};
  }
  std::vector<cni::IpConfig> checked;
};

}  // namespace

TEST_CASE("flat file: configuration_path first; the NAD's keys win, the file fills the rest, enable_overlapping_ranges stays the NAD's") {
  plumb::test::TempDir d;
  // whereabouts' README: the flat file carries the datastore and the kubeconfig a NAD leaves out.
  put(d.path, "custom/whereabouts.conf", R"({"datastore": "kubernetes", "kubernetes": {"kubeconfig": "/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig"},
      "range": "198.51.100.0/24", "gateway": "198.51.100.1", "enable_overlapping_ranges": false, "log_level": "debug"})");
  put(d.path, "default/whereabouts.conf", R"({"kubernetes": {"kubeconfig": "/elsewhere"}})");
  auto nad = doc(R"({"type": "whereabouts", "range": "192.0.2.0/24", "gateway": "", "configuration_path": ")" + d.path +
                 R"(/custom/whereabouts.conf"})");
  auto merged = in::with_flat_file(nad, {d.path + "/default/whereabouts.conf"});
  REQUIRE_MESSAGE(merged.has_value(), merged.error().text());
  CHECK(std::string((*merged)["range"].GetString()) == "192.0.2.0/24");      // the NAD's
  CHECK(std::string((*merged)["gateway"].GetString()) == "198.51.100.1");    // "" is unset: the file's
  CHECK(std::string((*merged)["kubernetes"]["kubeconfig"].GetString()) == "/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig");
  CHECK_FALSE(merged->HasMember("enable_overlapping_ranges"));
  auto cfg = cl::parse_config(*merged);
  REQUIRE_MESSAGE(cfg.has_value(), cfg.error().text());
  CHECK(cfg->kubeconfig == "/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig");
  CHECK(cfg->overlapping_ranges);

  // Without configuration_path: the first default path that exists; a NAD object is merged member by member.
  auto plain = doc(R"({"type": "whereabouts", "range": "192.0.2.0/24", "kubernetes": {}})");
  auto from_default = in::with_flat_file(plain, {d.path + "/missing.conf", d.path + "/default/whereabouts.conf"});
  REQUIRE(from_default.has_value());
  CHECK(std::string((*from_default)["kubernetes"]["kubeconfig"].GetString()) == "/elsewhere");
  // No file at all: the NAD alone (whereabouts would fail; plumb has its own credentials).
  auto none = in::with_flat_file(plain, {d.path + "/missing.conf"});
  REQUIRE(none.has_value());
  CHECK(json::dump(*none) == json::dump(plain));
  // A file that exists but is not JSON is an error naming it.
  put(d.path, "bad.conf", "{nope");
  auto bad = in::with_flat_file(plain, {d.path + "/bad.conf"});
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().text().find(d.path + "/bad.conf") != std::string::npos);
}

TEST_CASE("addresses, CNI_ARGS IP= and GATEWAY=: static addresses as whereabouts' handleEnvArgs builds them") {
  auto cfg = cl::parse_config(doc(R"({"type": "whereabouts", "range": "192.0.2.0/24",
      "addresses": [{"address": "203.0.113.5/24", "gateway": "203.0.113.1"}, {"address": "2001:db8::5/64"}]})"));
  REQUIRE_MESSAGE(cfg.has_value(), cfg.error().text());
  REQUIRE(cfg->addresses.size() == 2);
  CHECK(cfg->addresses[0].address.str() == "203.0.113.5/24");
  CHECK(cfg->addresses[0].gateway->str() == "203.0.113.1");

  ipam::Request req;
  req.cni_args = {{"IgnoreUnknown", "1"}, {"IP", "198.51.100.7/24, 2001:db8:1::7/64"}, {"GATEWAY", "198.51.100.1,2001:db8::1"}};
  auto statics = in::static_addresses(req, cfg->addresses);
  REQUIRE_MESSAGE(statics.has_value(), statics.error().text());
  REQUIRE(statics->size() == 4);
  CHECK((*statics)[0].gateway->str() == "203.0.113.1");
  CHECK((*statics)[1].address.str() == "2001:db8::5/64");
  CHECK((*statics)[1].gateway->str() == "2001:db8::1");  // GATEWAY= applies to every static address it is inside
  CHECK((*statics)[2].address.str() == "198.51.100.7/24");
  CHECK((*statics)[2].gateway->str() == "198.51.100.1");
  CHECK_FALSE((*statics)[3].gateway.has_value());

  // IP= is not a request from the pool any more.
  auto want = in::requested(req, *cfg);
  REQUIRE(want.has_value());
  CHECK_FALSE((*want)[0].has_value());

  req.cni_args = {{"IP", "198.51.100.7"}};  // whereabouts wants a CIDR
  auto bare = in::static_addresses(req, {});
  REQUIRE_FALSE(bare.has_value());
  CHECK(bare.error().msg.find("CNI_ARGS IP \"198.51.100.7\" is not a CIDR") != std::string::npos);
  auto wrong = cl::parse_config(doc(R"({"type": "whereabouts", "range": "192.0.2.0/24", "addresses": [{"address": "x"}]})"));
  REQUIRE_FALSE(wrong.has_value());
  CHECK(wrong.error().msg.find("ipam.addresses[0].address") != std::string::npos);
}

TEST_CASE("the static addresses follow the pool's in the result; CHECK asks the pool only about its own") {
  auto pool = std::make_unique<FakePool>();
  FakePool* seen = pool.get();
  auto ipam = in::with_statics(std::move(pool), {ipc("203.0.113.5/24", "203.0.113.1")});
  ipam::Request req;
  req.cni_args = {{"IP", "198.51.100.7/24"}};
  auto r = ipam->add(req);
  REQUIRE(r.has_value());
  REQUIRE(r->ips.size() == 3);
  CHECK(r->ips[0].address.str() == "192.0.2.10/24");
  CHECK(r->ips[1].address.str() == "203.0.113.5/24");
  CHECK(r->ips[2].address.str() == "198.51.100.7/24");
  REQUIRE(ipam->check(req, *r).has_value());
  REQUIRE(seen->checked.size() == 1);
  CHECK(seen->checked[0].address.str() == "192.0.2.10/24");
}
