// The selection annotation k8s.v1.cni.cncf.io/networks (NPWG v1.3 section 4): both formats,
// every key of 4.1.2.1 with its valid and invalid values.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cni-entry/npwg/nad.hpp"

using namespace plumb;
using nad::parse_selection;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<nad::SelectionElement> ok(const std::string& annotation) {
  auto r = parse_selection(annotation);
  REQUIRE_MESSAGE(r.has_value(), annotation << " -> " << r.error().text());
  return std::move(*r);
}

/// Expects kInvalidAnnotation whose message starts with the annotation name and contains every
/// part (the element, the key, the value).
void invalid(const std::string& annotation, const std::vector<std::string>& parts) {
  CAPTURE(annotation);
  auto r = parse_selection(annotation);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kInvalidAnnotation);
  CAPTURE(r.error().msg);
  CHECK(r.error().msg.rfind("k8s.v1.cni.cncf.io/networks: ", 0) == 0);
  for (const auto& p : parts) CHECK_MESSAGE(contains(r.error().msg, p), p);
}

/// One JSON element with `extra` keys after "name":"net-a".
std::string one(const std::string& extra) { return R"([{"name":"net-a",)" + extra + "}]"; }

}  // namespace

TEST_CASE("empty or whitespace annotation selects nothing") {
  CHECK(ok("").empty());
  CHECK(ok("   \n\t").empty());
}

TEST_CASE("4.1.1 comma-delimited format: name and namespace/name") {
  auto els = ok("net-a,net-b,other-ns/net-c");  // the spec's example
  REQUIRE(els.size() == 3);
  CHECK(els[0].name == "net-a");
  CHECK(els[0].namespace_.empty());
  CHECK(els[1].name == "net-b");
  CHECK(els[2].name == "net-c");
  CHECK(els[2].namespace_ == "other-ns");
  for (const auto& e : els) {
    CHECK(e.interface.empty());
    CHECK(e.ips.empty());
    CHECK_FALSE(e.default_route.has_value());
  }
}

TEST_CASE("4.1.1: whitespace is trimmed and Multus' name@ifname sets the interface") {
  auto els = ok("  net-a , other-ns / net-b@eth5 ,net-c @ net1  ");
  REQUIRE(els.size() == 3);
  CHECK(els[0].name == "net-a");
  CHECK(els[1].namespace_ == "other-ns");
  CHECK(els[1].name == "net-b");
  CHECK(els[1].interface == "eth5");
  CHECK(els[2].name == "net-c");
  CHECK(els[2].interface == "net1");
}

TEST_CASE("4.2: the same network twice is two elements") {
  auto els = ok("net-a,net-a");
  REQUIRE(els.size() == 2);
  CHECK(els[0].name == els[1].name);
}

TEST_CASE("4.1.1: invalid comma-format items name the element") {
  invalid("net-a,,net-b", {"element 2", "empty"});
  invalid("net-a,", {"element 2", "empty"});
  invalid("Net-A", {"element 1", "\"Net-A\"", "DNS-1123"});
  invalid("net_a", {"\"net_a\"", "DNS-1123"});
  invalid("-net", {"\"-net\""});
  invalid("net-", {"\"net-\""});
  invalid("ns/a/b", {"\"ns/a/b\"", "'/'"});
  invalid("/net-a", {"namespace"});
  invalid("Bad_NS/net-a", {"namespace", "\"Bad_NS\""});
  invalid("ns/", {"\"ns/\"", "no network name"});
  invalid("net-a@", {"element 1 (net-a)", "interface", "\"\""});
  invalid("net-a@eth:0", {"interface", "\"eth:0\""});
  invalid("net-a@abcdefghijklmnop", {"interface", "\"abcdefghijklmnop\""});
  invalid("net-a@b@c", {"'@'"});
  invalid(std::string(64, 'a'), {"element 1"});  // a label is at most 63 characters
}

TEST_CASE("4.1.2 JSON list format: every key of 4.1.2.1 accepted") {
  auto els = ok(R"([
    {"name": "net-a"},
    {"name": "net-b", "namespace": "other-ns", "ips": ["10.2.2.42/24", "2001:db8::5/64", "192.0.2.7"],
     "mac": "C2:B0:57:49:47:F1", "interface": "eth1",
     "cni-args": {"foo": "bar", "n": [1, 2]},
     "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "UDP"},
                      {"hostPort": 65535, "containerPort": 1, "hostIP": "192.0.2.1"}],
     "bandwidth": {"ingressRate": 2048, "ingressBurst": 1600, "egressRate": 4096, "egressBurst": 1600},
     "default-route": ["192.0.2.1", "2001:db8::1"],
     "org.example.custom-key": {"anything": true}},
    {"name": "net-c", "namespace": "", "infiniband-guid": "24:8A:07:03:00:8D:AE:2F"},
    {"name": "net-d", "ipam-claim-reference": "vm-a.tenantred.pod16367aacb67", "mac": "02-11-22-33-44-55"}
  ])");
  REQUIRE(els.size() == 4);
  CHECK(els[0].name == "net-a");
  CHECK(els[0].namespace_.empty());
  CHECK_FALSE(els[0].cni_args.has_value());
  CHECK_FALSE(els[0].bandwidth.has_value());
  CHECK(els[0].port_mappings.empty());

  const auto& b = els[1];
  CHECK(b.namespace_ == "other-ns");
  CHECK(b.ips == std::vector<std::string>{"10.2.2.42/24", "2001:db8::5/64", "192.0.2.7"});
  CHECK(b.mac == "c2:b0:57:49:47:f1");
  CHECK(b.interface == "eth1");
  REQUIRE(b.cni_args.has_value());
  CHECK(json::dump(*b.cni_args) == R"({"foo":"bar","n":[1,2]})");
  REQUIRE(b.port_mappings.size() == 2);
  CHECK(b.port_mappings[0].host_port == 8080);
  CHECK(b.port_mappings[0].container_port == 80);
  CHECK(b.port_mappings[0].protocol == "udp");
  CHECK(b.port_mappings[0].host_ip.empty());
  CHECK(b.port_mappings[1].host_port == 65535);
  CHECK(b.port_mappings[1].container_port == 1);
  CHECK(b.port_mappings[1].protocol == "tcp");  // default
  CHECK(b.port_mappings[1].host_ip == "192.0.2.1");
  REQUIRE(b.bandwidth.has_value());
  CHECK(b.bandwidth->ingress_rate_bps == 2048);
  CHECK(b.bandwidth->ingress_burst_bits == 1600);
  CHECK(b.bandwidth->egress_rate_bps == 4096);
  CHECK(b.bandwidth->egress_burst_bits == 1600);
  REQUIRE(b.default_route.has_value());
  REQUIRE(b.default_route->size() == 2);
  CHECK((*b.default_route)[0].str() == "192.0.2.1");
  CHECK((*b.default_route)[1].str() == "2001:db8::1");

  CHECK(els[2].namespace_.empty());  // "" means the pod's namespace
  CHECK(els[2].infiniband_guid == "24:8a:07:03:00:8d:ae:2f");
  CHECK(els[3].ipam_claim_reference == "vm-a.tenantred.pod16367aacb67");
  CHECK(els[3].mac == "02:11:22:33:44:55");
}

TEST_CASE("4.1.2.1.9: default-route may be an empty list; null keys count as absent") {
  auto els = ok(R"([{"name":"net-a","default-route":[]},{"name":"net-b","ips":null,"default-route":null}])");
  REQUIRE(els[0].default_route.has_value());
  CHECK(els[0].default_route->empty());
  CHECK_FALSE(els[1].default_route.has_value());
  CHECK(els[1].ips.empty());
  // Only one of the two carries the key, so this is valid.
  CHECK(ok(R"([{"name":"net-a"},{"name":"net-b","default-route":["192.0.2.1"]}])")[1].default_route.has_value());
}

TEST_CASE("4.1.2: the value must be a JSON list of maps") {
  invalid(R"([{"name":})", {"cannot decode"});
  invalid(R"({"name":"net-a"})", {"list"});
  invalid(R"(["net-a"])", {"element 1", "must be a map", "\"net-a\""});
  invalid(R"([{"name":"net-a"}, 5])", {"element 2", "must be a map", "5"});
  invalid(R"("net-a")", {"list"});
}

TEST_CASE("4.1.2.1.1-2: name is required, name and namespace are DNS-1123 labels") {
  invalid(R"([{"namespace":"ns"}])", {"element 1", "\"name\" is required"});
  invalid(R"([{"name":""}])", {"\"name\" \"\"", "DNS-1123"});
  invalid(R"([{"name":5}])", {"\"name\" 5", "not a string"});
  invalid(R"([{"name":"Net_A"}])", {"\"name\" \"Net_A\""});
  invalid(R"([{"name":"net-a"},{"name":"net-b","namespace":"Bad NS"}])", {"element 2 (net-b)", "\"namespace\" \"Bad NS\""});
  invalid(R"([{"name":"net-a","namespace":["ns"]}])", {"\"namespace\" [\"ns\"]", "not a string"});
}

TEST_CASE("4.1.2.1.3: ips must be a non-empty list of IPs with optional prefix") {
  invalid(one(R"("ips":"10.0.0.1")"), {"element 1 (net-a)", "\"ips\" \"10.0.0.1\"", "list"});
  invalid(one(R"("ips":[])"), {"\"ips\" []", "at least one"});
  invalid(one(R"("ips":["10.0.0.300/24"])"), {"\"ips\" \"10.0.0.300/24\""});
  invalid(one(R"("ips":["10.0.0.1/33"])"), {"\"ips\" \"10.0.0.1/33\""});
  invalid(one(R"("ips":["2001:db8::1/129"])"), {"\"ips\" \"2001:db8::1/129\""});
  invalid(one(R"("ips":["10.0.0.1/"])"), {"\"ips\" \"10.0.0.1/\""});
  invalid(one(R"("ips":["10.0.0.1", 7])"), {"\"ips\" 7", "not a string"});
}

TEST_CASE("4.1.2.1.4: mac must be a 6-byte MAC") {
  invalid(one(R"("mac":"02:11:22:33:44")"), {"\"mac\" \"02:11:22:33:44\"", "6-byte MAC"});  // 5 bytes
  invalid(one(R"("mac":"02:11:22:33:44:55:66")"), {"\"mac\" \"02:11:22:33:44:55:66\""});
  invalid(one(R"("mac":"zz:11:22:33:44:55")"), {"\"mac\" \"zz:11:22:33:44:55\""});
  invalid(one(R"("mac":"")"), {"\"mac\" \"\""});
  invalid(one(R"("mac":12)"), {"\"mac\" 12", "not a string"});
}

TEST_CASE("4.1.2.1.5: interface must be a valid kernel interface name") {
  CHECK(ok(one(R"("interface":"abcdefghijklmno")"))[0].interface == "abcdefghijklmno");  // 15 bytes
  invalid(one(R"("interface":"abcdefghijklmnop")"), {"\"interface\" \"abcdefghijklmnop\""});  // 16 bytes
  invalid(one(R"("interface":"net/1")"), {"\"interface\" \"net/1\""});
  invalid(one(R"("interface":"net:1")"), {"\"interface\" \"net:1\""});
  invalid(one(R"("interface":"net 1")"), {"\"interface\" \"net 1\""});
  invalid(one(R"("interface":"")"), {"\"interface\" \"\""});
  invalid(one(R"("interface":"..")"), {"\"interface\" \"..\""});
  invalid(one(R"("interface":1)"), {"\"interface\" 1"});
  // A kernel name template: the kernel would name the device r0 while the record says r%d.
  invalid(one(R"("interface":"r%d")"), {"\"interface\" \"r%d\"", "no '/', ':', '%'"});
  invalid("net-a@eth%d", {"element 1 (net-a)", "interface \"eth%d\""});
}

TEST_CASE("4.1.2.1.6: cni-args must be a map") {
  invalid(one(R"("cni-args":"foo=bar")"), {"\"cni-args\" \"foo=bar\"", "not a map"});
  invalid(one(R"("cni-args":[1])"), {"\"cni-args\" [1]"});
}

TEST_CASE("4.1.2.1.7: portMappings entries need hostPort and containerPort in 1..65535 and TCP/UDP/SCTP") {
  CHECK(ok(one(R"("portMappings":[{"hostPort":1,"containerPort":2,"protocol":"Sctp"}])"))[0].port_mappings[0].protocol == "sctp");
  invalid(one(R"("portMappings":{"hostPort":1,"containerPort":2})"), {"\"portMappings\"", "not a list"});
  invalid(one(R"("portMappings":[])"), {"\"portMappings\" []", "at least one"});
  invalid(one(R"("portMappings":[8080])"), {"\"portMappings[0]\" 8080", "not a map"});
  invalid(one(R"("portMappings":[{"containerPort":80}])"), {"portMappings[0]", "hostPort"});
  invalid(one(R"("portMappings":[{"hostPort":80}])"), {"portMappings[0]", "containerPort"});
  invalid(one(R"("portMappings":[{"hostPort":0,"containerPort":80}])"), {"\"portMappings[0].hostPort\" 0", "1..65535"});
  invalid(one(R"("portMappings":[{"hostPort":65536,"containerPort":80}])"), {"\"portMappings[0].hostPort\" 65536"});
  invalid(one(R"("portMappings":[{"hostPort":-1,"containerPort":80}])"), {"\"portMappings[0].hostPort\" -1"});
  invalid(one(R"("portMappings":[{"hostPort":"80","containerPort":80}])"), {"\"portMappings[0].hostPort\" \"80\""});
  invalid(one(R"("portMappings":[{"hostPort":80.5,"containerPort":80}])"), {"\"portMappings[0].hostPort\" 80.5"});
  invalid(one(R"("portMappings":[{"hostPort":80,"containerPort":0}])"), {"\"portMappings[0].containerPort\" 0"});
  invalid(one(R"("portMappings":[{"hostPort":80,"containerPort":65536}])"), {"\"portMappings[0].containerPort\" 65536"});
  invalid(one(R"("portMappings":[{"hostPort":80,"containerPort":80},{"hostPort":81,"containerPort":81,"protocol":"icmp"}])"),
          {"\"portMappings[1].protocol\" \"icmp\"", "TCP, UDP or SCTP"});
  invalid(one(R"("portMappings":[{"hostPort":80,"containerPort":80,"protocol":6}])"), {"\"portMappings[0].protocol\" 6"});
  invalid(one(R"("portMappings":[{"hostPort":80,"containerPort":80,"hostIP":"host"}])"), {"\"portMappings[0].hostIP\" \"host\""});
}

TEST_CASE("4.1.2.1.8: bandwidth values are non-zero integers, bursts need their rate") {
  auto bw = ok(one(R"("bandwidth":{"egressRate":1000})"))[0].bandwidth;
  REQUIRE(bw.has_value());
  CHECK(bw->egress_rate_bps == 1000);
  CHECK(bw->ingress_rate_bps == 0);
  invalid(one(R"("bandwidth":[1000])"), {"\"bandwidth\" [1000]", "not a map"});
  invalid(one(R"("bandwidth":{})"), {"\"bandwidth\" {}", "at least one"});
  invalid(one(R"("bandwidth":{"ingressRate":0})"), {"\"bandwidth.ingressRate\" 0", "non-zero"});  // zero rate
  invalid(one(R"("bandwidth":{"egressRate":-5})"), {"\"bandwidth.egressRate\" -5"});
  invalid(one(R"("bandwidth":{"egressRate":"1M"})"), {"\"bandwidth.egressRate\" \"1M\""});
  invalid(one(R"("bandwidth":{"ingressRate":1000,"ingressBurst":0})"), {"\"bandwidth.ingressBurst\" 0"});
  invalid(one(R"("bandwidth":{"ingressBurst":1000})"), {"\"ingressBurst\" without \"ingressRate\""});  // burst without rate
  invalid(one(R"("bandwidth":{"ingressRate":1000,"egressBurst":1000})"), {"\"egressBurst\" without \"egressRate\""});
  invalid(one(R"("bandwidth":{"rate":1000})"), {"\"bandwidth\" key \"rate\""});
}

TEST_CASE("4.1.2.1.9: default-route is a list of IPs, on at most one element") {
  invalid(R"([{"name":"net-a","default-route":["192.0.2.1"]},{"name":"net-b","default-route":["198.51.100.1"]}])",
          {"element 2 (net-b)", "\"default-route\"", "more than one element", "element 1"});
  invalid(R"([{"name":"net-a","default-route":[]},{"name":"net-b","default-route":[]}])", {"element 2", "more than one"});
  invalid(one(R"("default-route":"192.0.2.1")"), {"\"default-route\" \"192.0.2.1\"", "list"});
  invalid(one(R"("default-route":["300.1.1.1"])"), {"\"default-route\" \"300.1.1.1\"", "not an IP"});
  invalid(one(R"("default-route":["192.0.2.1/24"])"), {"\"default-route\" \"192.0.2.1/24\""});
  invalid(one(R"("default-route":[1])"), {"\"default-route\" 1"});
}

TEST_CASE("4.1.2.1.10: infiniband-guid is 8 bytes") {
  invalid(one(R"("infiniband-guid":"24:8a:07:03:00:8d:ae")"), {"\"infiniband-guid\" \"24:8a:07:03:00:8d:ae\"", "8-byte"});  // 7 bytes
  invalid(one(R"("infiniband-guid":"24:8a:07:03:00:8d:ae:2f:11")"), {"\"infiniband-guid\""});
  invalid(one(R"("infiniband-guid":"24:8a:07:03:00:8d:ae:zz")"), {"\"infiniband-guid\" \"24:8a:07:03:00:8d:ae:zz\""});
  invalid(one(R"("infiniband-guid":"248a0703008dae2f")"), {"\"infiniband-guid\" \"248a0703008dae2f\""});
  invalid(one(R"("infiniband-guid":true)"), {"\"infiniband-guid\" true"});
}

TEST_CASE("4.1.2.1.11: ipam-claim-reference names an IPAMClaim and excludes ips") {
  invalid(one(R"("ips":["192.0.2.5/24"],"ipam-claim-reference":"claim-a")"),
          {"element 1 (net-a)", "\"ipam-claim-reference\"", "\"ips\""});
  invalid(one(R"("ipam-claim-reference":"Bad_Claim")"), {"\"ipam-claim-reference\" \"Bad_Claim\""});
  invalid(one(R"("ipam-claim-reference":"")"), {"\"ipam-claim-reference\" \"\""});
  invalid(one(R"("ipam-claim-reference":{"name":"c"})"), {"\"ipam-claim-reference\"", "not a string"});
}

TEST_CASE("errors name the namespace/name of the element when known") {
  invalid(R"([{"name":"net-a"},{"name":"net-b","namespace":"team-a","mac":"zz:11"}])",
          {"element 2 (team-a/net-b): \"mac\" \"zz:11\" is not a 6-byte MAC"});
}

TEST_CASE("keys without a period the standard does not define are described as warnings; extensions are not") {
  std::vector<std::string> warnings;
  auto r = nad::parse_selection(R"([{"name":"a","gatway":"x","org.example.k":1},{"name":"b","interfaceRequest":"n1"}])", &warnings);
  REQUIRE(r.has_value());
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0] ==
        "k8s.v1.cni.cncf.io/networks: element 1 (a): key \"gatway\" is not defined by the standard; keys without a period are "
        "reserved (4.1.2.1), extensions use reverse domain names");
  CHECK(warnings[1].find("element 2 (b): key \"interfaceRequest\"") != std::string::npos);
  std::vector<std::string> none;
  REQUIRE(nad::parse_selection(R"([{"name":"a","namespace":"ns","ips":["192.0.2.1"],"mac":"02:00:00:00:00:01","interface":"x",
    "cni-args":{},"portMappings":[{"hostPort":1,"containerPort":1}],"bandwidth":{"ingressRate":1},"default-route":[],
    "infiniband-guid":"00:00:00:00:00:00:00:01"}])", &none).has_value());
  CHECK(none.empty());
}
