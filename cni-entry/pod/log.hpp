// The log of one plumb invocation: stderr plus an optional file (plumb config logFile).
// Only cni-entry logs; everything below it returns errors.
#pragma once

#include <string>

namespace plumb::pod {

class Log {
 public:
  enum class Level { Error = 0, Warning = 1, Info = 2, Debug = 3 };
  Log() = default;
  /// level: "error", "warning", "info" or "debug", or Multus's "panic" (= error: plumb has no
  /// more severe level) and "verbose" (= info); file: "" for none; to_stderr: Multus's
  /// logToStderr (false: the file only).
  void configure(const std::string& level, const std::string& file, bool to_stderr = true);
  void error(const std::string& msg) { write(Level::Error, msg); }
  void warning(const std::string& msg) { write(Level::Warning, msg); }
  void info(const std::string& msg) { write(Level::Info, msg); }
  void debug(const std::string& msg) { write(Level::Debug, msg); }

 private:
  void write(Level level, const std::string& msg);
  Level level_ = Level::Warning;
  std::string file_;
  bool to_stderr_ = true;
};

}  // namespace plumb::pod
