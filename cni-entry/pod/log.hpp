// The log of one plumb invocation: stderr plus an optional file (plumb config logFile), the file
// rotated as Multus rotates its logFile (lumberjack, with Multus's defaults or logOptions).
// Only cni-entry logs; everything below it returns errors.
#pragma once

#include <string>
#include <vector>

namespace plumb::pod {

/// Multus's logOptions: when logFile would grow past max_size_mb it is renamed
/// "<name>-<UTC time YYYY-MM-DDTHH-MM-SS.mmm><ext>" and a new one begun; then the backups beyond
/// the max_backups newest and those older than max_age_days are removed (0: no such limit) and,
/// with compress, the others gzip'ed to "<backup>.gz". Defaults: Multus's.
struct LogRotation {
  int max_size_mb = 100;  // maxSize (megabytes; 0 = 100, as lumberjack)
  int max_age_days = 5;   // maxAge
  int max_backups = 5;    // maxBackups
  bool compress = true;   // compress
};

class Log {
 public:
  enum class Level { Error = 0, Warning = 1, Info = 2, Debug = 3 };
  Log() = default;
  /// level: "error", "warning", "info" or "debug", or Multus's "panic" (= error: plumb has no
  /// more severe level) and "verbose" (= info); file: "" for none; to_stderr: Multus's
  /// logToStderr (false: the file only).
  void configure(const std::string& level, const std::string& file, bool to_stderr = true);
  /// How the file is rotated (plumb config logOptions).
  void set_rotation(const LogRotation& rotation) { rotation_ = rotation; }
  void error(const std::string& msg) { write(Level::Error, msg); }
  void warning(const std::string& msg) { write(Level::Warning, msg); }
  void info(const std::string& msg) { write(Level::Info, msg); }
  void debug(const std::string& msg) { write(Level::Debug, msg); }
  /// The networks the invocation works on (network-status names: "default/blue"), for the line
  /// a `plumb daemon` logs per invocation; set by ADD once planned and by DEL from the records.
  void note_networks(std::vector<std::string> networks) { networks_ = std::move(networks); }
  [[nodiscard]] const std::vector<std::string>& networks() const { return networks_; }

 private:
  void write(Level level, const std::string& msg);
  /// Rotates the file `fd` (open on file_) when `adding` bytes would take it past the limit;
  /// `fd` is then the new file (or -1).
  void rotate_if_full(int& fd, size_t adding) const;
  /// Removes and compresses the backups as rotation_ says.
  void mill() const;
  Level level_ = Level::Warning;
  std::string file_;
  bool to_stderr_ = true;
  LogRotation rotation_;
  std::vector<std::string> networks_;
};

}  // namespace plumb::pod
