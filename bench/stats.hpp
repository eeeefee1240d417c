// The report's statistics and number formats (report.cpp, api_report.cpp): nearest-rank
// percentiles, a sample set's summary, milliseconds and ratios as the tables print them.
#pragma once

#include <rapidjson/document.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "bench/harness.hpp"

namespace bench {

/// Nearest-rank percentile q (0..1) of v; NaN when empty.
inline double pct(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size(), std::max<size_t>(rank, 1)) - 1];
}

/// A sample set's summary (NaN where empty).
struct Dist {
  double p50 = NAN, p90 = NAN, p99 = NAN, mean = NAN, min = NAN, max = NAN;
  size_t n = 0;
};

inline Dist dist(const std::vector<double>& v) {
  Dist d;
  d.n = v.size();
  if (v.empty()) return d;
  d.p50 = pct(v, 0.5);
  d.p90 = pct(v, 0.9);
  d.p99 = pct(v, 0.99);
  double sum = 0;
  for (double x : v) sum += x;
  d.mean = sum / static_cast<double>(v.size());
  d.min = *std::min_element(v.begin(), v.end());
  d.max = *std::max_element(v.begin(), v.end());
  return d;
}

/// {"p50", "p90", "p99", "mean", "min", "max" (null when NaN), "n"}.
inline rapidjson::Value dist_json(const Dist& d, rapidjson::Document::AllocatorType& al) {
  rapidjson::Value o(rapidjson::kObjectType);
  auto num = [](double v) { return std::isnan(v) ? rapidjson::Value() : rapidjson::Value(v); };
  o.AddMember("p50", num(d.p50), al);
  o.AddMember("p90", num(d.p90), al);
  o.AddMember("p99", num(d.p99), al);
  o.AddMember("mean", num(d.mean), al);
  o.AddMember("min", num(d.min), al);
  o.AddMember("max", num(d.max), al);
  o.AddMember("n", static_cast<uint64_t>(d.n), al);
  return o;
}

/// Milliseconds with 2, 1 or 0 decimals by size; "-" for NaN.
inline std::string ms(double v) {
  if (std::isnan(v)) return "-";
  const double a = std::fabs(v);
  return fmt(a < 10 ? 2 : a < 100 ? 1 : 0, v);
}

/// "1.23×"; "-" for NaN.
inline std::string ratio(double v) { return std::isnan(v) ? "-" : fmt(v < 10 ? 2 : 1, v) + "×"; }

}  // namespace bench
