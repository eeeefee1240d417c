// A driver's config refused by its parse, before any kernel access: the error text of a plugin
// config, for the drivers' *_parse_test.cpp files.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include "drivers/driver.hpp"
#include "engine/base/json.hpp"
#include "tests/support/driver_harness.hpp"

namespace plumb::test {

/// Parses `conf_json` (its "type" set to `type`) with that driver and runs its add when parse
/// passes, with an empty context (no sockets, namespace or journal: a config that reached the
/// kernel would crash the case); requires a CNI error of code 7 (invalid config) and returns its
/// text. `with_prev`: a prevResult is given (chained plugins need one).
inline std::string config_error(std::string_view type, const std::string& conf_json, bool with_prev = false) {
  REQUIRE(drivers::find(type) != nullptr);
  auto conf = json::parse(conf_json, "test config");
  REQUIRE(conf);
  json::set_string(*conf, "type", type, conf->GetAllocator());
  drivers::Context ctx;
  ctx.network = "net-x";
  ctx.ifname = "net1";
  cni::CniResult prev;
  auto r = add_plugin(ctx, *conf, with_prev ? &prev : nullptr);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().cni_code == cni_code::kInvalidConfig);
  return r.error().text();
}

/// True when `text` contains `needle`; the case's message shows both when it does not.
inline bool has(const std::string& text, const std::string& needle) {
  INFO("error: ", text, "; expected to contain: ", needle);
  return text.find(needle) != std::string::npos;
}

}  // namespace plumb::test
