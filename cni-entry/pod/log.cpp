// The invocation's log (log.hpp) and the rotation of its file.
#include "cni-entry/pod/log.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <sys/time.h>
#include <vector>

namespace plumb::pod {
namespace {

constexpr int kOpenFlags = O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;

/// The parts of a log file name: directory, stem ("multus"), extension (".log", may be "").
struct Name {
  std::string dir, stem, ext;
};

Name split(const std::string& file) {
  Name n;
  const size_t slash = file.rfind('/');
  n.dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : file.substr(0, slash));
  std::string base = slash == std::string::npos ? file : file.substr(slash + 1);
  const size_t dot = base.rfind('.');
  if (dot != std::string::npos && dot != 0) {
    n.ext = base.substr(dot);
    base.resize(dot);
  }
  n.stem = base;
  return n;
}

/// lumberjack's backup name: "<stem>-2006-01-02T15-04-05.000<ext>" (UTC).
std::string backup_name(const Name& n) {
  timeval tv{};
  ::gettimeofday(&tv, nullptr);
  std::tm tm{};
  gmtime_r(&tv.tv_sec, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H-%M-%S", &tm);
  char ms[8];
  std::snprintf(ms, sizeof ms, ".%03d", static_cast<int>(tv.tv_usec / 1000));
  return n.dir + "/" + n.stem + "-" + stamp + ms + n.ext;
}

/// The time in a backup's file name (after "<stem>-"), or -1 when it is not a backup of ours.
std::time_t backup_time(const std::string& name, const Name& n, bool& gz) {
  const std::string prefix = n.stem + "-";
  if (name.rfind(prefix, 0) != 0) return -1;
  std::string rest = name.substr(prefix.size());
  gz = rest.size() > 3 && rest.compare(rest.size() - 3, 3, ".gz") == 0;
  if (gz) rest.resize(rest.size() - 3);
  if (rest.size() < n.ext.size() || rest.compare(rest.size() - n.ext.size(), n.ext.size(), n.ext) != 0) return -1;
  rest.resize(rest.size() - n.ext.size());
  std::tm tm{};
  const char* end = ::strptime(rest.c_str(), "%Y-%m-%dT%H-%M-%S", &tm);
  if (end == nullptr || std::string_view(end).size() != 4 || end[0] != '.') return -1;
  return ::timegm(&tm);
}

/// gzip's `path` to "<path>.gz", then removes it; on any failure the plain file stays.
void compress(const std::string& path) {
  int in = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0) return;
  const std::string out_path = path + ".gz";
  gzFile out = ::gzopen(out_path.c_str(), "wbe");
  bool ok = out != nullptr;
  char buf[65536];
  for (ssize_t got; ok && (got = ::read(in, buf, sizeof buf)) != 0;) {
    ok = got > 0 && ::gzwrite(out, buf, static_cast<unsigned>(got)) == got;
  }
  ::close(in);
  if (out != nullptr) ok = ::gzclose(out) == Z_OK && ok;
  ::unlink(ok ? path.c_str() : out_path.c_str());
}

}  // namespace

void Log::configure(const std::string& level, const std::string& file, bool to_stderr) {
  if (level == "error" || level == "panic") level_ = Level::Error;
  if (level == "warning") level_ = Level::Warning;
  if (level == "info" || level == "verbose") level_ = Level::Info;
  if (level == "debug") level_ = Level::Debug;
  file_ = file;
  to_stderr_ = to_stderr;
}

void Log::rotate_if_full(int& fd, size_t adding) const {
  const off_t limit = static_cast<off_t>(rotation_.max_size_mb > 0 ? rotation_.max_size_mb : 100) << 20;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size + static_cast<off_t>(adding) <= limit) return;
  // Concurrent invocations share the file: one renames it; the others find a new file there.
  if (::flock(fd, LOCK_EX) != 0) return;
  struct stat named {};
  if (::lstat(file_.c_str(), &named) == 0 && named.st_ino == st.st_ino && named.st_dev == st.st_dev) {
    (void)::rename(file_.c_str(), backup_name(split(file_)).c_str());
  }
  ::close(fd);  // releases the lock
  fd = ::open(file_.c_str(), kOpenFlags, 0600);
  mill();
}

void Log::mill() const {
  const Name n = split(file_);
  DIR* d = ::opendir(n.dir.c_str());
  if (d == nullptr) return;
  struct Backup {
    std::time_t when;
    std::string path;
    bool gz;
  };
  std::vector<Backup> backups;
  while (const dirent* e = ::readdir(d)) {
    bool gz = false;
    const std::time_t t = backup_time(e->d_name, n, gz);
    if (t >= 0) backups.push_back({t, n.dir + "/" + e->d_name, gz});
  }
  ::closedir(d);
  std::sort(backups.begin(), backups.end(), [](const Backup& a, const Backup& b) { return a.path > b.path; });  // newest first
  const std::time_t cutoff = std::time(nullptr) - static_cast<std::time_t>(rotation_.max_age_days) * 86400;
  for (size_t i = 0; i < backups.size(); ++i) {
    const bool too_many = rotation_.max_backups > 0 && i >= static_cast<size_t>(rotation_.max_backups);
    const bool too_old = rotation_.max_age_days > 0 && backups[i].when < cutoff;
    if (too_many || too_old) {
      ::unlink(backups[i].path.c_str());
    } else if (rotation_.compress && !backups[i].gz) {
      compress(backups[i].path);
    }
  }
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
    int fd = ::open(file_.c_str(), kOpenFlags, 0600);
    if (fd >= 0) {
      char stamp[32] = {};
      std::time_t now = std::time(nullptr);
      std::tm tm{};
      gmtime_r(&now, &tm);
      std::strftime(stamp, sizeof stamp, "%FT%TZ ", &tm);
      std::string stamped = stamp + line;
      rotate_if_full(fd, stamped.size());
      if (fd >= 0) {
        (void)!::write(fd, stamped.data(), stamped.size());
        ::close(fd);
      }
    }
  }
}

}  // namespace plumb::pod
