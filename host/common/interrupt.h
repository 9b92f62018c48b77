// Ctrl-C (SIGINT) and SIGTERM: tpusim stops at once with one line on stderr, after removing
// the temporary files it was writing (outputs are written to a temporary file and renamed,
// atomic_file.h) and stopping the child processes it started (sweep points, compare's RTL
// runs). Finished outputs stay; nothing half-written is left. Exit status 130.
#pragma once

#include <sys/types.h>

#include <string>

namespace tpu {

void InstallInterruptHandler();

// While a scope object lives, an interrupt removes `path` (a temporary file or folder).
class RemoveOnInterrupt {
 public:
  explicit RemoveOnInterrupt(const std::string& path);
  ~RemoveOnInterrupt();
  RemoveOnInterrupt(const RemoveOnInterrupt&) = delete;
  RemoveOnInterrupt& operator=(const RemoveOnInterrupt&) = delete;

 private:
  int slot_;
};

// While a scope object lives, an interrupt sends SIGTERM to the child `pid`.
class StopOnInterrupt {
 public:
  explicit StopOnInterrupt(pid_t pid);
  ~StopOnInterrupt();
  StopOnInterrupt(const StopOnInterrupt&) = delete;
  StopOnInterrupt& operator=(const StopOnInterrupt&) = delete;

 private:
  int slot_;
};

}  // namespace tpu
