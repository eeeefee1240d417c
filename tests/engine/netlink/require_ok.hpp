// REQUIRE_OK for the kernel-facing engine tests: fails the test case with the error's text when a
// Result/Status holds an error.
#pragma once

#include <doctest/doctest.h>

#include <string>

namespace plumb::test {

/// The error text of `r`, "" when it holds a value.
template <class R>
std::string err_text(const R& r) {
  return r ? std::string() : r.error().text();
}

}  // namespace plumb::test

#define REQUIRE_OK(expr)                            \
  do {                                              \
    const auto& require_ok_r_ = (expr);             \
    INFO(::plumb::test::err_text(require_ok_r_));   \
    REQUIRE(require_ok_r_.has_value());             \
  } while (0)
