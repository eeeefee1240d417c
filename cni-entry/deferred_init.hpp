// The static initialisers a CNI invocation does not need, run on first use instead of at the
// start of every process. The build (cmake/deferred_init.cmake) moves the .init_array entries of
// the code an exec'd plumb answering a runtime never runs (the command line's CLI11 and
// <iostream>, the metrics server's prometheus-cpp and civetweb, the pod-resources codec and
// libprotobuf-lite) into the section plumb_deferred_init; run() runs that section's entries.
#pragma once

namespace plumb::deferred_init {

/// Runs the initialisers of section plumb_deferred_init, in link order, once per process (later
/// calls return at once; safe from several threads). Called before the first use of any of that
/// code: the command line's parse (cni-entry/cli), the pod-resources codec (cni-entry/source/
/// kubelet.cpp). Without the section (a build that moved nothing) there is nothing to run: those
/// initialisers ran at start.
void run();

/// How many initialisers the section holds (0 without it): for the tests.
[[nodiscard]] int count();

}  // namespace plumb::deferred_init
