// How many pods a scale test drives. Under the sanitizers every plumb process starts and runs
// several times slower, and what ASan/UBSan look for (memory and undefined-behaviour errors in
// each code path) shows in the first few dozen pods as well as in the two-hundredth: scale
// tests keep their assertions and use the smaller count there. The normal build runs the full count.
#pragma once

namespace plumb::test {

/// `full` in the normal build, `sanitized` in the ASan+UBSan build (PLUMB_SANITIZED).
constexpr int pod_count(int full, int sanitized) {
#ifdef PLUMB_SANITIZED
  (void)full;
  return sanitized;
#else
  (void)sanitized;
  return full;
#endif
}

}  // namespace plumb::test
