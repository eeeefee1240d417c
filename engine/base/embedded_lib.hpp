// Shared objects carried inside the plumb binary and loaded on first need.
//
// A CNI plugin is installed as one file (copied into /opt/cni/bin), so a part of plumb that must
// stay out of every other invocation's start-up (a shared object linked against a heavy library,
// e.g. the protobuf code of kubelet's pod-resources API, cni-entry/source/kubelet.cpp) is linked
// into the binary as bytes and, the first time it is needed, written to an anonymous memory file
// (memfd_create) and dlopen()ed from /proc/self/fd/<n>. Its own dependencies (e.g. Debian's
// libprotobuf-lite32) are found by the dynamic loader as for any library. Nothing is written to
// the disk; an invocation that never needs it never touches its bytes (they stay unread pages of
// the binary).
#pragma once

#include <span>
#include <string>

#include "engine/base/result.hpp"

namespace plumb::embedded {

/// dlopen()s the shared object `image` (RTLD_NOW | RTLD_LOCAL) under the name `name` (shown in
/// /proc/<pid>/maps and messages) and returns its handle; it stays loaded for the process's life.
/// Errors: kInternal naming `name` with the errno of memfd_create/write, or dlerror()'s text (e.g.
/// a missing dependency: "libprotobuf-lite.so.32: cannot open shared object file").
[[nodiscard]] Result<void*> open(const std::string& name, std::span<const unsigned char> image);

/// The address of `symbol` in `handle`. Errors: kInternal naming `name` and the symbol.
[[nodiscard]] Result<void*> symbol(void* handle, const std::string& name, const char* symbol);

}  // namespace plumb::embedded
