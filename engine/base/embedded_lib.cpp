// Shared objects carried inside the binary (embedded_lib.hpp): memfd + dlopen.
#include "engine/base/embedded_lib.hpp"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

namespace plumb::embedded {

Result<void*> open(const std::string& name, std::span<const unsigned char> image) {
  const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) return fail_errno(errno, "load " + name + ": memfd_create");
  size_t done = 0;
  while (done < image.size()) {
    ssize_t n = ::write(fd, image.data() + done, image.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      return fail_errno(err, "load " + name + ": write to its memory file");
    }
    done += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string why = handle == nullptr ? std::string(::dlerror()) : std::string();
  ::close(fd);  // the loader keeps its own mapping
  if (handle == nullptr) return fail(cni_code::kInternal, "load " + name + " (built into plumb)", why);
  return handle;
}

Result<void*> symbol(void* handle, const std::string& name, const char* symbol) {
  ::dlerror();
  void* p = ::dlsym(handle, symbol);
  if (p == nullptr) return fail(cni_code::kInternal, "load " + name + ": it has no symbol " + symbol);
  return p;
}

}  // namespace plumb::embedded
