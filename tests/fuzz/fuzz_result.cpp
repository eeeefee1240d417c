// libFuzzer target: CNI result decoding in every version and re-encoding in every version.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/cni/cni.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto doc = plumb::json::parse(text, "fuzz input");
  if (!doc) return 0;
  for (auto& from : plumb::cni::supported_versions()) {
    auto r = plumb::cni::decode_result(*doc, from);
    if (!r) continue;
    for (auto& to : plumb::cni::supported_versions()) {
      auto enc = plumb::cni::encode_result(*r, to);
      if (!enc) __builtin_trap();  // every decoded result is encodable in every supported version
      auto back = plumb::cni::decode_result(*enc, to);
      if (!back) __builtin_trap();  // and what we encode we can decode
    }
  }
  return 0;
}
