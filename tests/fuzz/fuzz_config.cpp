// libFuzzer target: plumb's own config, CNI configs/conflists (normalize: name/cniVersion
// injection) and NetworkAttachmentDefinition YAML.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cni-entry/npwg/nad.hpp"
#include "cni-entry/pod/config.hpp"

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
  return 0;
}
