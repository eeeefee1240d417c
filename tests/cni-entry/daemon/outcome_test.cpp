// cni-entry/daemon/outcome: the line of each invocation on the daemon's stderr, as text and as
// JSON (--log-format=json); the daemon's own lines are checked in cni-entry/daemon/cache.
#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <cstdio>

#include "cni-entry/daemon/daemon.hpp"

using plumb::daemon::Outcome;
using plumb::daemon::detail::outcome_line;

TEST_CASE(
    "an invocation's line names verb, pod, container, interface, networks, code and duration; an error is quoted") {
  Outcome o{"ADD", "default/web", "ctr-1", "eth0", {"default-net", "default/blue"}, 0, ""};
  CHECK(outcome_line(o, 1.5, false) ==
        "plumb daemon: ADD default/web container=ctr-1 ifname=eth0 networks=default-net,default/blue code=0 "
        "duration_ms=1.500\n");
  o.code = 7;
  o.error = "network \"blue\": bad \"x\"\nsecond line";
  CHECK(outcome_line(o, 2, false)
            .ends_with(R"( code=7 duration_ms=2.000 error="network \"blue\": bad \"x\"\nsecond line")"
                       "\n"));
  Outcome none{"DEL", "", "ctr-2", "eth0", {}, 0, ""};
  CHECK(outcome_line(none, 0.25, false) ==
        "plumb daemon: DEL - container=ctr-2 ifname=eth0 networks=- code=0 duration_ms=0.250\n");
}

TEST_CASE("the text line's duration is printf's \"%.3f\" of the milliseconds, halves and large values included") {
  const Outcome o{"DEL", "", "c", "eth0", {}, 0, ""};
  for (double ms : {0.0, 0.0005, 0.0015, 1.0005, 2.675, 12.3456, 999.9995, 123456.7895, 1e9 + 0.5}) {
    char want[64];
    std::snprintf(want, sizeof want, "duration_ms=%.3f\n", ms);
    INFO(want);
    CHECK(outcome_line(o, ms, false).ends_with(want));
  }
}

TEST_CASE("--log-format=json: one JSON object per line with the same fields") {
  const Outcome o{"ADD", "default/web", "ctr-1", "eth0", {"default-net", "default/blue"}, 7, "it failed"};
  const std::string line = outcome_line(o, 12.3456, true);
  REQUIRE(line.ends_with("}\n"));
  CHECK(line.find('\n') == line.size() - 1);
  rapidjson::Document d;
  d.Parse(line.c_str());
  REQUIRE(d.IsObject());
  CHECK(std::string(d["msg"].GetString()) == "invocation");
  CHECK(std::string(d["level"].GetString()) == "error");
  CHECK(std::string(d["verb"].GetString()) == "ADD");
  CHECK(std::string(d["pod"].GetString()) == "default/web");
  CHECK(std::string(d["containerID"].GetString()) == "ctr-1");
  CHECK(std::string(d["ifname"].GetString()) == "eth0");
  REQUIRE(d["networks"].Size() == 2);
  CHECK(std::string(d["networks"][1].GetString()) == "default/blue");
  CHECK(d["code"].GetUint() == 7);
  CHECK(std::string(d["error"].GetString()) == "it failed");
  CHECK(d["durationMs"].GetDouble() == doctest::Approx(12.345));
  CHECK(std::string(d["time"].GetString()).ends_with("Z"));
}
