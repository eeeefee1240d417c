#include "engine/base/result.hpp"

#include <cstring>

namespace plumb {

std::string Error::text() const {
  std::string out = msg;
  if (sys_errno != 0) {
    out += ": ";
    out += std::strerror(sys_errno);
  }
  if (!details.empty()) {
    out += " (" + details + ")";
  }
  return out;
}

Error Error::within(const std::string& context) const {
  Error e = *this;
  e.msg = context + ": " + msg;
  return e;
}

}  // namespace plumb
