// Comparing a built message with golden bytes: on a mismatch the sizes and the first differing
// offset are reported before the two arrays. Golden arrays are written for little-endian hosts.
#pragma once

#include <doctest/doctest.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace plumb::test {

static_assert(std::endian::native == std::endian::little, "golden arrays are written for little-endian hosts");

using Bytes = std::vector<uint8_t>;

/// CHECKs got == want, naming the sizes and the first offset where they differ.
inline void check_bytes(const Bytes& got, const Bytes& want) {
  size_t first = 0;
  while (first < got.size() && first < want.size() && got[first] == want[first]) ++first;
  INFO("sizes got ", got.size(), " want ", want.size(), "; first difference at offset ", first);
  CHECK(got == want);
}

}  // namespace plumb::test
