// The scenarios' networks and the ways' names (bench.hpp).
#include <algorithm>

#include "bench/bench.hpp"

namespace bench {

const char* way_name(Way w) {
  switch (w) {
    case Way::Plumb: return "plumb";
    case Way::Reference: return "reference";
    case Way::Floor: return "floor";
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

std::string runtime_config(const Pod& p) {
  return R"({"portMappings": [{"hostPort": )" + std::to_string(p.host_port) +
         R"(, "containerPort": 80, "protocol": "tcp"}], "bandwidth": {"ingressRate": 100000000, "ingressBurst": 1000000, "egressRate": 100000000, "egressBurst": 1000000}})";
}

}  // namespace bench
