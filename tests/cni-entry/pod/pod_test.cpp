// CNI conformance of the verb dispatch and results (cni-entry/pod/pod.cpp), through the real
// plumb binary: CHECK below 0.4.0 and GC/STATUS below 1.1.0 fail with code 1 as libcni's skel
// does; a 0.4.0 ADD result carries ips[].version; the config's "dns" comes back in the result
// ("dns":{} when empty, in 1.x too); strictAnnotations fails on a reserved selection key that
// is otherwise ignored with a warning.
#include <doctest/doctest.h>

#include <string>

#include "tests/support/pod_fixture.hpp"

using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;

namespace {

Proc verb(const std::string& command, const std::string& conf) {
  return plumb::test::run({plumb::test::plumb_binary()},
                          {{"CNI_COMMAND", command}, {"CNI_CONTAINERID", "ctr-x"}, {"CNI_NETNS", "/run/netns/none"}, {"CNI_IFNAME", "eth0"}},
                          conf);
}

}  // namespace

TEST_CASE("CHECK below 0.4.0, GC and STATUS below 1.1.0 fail with code 1 (libcni's skel)") {
  Node node;
  PodFixture fx(node);
  for (const char* v : {"0.1.0", "0.2.0", "0.3.0", "0.3.1"}) {
    CAPTURE(v);
    Proc p = verb("CHECK", fx.config({}, v));
    CHECK(p.exit_code != 0);
    CHECK(p.out == R"({"cniVersion":")" + std::string(v) +
                       R"(","code":1,"msg":"config version \")" + v + R"x(\" does not allow CHECK (it exists from CNI 0.4.0 on)"})x");
  }
  for (const char* v : {"0.4.0", "1.0.0"}) {
    for (const char* command : {"GC", "STATUS"}) {
      CAPTURE(v);
      CAPTURE(command);
      Proc p = verb(command, fx.config({}, v));
      CHECK(p.exit_code != 0);
      CHECK(p.out.find(R"("code":1,)") != std::string::npos);
      CHECK(p.out.find(std::string("does not allow ") + command) != std::string::npos);
    }
  }
  CHECK(verb("STATUS", fx.config({}, "1.1.0")).exit_code == 0);
  CHECK(verb("CHECK", fx.config({}, "0.4.0")).out.find(R"("code":3)") != std::string::npos);  // allowed: unknown container
}

TEST_CASE("a 0.4.0 ADD result has ips[].version; the config's dns is returned, \"dns\":{} when it has none") {
  Node node;
  PodFixture fx(node);
  fx.add_pod("default", "web", "");
  std::string pod = node.add_netns("web");
  Proc add = fx.run("ADD", "ctr-1", pod, "default", "web", fx.config({}, "0.4.0"));
  INFO(add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(add.out.find(R"("ips":[{"version":"4","interface":2,"address":"203.0.113.2/24")") != std::string::npos);
  CHECK(add.out.find(R"({"version":"6","interface":2,"address":"2001:db8:0:1::2/64")") != std::string::npos);
  CHECK(add.out.find(R"("dns":{})") != std::string::npos);
  REQUIRE(fx.run("DEL", "ctr-1", pod, "default", "web", fx.config({}, "0.4.0")).exit_code == 0);

  Proc add10 = fx.run("ADD", "ctr-2", pod, "default", "web", fx.config({}, "1.0.0"));
  REQUIRE(add10.exit_code == 0);
  CHECK(add10.out.find(R"("version")") == std::string::npos);
  CHECK(add10.out.ends_with(R"("dns":{}})"));
  REQUIRE(fx.run("DEL", "ctr-2", pod, "default", "web", fx.config()).exit_code == 0);

  // The reference bridge returns its config's "dns" (over the IPAM's); network-status shows it.
  plumb::test::write_file(fx.default_conflist(), R"({"cniVersion": "1.0.0", "name": "default-net", "plugins": [
    {"type": "bridge", "bridge": "plumb0", "isGateway": true, "dns": {"nameservers": ["203.0.113.53"], "domain": "cluster.local",
     "search": ["svc.cluster.local"], "options": ["ndots:5"]},
     "ipam": {"type": "host-local", "dataDir": ")" + fx.ipam_dir() + R"(", "ranges": [[{"subnet": "203.0.113.0/24"}]]}}]})");
  Proc dns = fx.run("ADD", "ctr-3", pod, "default", "web", fx.config());
  INFO(dns.out, dns.err);
  REQUIRE(dns.exit_code == 0);
  const std::string expected =
      R"("dns":{"nameservers":["203.0.113.53"],"domain":"cluster.local","search":["svc.cluster.local"],"options":["ndots:5"]})";
  CHECK(dns.out.find(expected) != std::string::npos);
  CHECK(fx.status_of("default", "web").find(expected) != std::string::npos);
  REQUIRE(fx.run("DEL", "ctr-3", pod, "default", "web", fx.config()).exit_code == 0);
}

TEST_CASE("a selection key without a period the standard does not define: a warning, and a failure under strictAnnotations") {
  Node node;
  PodFixture fx(node);
  fx.add_nad("default", "blue", R"({"cniVersion": "1.0.0", "name": "blue", "type": "bridge", "bridge": "br-blue",
    "ipam": {"type": "host-local", "dataDir": ")" + fx.ipam_dir() + R"(", "ranges": [[{"subnet": "198.51.100.0/24"}]]}})");
  fx.add_pod("default", "web", R"([{"name": "blue", "gatway": "x", "org.example.note": "fine"}])");
  std::string pod = node.add_netns("web");
  Proc lax = fx.run("ADD", "ctr-1", pod, "default", "web", fx.config());
  INFO(lax.out, lax.err);
  REQUIRE(lax.exit_code == 0);
  CHECK(lax.err.find(R"x(key "gatway" is not defined by the standard; keys without a period are reserved (4.1.2.1))x") != std::string::npos);
  CHECK(lax.err.find("org.example.note") == std::string::npos);  // extensions use a period: silent
  REQUIRE(fx.run("DEL", "ctr-1", pod, "default", "web", fx.config()).exit_code == 0);

  Proc strict = fx.run("ADD", "ctr-2", pod, "default", "web", fx.config(R"("strictAnnotations": true)"));
  CHECK(strict.exit_code != 0);
  CHECK(strict.out.find(R"("code":103)") != std::string::npos);
  CHECK(strict.out.find(R"x(element 1 (blue): key \"gatway\" is not defined by the standard)x") != std::string::npos);
  CHECK(PodFixture::files_under(fx.state() + "/containers").empty());
}
