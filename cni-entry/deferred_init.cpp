// The deferred static initialisers (deferred_init.hpp).
#include "cni-entry/deferred_init.hpp"

#include <mutex>

// The linker defines these two symbols around the section (weak: without the section, both are
// null and there is nothing to run).
extern "C" {
extern void (*const __start_plumb_deferred_init[])() __attribute__((weak));
extern void (*const __stop_plumb_deferred_init[])() __attribute__((weak));
}

namespace plumb::deferred_init {

void run() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (auto* init = __start_plumb_deferred_init; init != __stop_plumb_deferred_init; ++init) (*init)();
  });
}

int count() { return static_cast<int>(__stop_plumb_deferred_init - __start_plumb_deferred_init); }

}  // namespace plumb::deferred_init
