// The scenarios' networks and the ways' names (bench.hpp).
#include <rapidjson/document.h>

#include <algorithm>
#include <stdexcept>

#include "bench/bench.hpp"

namespace bench {

const char* way_name(Way w) {
  switch (w) {
    case Way::Plumb: return "plumb";
    case Way::Reference: return "reference";
    case Way::Floor: return "floor";
    case Way::FloorNaive: return "floor-naive";
    case Way::FloorWarm:
      return "floor-warm";
    case Way::ApiThin:
      return "api-thin";
    case Way::ApiThick:
      return "api-thick";
    case Way::ApiThickNoStatus:
      return "api-thick-no-status";
    case Way::ApiThickStatusAfter:
      return "api-thick-status-after";
  }
  return "?";
}

void Cost::add(const Proc& p) {
  ns += p.wall_ns;
  rss_kib = std::max(rss_kib, p.maxrss_kib);
  cpu_us += p.cpu_us;
  ++procs;
}

std::string ipam_json(const std::string& data_dir, int net) {
  const std::string p = std::string("2001:db8:0:") + std::to_string(net) + "::";
  return R"({"type": "host-local", "dataDir": ")" + data_dir + R"(", "ranges": [[{"subnet": ")" + kSubnet[net] +
         R"(", "rangeStart": ")" + p + R"(2", "rangeEnd": ")" + p + R"(ffff")" +
         (net == 1 ? R"(, "gateway": ")" + p + R"(1")" : std::string()) + "}]]}";
}

std::string default_conflist(const std::string& data_dir, char scenario) {
  std::string s = R"({"cniVersion": "1.0.0", "name": "default-net", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "isDefaultGateway": true, "ipMasq": true,
   "ipam": )" + ipam_json(data_dir, 1) + "}";
  if (scenario == 'c') {
    s += R"(,
  {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true},
  {"type": "bandwidth", "capabilities": {"bandwidth": true}})";
  }
  return s + "]}\n";
}

std::string sec_bridge_json(const std::string& data_dir) {
  return R"({"cniVersion": "1.0.0", "name": "sec-bridge", "type": "bridge", "bridge": "br1", "ipam": )" +
         ipam_json(data_dir, 2) + "}";
}

std::string sec_macvlan_json(const std::string& data_dir) {
  return R"({"cniVersion": "1.0.0", "name": "sec-macvlan", "type": "macvlan", "master": "mst0", "mode": "bridge", "ipam": )" +
         ipam_json(data_dir, 3) + "}";
}

std::string with_data_dir(const std::string& network, const std::string& data_dir) {
  rapidjson::Document d;
  d.Parse(network.c_str());
  if (d.HasParseError() || !d.IsObject()) throw std::runtime_error("--conflist: not a JSON object: " + network.substr(0, 200));
  auto& a = d.GetAllocator();
  auto set_dir = [&](rapidjson::Value& plugin) {
    if (!plugin.IsObject() || !plugin.HasMember("ipam") || !plugin["ipam"].IsObject()) return;
    rapidjson::Value& ipam = plugin["ipam"];
    if (!ipam.HasMember("type") || !ipam["type"].IsString() || std::string(ipam["type"].GetString()) != "host-local") return;
    ipam.RemoveMember("dataDir");
    ipam.AddMember("dataDir", rapidjson::Value(data_dir.c_str(), a), a);
  };
  if (d.HasMember("plugins") && d["plugins"].IsArray()) {
    for (auto& plugin : d["plugins"].GetArray()) set_dir(plugin);
  } else {
    set_dir(d);
  }
  return json_dump(d);
}

std::string runtime_config(const Pod& p) {
  return R"({"portMappings": [{"hostPort": )" + std::to_string(p.host_port) +
         R"(, "containerPort": 80, "protocol": "tcp"}], "bandwidth": {"ingressRate": 100000000, "ingressBurst": 1000000, "egressRate": 100000000, "egressBurst": 1000000}})";
}

}  // namespace bench
