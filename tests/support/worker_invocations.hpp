// A daemon worker's invocations in a test: what engine/base keeps across them (the state
// directory's directories, the recycling pools) is kept while a WorkerInvocations lives.
#pragma once

#include "engine/base/file.hpp"
#include "engine/base/recycler.hpp"

namespace plumb::test {

/// Keeps across invocations (engine/base/file.hpp, invocations) until destroyed, which stops
/// keeping and forgets the shared Recyclers; next() ends one invocation, as a worker does.
struct WorkerInvocations {
  WorkerInvocations() { invocations::keep_across(true); }
  ~WorkerInvocations() {
    invocations::keep_across(false);
    Recycler::release_shared();
  }
  WorkerInvocations(const WorkerInvocations&) = delete;
  WorkerInvocations& operator=(const WorkerInvocations&) = delete;
  void next() { invocations::next(); }
};

}  // namespace plumb::test
