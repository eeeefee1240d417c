// Helpers of the igb cases (tests/drivers/sriov_igb_test.cpp, sriov_igb_pod_test.cpp): plumb
// configured on the node of tests/support/igb_vfs.hpp (the guest's initial namespace) with a
// loopback-only default network, and what a VF looks like from the node and its PF (`ip -j -d
// link`'s vfinfo_list) before and after.
#pragma once

#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <string>
#include <vector>

#include "tests/support/igb_vfs.hpp"
#include "tests/support/pod_fixture.hpp"

namespace plumb::test::igb {

inline rapidjson::Document parse(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str());
  REQUIRE_FALSE(d.HasParseError());
  return d;
}

/// A link's MAC, "" when it does not exist (ns "" = the node).
inline std::string mac_of(const std::string& ns, const std::string& dev) {
  Proc p = sh("ip -j " + (ns.empty() ? std::string() : "-n " + ns + " ") + "link show dev " + dev + " 2>/dev/null");
  if (p.exit_code != 0) return {};
  return parse(p.out)[0]["address"].GetString();
}

/// The VF's PF-side report without its MAC (igb reports the VF's own MAC there once the VF has
/// set it: DEL sets the netdev's own MAC back, so only the other settings compare exactly).
inline std::string settings_but_mac(const std::string& vfinfo) {
  auto d = parse(vfinfo);
  d.RemoveMember("address");
  return IgbVfs::json_text(d);
}

/// A node on the guest's real VFs with plumb configured: a loopback-only default network (nothing
/// of it in the guest's namespace), device-info under the case's directory.
struct IgbNode {
  Node& node;
  IgbVfs& igb;
  PodFixture fx;
  IgbNode(Node& n, IgbVfs& i) : node(n), igb(i), fx(n) {
    write_file(fx.default_conflist(), R"({"cniVersion":"1.0.0","name":"default-net","plugins":[{"type":"loopback"}]})");
  }
  std::string config(const std::string& extra = "") const {
    return fx.config(R"("deviceInfoDir": ")" + node.dir() + R"(/devinfo")" + (extra.empty() ? "" : ", " + extra));
  }
  /// A NAD `name` of type sriov with `keys` (JSON members) and a static address.
  void nad(const std::string& name, const std::string& keys, const std::string& address) const {
    fx.add_nad("default", name,
               R"({"cniVersion":"1.0.0","type":"sriov",)" + keys +
                   R"(,"ipam":{"type":"static","addresses":[{"address":")" + address + R"("}]}})");
  }
  Proc run(const std::string& verb, const std::string& pod) const {
    return fx.run(verb, "ctr-" + pod, "/run/netns/" + pod, "default", pod, config());
  }
  /// Files left in the VF allocation directory (locks aside).
  std::vector<std::string> allocations() const {
    std::vector<std::string> out;
    for (auto& f : PodFixture::files_under(fx.state() + "/sriov")) {
      if (!f.ends_with(".lock")) out.push_back(f);
    }
    return out;
  }
};

/// What a VF looks like from the node: its netdev (name, MAC) and what its PF reports.
struct VfSnap {
  std::string netdev, mac, vfinfo;
};
inline VfSnap snap(const IgbVfs& igb, unsigned pf, unsigned vf) {
  VfSnap s{igb.vf_netdev(pf, vf), "", igb.vfinfo(pf, vf)};
  s.mac = mac_of("", s.netdev);
  return s;
}

/// The VF has no administrative MAC pinned: its netdev can change its own MAC (igb refuses that
/// while one is set), and set it back.
inline void check_not_pinned(const std::string& netdev, const std::string& mac) {
  Proc p = sh("ip link set dev " + netdev + " address 02:00:00:5e:77:77");
  INFO(netdev, ": ", p.err);
  CHECK(p.exit_code == 0);
  REQUIRE(sh("ip link set dev " + netdev + " address " + mac).exit_code == 0);
}

/// A VF as it was: same netdev name and MAC in the node, the same PF-side settings; its MAC on the
/// PF either as before or its own (the VF set it back on its netdev).
inline void check_returned(const IgbVfs& igb, unsigned pf, unsigned vf, const VfSnap& before) {
  VfSnap now = snap(igb, pf, vf);
  CHECK(now.netdev == before.netdev);
  CHECK(now.mac == before.mac);
  CHECK(settings_but_mac(now.vfinfo) == settings_but_mac(before.vfinfo));
  const std::string reported = parse(now.vfinfo)["address"].GetString();
  CHECK_MESSAGE((reported == parse(before.vfinfo)["address"].GetString() || reported == before.mac), now.vfinfo);
  check_not_pinned(now.netdev, now.mac);
}

/// Bounded: up to `tries` pings of one second from pod `ns` to `addr`; true at the first answer.
inline bool reaches(const std::string& ns, const std::string& addr, int tries = 10) {
  for (int i = 0; i < tries; ++i) {
    if (sh("ip netns exec " + ns + " ping -c 1 -W 1 " + addr + " >/dev/null 2>&1").exit_code == 0) return true;
  }
  return false;
}

}  // namespace plumb::test::igb
