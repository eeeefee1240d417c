// Linked only into the test build's plumb-faulty binary (never into plumb): installs a journal
// fault hook that SIGKILLs the process right after the N-th intent is persisted, N taken from
// PLUMB_FAULT_AFTER_STEP. Everything else is the production code path.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>

#include "engine/state/journal.hpp"

namespace {

unsigned g_kill_at = 0;

void kill_at_step(unsigned step) {
  if (step == g_kill_at) ::kill(::getpid(), SIGKILL);
}

struct Install {
  Install() {
    if (const char* n = std::getenv("PLUMB_FAULT_AFTER_STEP")) {
      g_kill_at = static_cast<unsigned>(std::strtoul(n, nullptr, 10));
      plumb::txn::set_fault_hook(kill_at_step);
    }
  }
} install;

}  // namespace
