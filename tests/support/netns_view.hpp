// Reading a test namespace back independently of plumb, with iproute2's JSON output (`ip -j`),
// and bounded traffic probes: what the driver tests assert on.
#pragma once

#include <set>
#include <string>

#include <doctest/doctest.h>

#include "tests/support/pod_fixture.hpp"
#include "tests/support/private_node.hpp"

namespace plumb::test {

/// `ip` prefix selecting namespace `ns` ("" = the node).
inline std::string in_ns(const std::string& ns) { return ns.empty() ? std::string() : "-n " + ns + " "; }

/// `ip -d -j link show dev <dev>` in namespace `ns`: one object.
inline rapidjson::Document link_detail(const std::string& ns, const std::string& dev) {
  auto d = ip_json("-d " + in_ns(ns) + "link show dev " + dev);
  REQUIRE(d.IsArray());
  REQUIRE(d.Size() == 1);
  rapidjson::Document one;
  one.CopyFrom(d[0], one.GetAllocator());
  return one;
}

/// The first global address of `family` ("inet" / "inet6") on `dev` in `ns`, "" if none.
inline std::string global_addr(const std::string& ns, const std::string& dev, const char* family = "inet") {
  auto d = ip_json(in_ns(ns) + "addr show dev " + dev);
  for (auto& l : d.GetArray()) {
    for (auto& a : l["addr_info"].GetArray()) {
      if (std::string(a["family"].GetString()) == family && std::string(a["scope"].GetString()) == "global") {
        return a["local"].GetString();
      }
    }
  }
  return "";
}

/// True when `count` pings from namespace `ns` (out of `dev` when given) to `dst` get answers;
/// bounded: 1 s per probe.
inline bool pings(const std::string& ns, const std::string& dst, const std::string& dev = "", int count = 2) {
  Proc p = sh("ip netns exec " + ns + " ping -c " + std::to_string(count) + " -i 0.2 -W 1 " + (dev.empty() ? "" : "-I " + dev + " ") + dst);
  if (p.exit_code != 0) MESSAGE("ping ", dst, " from ", ns, ": ", p.out, p.err);
  return p.exit_code == 0;
}

/// The value of /proc/sys/`path` (e.g. "net/ipv4/conf/net1/arp_notify") inside namespace `ns`,
/// without its trailing newline.
inline std::string pod_sysctl(const std::string& ns, const std::string& path) {
  Proc p = sh("ip netns exec " + ns + " cat /proc/sys/" + path);
  REQUIRE(p.exit_code == 0);
  while (!p.out.empty() && p.out.back() == '\n') p.out.pop_back();
  return p.out;
}

/// True when plumb left no attachment record under the fixture's state directory.
inline bool no_records(const PodFixture& fx) { return PodFixture::files_under(fx.state() + "/containers").empty(); }

}  // namespace plumb::test
