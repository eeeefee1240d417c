#include "cni-entry/pod/log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <ctime>

namespace plumb::pod {

void Log::configure(const std::string& level, const std::string& file, bool to_stderr) {
  if (level == "error" || level == "panic") level_ = Level::Error;
  if (level == "warning") level_ = Level::Warning;
  if (level == "info" || level == "verbose") level_ = Level::Info;
  if (level == "debug") level_ = Level::Debug;
  file_ = file;
  to_stderr_ = to_stderr;
}

void Log::write(Level level, const std::string& msg) {
  if (level > level_) return;
  static constexpr const char* kNames[] = {"error", "warning", "info", "debug"};
  std::string line = std::string("plumb ") + kNames[static_cast<int>(level)] + ": " + msg + "\n";
  // stderr is the runtime's log; stdout is reserved for the CNI result.
  if (to_stderr_) (void)!::write(2, line.data(), line.size());
  if (!file_.empty()) {
    // Never through a link planted at the log file's name (O_NOFOLLOW), never blocking on a
    // FIFO without a reader (O_NONBLOCK): then nothing is written there.
    int fd = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    if (fd >= 0) {
      char stamp[32] = {};
      std::time_t now = std::time(nullptr);
      std::tm tm{};
      gmtime_r(&now, &tm);
      std::strftime(stamp, sizeof stamp, "%FT%TZ ", &tm);
      std::string stamped = stamp + line;
      (void)!::write(fd, stamped.data(), stamped.size());
      ::close(fd);
    }
  }
}

}  // namespace plumb::pod
