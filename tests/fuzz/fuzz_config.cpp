// libFuzzer target: plumb's own config, CNI configs/conflists (normalize: name/cniVersion
// injection), NetworkAttachmentDefinition YAML, and YAML itself: whatever yaml::load_all reads,
// yaml::dump writes back as YAML that loads to the same value.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cni-entry/npwg/nad.hpp"
#include "cni-entry/pod/config.hpp"
#include "engine/base/yaml.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)plumb::pod::parse_config(text);
  auto net = plumb::nad::normalize(text, "fuzz-net", "fuzz input");
  if (net) {
    // A normalized network is a list whose every plugin carries the list's name and version.
    const auto& plugins = net->conflist["plugins"];
    for (auto& p : plugins.GetArray()) {
      if (!p.HasMember("name") || !p.HasMember("cniVersion")) __builtin_trap();
    }
  }
  (void)plumb::nad::parse_nad_yaml(text, "fuzz input");
  if (auto docs = plumb::yaml::load_all(text, "fuzz input")) {
    for (const auto& doc : *docs) {
      auto again = plumb::yaml::dump(doc);
      if (!again) __builtin_trap();
      auto back = plumb::yaml::load(*again, "dumped");
      if (!back || plumb::json::dump(*back) != plumb::json::dump(doc)) __builtin_trap();
    }
  }
  return 0;
}
