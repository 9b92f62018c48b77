// Temporaries that a process stopped outright (SIGKILL, a preempted Slurm job, a lost node)
// left beside an output, found and cleared by the next write of that output. A temporary's
// name ends in "<pid>-<n>", and its writer holds an advisory lock (flock) on it while it
// lives; one whose pid is no live process here and whose lock is free was left behind.
// (An interrupt that can be caught, Ctrl-C or SIGTERM, removes its temporaries itself:
// interrupt.h.)
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace tpu {

// Holds the lock on a temporary file or folder while it is written.
class TempLock {
 public:
  explicit TempLock(const std::filesystem::path& path);
  ~TempLock();
  TempLock(const TempLock&) = delete;
  TempLock& operator=(const TempLock&) = delete;

 private:
  int fd_ = -1;
};

// "<pid>-<n>": a suffix for a temporary's name, new on every call in this process.
std::string TempSuffix();

// The entries of `parent` named `prefix` followed by "<pid>-<n>" whose writer has ended.
std::vector<std::filesystem::path> LeftBehind(const std::filesystem::path& parent,
                                              const std::string& prefix);

}  // namespace tpu
