// Finding the temporaries of writers that have ended (see leftovers.h).
#include "host/common/leftovers.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>

namespace tpu {
namespace fs = std::filesystem;
namespace {

// The pid of "<pid>-<n>", or 0 when `s` is not of that form.
pid_t PidOf(const std::string& s) {
  const size_t dash = s.find('-');
  if (dash == 0 || dash == std::string::npos || dash + 1 == s.size()) return 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i != dash && (s[i] < '0' || s[i] > '9')) return 0;
  }
  return static_cast<pid_t>(std::strtol(s.substr(0, dash).c_str(), nullptr, 10));
}

bool Ended(pid_t pid) { return pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH; }

// Whether nothing holds the lock of `p` (a writer on another machine sharing the folder).
bool Unlocked(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return free;
}

}  // namespace

TempLock::TempLock(const fs::path& path)
    : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) {
  if (fd_ >= 0) ::flock(fd_, LOCK_EX | LOCK_NB);
}

TempLock::~TempLock() {
  if (fd_ >= 0) ::close(fd_);
}

std::string TempSuffix() {
  static std::atomic<uint64_t> serial{0};
  return std::to_string(::getpid()) + "-" + std::to_string(serial.fetch_add(1));
}

std::vector<fs::path> LeftBehind(const fs::path& parent, const std::string& prefix) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (fs::directory_iterator it(parent.empty() ? "." : parent, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const pid_t pid = PidOf(name.substr(prefix.size()));
    if (pid > 0 && Ended(pid) && Unlocked(it->path())) found.push_back(it->path());
  }
  return found;
}

}  // namespace tpu
