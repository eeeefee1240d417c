// Work an invocation leaves for after the runtime has its answer (the Events an ADD posts): a
// `plumb daemon` worker runs it once its shim is answered, still busy for the daemon (no other
// invocation is handed to it meanwhile); an exec'd plumb runs it at once (the runtime waits for
// the process anyway).
#pragma once

#include <functional>
#include <utility>
#include <vector>

namespace plumb::source {

/// The queue a daemon worker installs (nullptr: none, run at once).
inline std::vector<std::function<void()>>*& after_answer_queue() {
  static std::vector<std::function<void()>>* queue = nullptr;
  return queue;
}

/// Runs `work` after the answer when a worker queues it, else now.
inline void after_answer(std::function<void()> work) {
  if (auto* q = after_answer_queue())
    q->push_back(std::move(work));
  else
    work();
}

}  // namespace plumb::source
