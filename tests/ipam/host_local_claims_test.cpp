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

json::Document ipam_conf(const DataDir& d) {
  auto doc = json::parse(R"({"type": "host-local", "dataDir": ")" + d.path + R"(", "ranges": [[{"subnet": "198.51.100.0/24"}]]})",
                         "ipam");
  REQUIRE(doc.has_value());
  return std::move(*doc);
}

/// What the orchestrator hands host-local for an attachment using an IPAMClaim (Request::owner,
/// Request::owner_ips), or for a plain one (no owner).
struct Claim {
  std::string owner;
  std::vector<std::string> ips;
};

ipam::Request request(const json::Value& conf, const std::string& cid, const std::string& ifname, const Claim& claim = {}) {
  ipam::Request r;
  r.container_id = cid;
  r.ifname = ifname;
  r.network_name = "blue";
  r.ipam = &conf;
  r.owner = claim.owner;
  r.owner_ips = claim.ips;
  return r;
}

std::string add(const json::Value& conf, const std::string& cid, const std::string& ifname = "net1", const Claim& claim = {}) {
  auto ipam = ipam::make(conf);
  REQUIRE(ipam.has_value());
  auto r = (*ipam)->add(request(conf, cid, ifname, claim));
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().text()));
  REQUIRE(r->ips.size() == 1);
  return r->ips[0].address.str();
}

}  // namespace

TEST_CASE("claim-owned addresses survive the pod's DEL and follow the claim to the next pod") {
  DataDir d;
  auto conf = ipam_conf(d);
  const Claim vm_a{"ipamclaim:default/vm-a.blue", {}};
  CHECK(add(conf, "ctr-1", "net1", vm_a) == "198.51.100.2/24");
  CHECK(d.file("198.51.100.2") == "ipamclaim:default/vm-a.blue\r\nnet1");

  // The pod's DEL: the recorded undo runs with no owner override.
  auto ipam = ipam::make(conf);
  REQUIRE(ipam.has_value());
  REQUIRE((*ipam)->del(request(conf, "ctr-1", "net1")).has_value());
  CHECK(d.file("198.51.100.2") == "ipamclaim:default/vm-a.blue\r\nnet1");

  // Another pod without the claim gets the next address; the re-created pod (new container,
  // other interface name) gets the claim's.
  CHECK(add(conf, "ctr-other") == "198.51.100.3/24");
  CHECK(add(conf, "ctr-2", "eth1", vm_a) == "198.51.100.2/24");
  cni::CniResult prev;
  prev.ips.push_back(cni::IpConfig{*IpPrefix::parse("198.51.100.2/24"), std::nullopt, std::nullopt});
  CHECK((*ipam)->check(request(conf, "ctr-2", "eth1", vm_a), prev).has_value());

  // GC of the deleted claim: an explicit owner releases it, and only it.
  ipam::Request gc = request(conf, "ipamclaim:default/vm-a.blue", "", vm_a);
  REQUIRE((*ipam)->del(gc).has_value());
  CHECK(d.file("198.51.100.2") == "<none>");
  CHECK(d.file("198.51.100.3") == "ctr-other\r\nnet1");
}

TEST_CASE("a claim's status.ips are requested; a conflicting address fails") {
  DataDir d;
  auto conf = ipam_conf(d);
  CHECK(add(conf, "ctr-1", "net1", {"ipamclaim:default/vm-b", {"198.51.100.50/24"}}) == "198.51.100.50/24");
  CHECK(d.file("198.51.100.50") == "ipamclaim:default/vm-b\r\nnet1");

  auto ipam = ipam::make(conf);
  REQUIRE(ipam.has_value());
  auto taken = (*ipam)->add(request(conf, "ctr-2", "net1", {"ipamclaim:default/vm-c", {"198.51.100.50/24"}}));
  REQUIRE_FALSE(taken.has_value());
  CHECK(taken.error().cni_code == cni_code::kIpamExhausted);
  CHECK(taken.error().msg.find("198.51.100.50 is already allocated") != std::string::npos);

  // An owner with a line break would corrupt the reference's file format: refused.
  auto r = (*ipam)->add(request(conf, "ctr-3", "net1", {"ipamclaim:default/x\nctr-1", {}}));
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().msg.find("contains a line break") != std::string::npos);
}
