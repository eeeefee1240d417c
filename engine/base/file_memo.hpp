// What a long-lived process (a `plumb daemon` worker, cni-entry/daemon/) keeps of the files it
// parsed: the parsed value, reused while stat() says the file is the same inode with the same
// size, modification and change times. An exec'd plumb reads each file once and gains nothing;
// a worker serving invocation after invocation no longer reads and parses the default network's
// config and the local store's NAD files for every pod.
#pragma once

#include <sys/stat.h>

#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "engine/base/file.hpp"
#include "engine/base/result.hpp"

namespace plumb {

/// What stat() says of a file's content. Equal stamps mean the same bytes, except after a
/// rewrite in place within one tick of the filesystem's clock that kept the size: a file read
/// less than kSettleSeconds after its last change is never kept (git's "racily clean" rule).
struct FileStamp {
  static constexpr time_t kSettleSeconds = 2;

  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  timespec mtime{};
  timespec ctime{};

  static FileStamp of(const struct stat& st) {
    return {st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
  }
  /// True when the last change was at least `settle` seconds before `now` (CLOCK_REALTIME).
  [[nodiscard]] bool settled(time_t now, time_t settle = kSettleSeconds) const {
    return ctime.tv_sec + settle <= now && mtime.tv_sec + settle <= now;
  }
  bool operator==(const FileStamp& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec && ctime.tv_sec == o.ctime.tv_sec && ctime.tv_nsec == o.ctime.tv_nsec;
  }
};

/// Parsed values of files, by path, each kept with the stamp of the bytes it was parsed from.
/// At most kMaxEntries paths (then it starts over). One thread.
template <class T>
class FileMemo {
 public:
  static constexpr size_t kMaxEntries = 256;
  /// Turns a file's text into the value; `path` is for messages.
  using Parse = std::function<Result<T>(const std::string& text, const std::string& path)>;

  /// `settle_seconds`: how long a file must have been unchanged when read to be kept (tests
  /// give 0 to keep a file they just wrote).
  explicit FileMemo(time_t settle_seconds = FileStamp::kSettleSeconds) : settle_seconds_(settle_seconds) {}

  /// The value of the file at `path` (symbolic links followed): the kept one while stat()
  /// gives the kept stamp, else read_file(path, what) parsed by `parse`, kept when the file had
  /// settled before it was read. Errors: read_file's (the same code and message), parse's; an
  /// error is never kept.
  /// `now`, when given: the stat() of `path` the caller took just before (not taken again).
  Result<std::shared_ptr<const T>> get(const std::string& path, std::string_view what, const Parse& parse,
                                       const struct stat* now = nullptr) {
    struct stat st {};
    auto it = entries_.find(path);
    if (it != entries_.end()) {
      const bool stated = now != nullptr || ::stat(path.c_str(), &st) == 0;
      if (stated && FileStamp::of(now != nullptr ? *now : st) == it->second.stamp) return it->second.value;
    }
    const time_t read_at = ::time(nullptr);
    auto text = PLUMB_TRY(read_file(path, what, kMaxFileBytes, &st));
    auto value = std::make_shared<const T>(PLUMB_TRY(parse(text, path)));
    const FileStamp stamp = FileStamp::of(st);
    if (!stamp.settled(read_at, settle_seconds_)) {
      entries_.erase(path);
      return value;
    }
    if (entries_.size() >= kMaxEntries) entries_.clear();
    entries_[path] = Entry{stamp, value};
    return value;
  }

 private:
  static constexpr size_t kMaxFileBytes = 16u << 20;  // read_file's default
  struct Entry {
    FileStamp stamp;
    std::shared_ptr<const T> value;
  };
  time_t settle_seconds_;
  std::map<std::string, Entry> entries_;
};

}  // namespace plumb
