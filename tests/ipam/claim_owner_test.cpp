// host-local with an allocation owner (IPAMClaims, spec 8): addresses held by
// "ipamclaim:<ns>/<name>" survive the pod's DEL, go to the next pod naming the claim, honour the
// claim's status.ips, and are released only by an explicit owner (GC of a deleted claim).
// Works on a temporary data directory; no privileges needed.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/base/json.hpp"
#include "ipam/ipam.hpp"

using namespace plumb;
namespace fs = std::filesystem;

namespace {

struct DataDir {
  std::string path;
  DataDir() {
    char tmpl[] = "/tmp/plumb-claim-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~DataDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& ip) const {
    std::ifstream f(path + "/blue/" + ip);
    if (!f) return "<none>";
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
};

json::Document ipam_conf(const DataDir& d, const std::string& claim_json) {
  std::string text =
      R"({"type": "host-local", "dataDir": ")" + d.path + R"(", "ranges": [[{"subnet": "198.51.100.0/24"}]])";
  if (!claim_json.empty()) text += R"(, "plumb.ipamClaim": )" + claim_json;
  auto doc = json::parse(text + "}", "ipam");
  REQUIRE(doc.has_value());
  return std::move(*doc);
}

ipam::Request request(const json::Value& conf, const std::string& cid, const std::string& ifname) {
  ipam::Request r;
  r.container_id = cid;
  r.ifname = ifname;
  r.network_name = "blue";
  r.ipam = &conf;
  return r;
}

std::string add(const json::Value& conf, const std::string& cid, const std::string& ifname = "net1") {
  auto ipam = ipam::make(conf);
  REQUIRE(ipam.has_value());
  auto r = (*ipam)->add(request(conf, cid, ifname));
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().text()));
  REQUIRE(r->ips.size() == 1);
  return r->ips[0].address.str();
}

}  // namespace

TEST_CASE("claim-owned addresses survive the pod's DEL and follow the claim to the next pod") {
  DataDir d;
  auto claimed = ipam_conf(d, R"({"owner": "ipamclaim:default/vm-a.blue"})");
  CHECK(add(claimed, "ctr-1") == "198.51.100.2/24");
  CHECK(d.file("198.51.100.2") == "ipamclaim:default/vm-a.blue\r\nnet1");

  // The pod's DEL: the recorded undo carries the same ipam object but no owner override.
  auto ipam = ipam::make(claimed);
  REQUIRE(ipam.has_value());
  REQUIRE((*ipam)->del(request(claimed, "ctr-1", "net1")).has_value());
  CHECK(d.file("198.51.100.2") == "ipamclaim:default/vm-a.blue\r\nnet1");

  // Another pod without the claim gets the next address; the re-created pod (new container,
  // other interface name) gets the claim's.
  auto plain = ipam_conf(d, "");
  CHECK(add(plain, "ctr-other") == "198.51.100.3/24");
  CHECK(add(claimed, "ctr-2", "eth1") == "198.51.100.2/24");
  cni::CniResult prev;
  prev.ips.push_back(cni::IpConfig{*IpPrefix::parse("198.51.100.2/24"), std::nullopt, std::nullopt});
  CHECK((*ipam)->check(request(claimed, "ctr-2", "eth1"), prev).has_value());

  // GC of the deleted claim: an explicit owner releases it, and only it.
  ipam::Request gc = request(claimed, "ipamclaim:default/vm-a.blue", "");
  gc.owner = "ipamclaim:default/vm-a.blue";
  REQUIRE((*ipam)->del(gc).has_value());
  CHECK(d.file("198.51.100.2") == "<none>");
  CHECK(d.file("198.51.100.3") == "ctr-other\r\nnet1");
}

TEST_CASE("a claim's status.ips are requested; a conflicting address fails") {
  DataDir d;
  auto claimed = ipam_conf(d, R"({"owner": "ipamclaim:default/vm-b", "ips": ["198.51.100.50/24"]})");
  CHECK(add(claimed, "ctr-1") == "198.51.100.50/24");
  CHECK(d.file("198.51.100.50") == "ipamclaim:default/vm-b\r\nnet1");

  auto other = ipam_conf(d, R"({"owner": "ipamclaim:default/vm-c", "ips": ["198.51.100.50/24"]})");
  auto ipam = ipam::make(other);
  REQUIRE(ipam.has_value());
  auto taken = (*ipam)->add(request(other, "ctr-2", "net1"));
  REQUIRE_FALSE(taken.has_value());
  CHECK(taken.error().cni_code == cni_code::kIpamExhausted);
  CHECK(taken.error().msg.find("198.51.100.50 is already allocated") != std::string::npos);

  auto bad = ipam_conf(d, R"({"ips": ["198.51.100.9/24"]})");
  auto no_owner = ipam::make(bad);
  REQUIRE(no_owner.has_value());
  auto r = (*no_owner)->add(request(bad, "ctr-3", "net1"));
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().msg.find("plumb.ipamClaim.owner is missing") != std::string::npos);
}
