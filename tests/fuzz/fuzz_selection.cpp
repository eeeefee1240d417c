// libFuzzer target: the k8s.v1.cni.cncf.io/networks selection annotation parser (both formats).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cni-entry/npwg/nad.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = plumb::nad::parse_selection(text);
  if (parsed) {
    for (auto& e : *parsed) {
      // Every accepted element must satisfy what the parser promises.
      if (e.name.empty()) __builtin_trap();
      if (!e.ips.empty() && !e.ipam_claim_reference.empty()) __builtin_trap();
    }
  } else if (parsed.error().msg.empty()) {
    __builtin_trap();
  }
  return 0;
}
