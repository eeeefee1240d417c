// plumb's own config (cni-entry/pod/config.cpp): the Kubernetes API keys, their defaults and
// validation.
#include "cni-entry/pod/config.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace plumb;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("plumb config: API keys, defaults and validation") {
  auto c = pod::parse_config(R"({"cniVersion": "1.0.0", "name": "p"})");
  REQUIRE(c.has_value());
  CHECK(c->kubeconfig.empty());
  CHECK(c->api_timeout_seconds == 30);
  CHECK(c->api_retries == 3);
  CHECK_FALSE(c->status_errors_fatal);
  auto s = pod::parse_config(R"({"cniVersion": "1.0.0", "name": "p", "kubeconfig": "/etc/cni/net.d/plumb.d/kubeconfig",
                                 "apiTimeoutSeconds": 2.5, "apiRetries": 0, "statusErrorsFatal": true})");
  REQUIRE(s.has_value());
  CHECK(s->kubeconfig == "/etc/cni/net.d/plumb.d/kubeconfig");
  CHECK(s->api_timeout_seconds == 2.5);
  CHECK(s->api_retries == 0);
  CHECK(s->status_errors_fatal);
  for (const char* bad :
       {R"("apiTimeoutSeconds": 0)", R"("apiTimeoutSeconds": "30")", R"("apiRetries": -1)", R"("apiRetries": 100)"}) {
    auto e = pod::parse_config(std::string(R"({"cniVersion": "1.0.0", "name": "p", )") + bad + "}");
    INFO(bad);
    REQUIRE_FALSE(e.has_value());
    CHECK(e.error().cni_code == cni_code::kInvalidConfig);
    CHECK(contains(e.error().msg, std::string(bad).substr(1, std::string(bad).find('"', 1) - 1)));
  }
}

TEST_CASE("plumb config: statusAfterAnswer, off by default, refused with statusErrorsFatal") {
  auto c = pod::parse_config(R"({"cniVersion": "1.0.0", "name": "p"})");
  REQUIRE(c.has_value());
  CHECK_FALSE(c->status_after_answer);
  auto s = pod::parse_config(R"({"cniVersion": "1.0.0", "name": "p", "statusAfterAnswer": true})");
  REQUIRE(s.has_value());
  CHECK(s->status_after_answer);
  auto both = pod::parse_config(
      R"({"cniVersion": "1.0.0", "name": "p", "statusAfterAnswer": true, "statusErrorsFatal": true})");
  REQUIRE_FALSE(both.has_value());
  CHECK(both.error().cni_code == cni_code::kInvalidConfig);
  CHECK(contains(both.error().msg, "statusAfterAnswer"));
  CHECK(contains(both.error().msg, "statusErrorsFatal"));
  auto bad = pod::parse_config(R"({"cniVersion": "1.0.0", "name": "p", "statusAfterAnswer": "yes"})");
  REQUIRE_FALSE(bad.has_value());
  CHECK(contains(bad.error().msg, "statusAfterAnswer"));
}
