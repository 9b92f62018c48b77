// Stopping cleanly on Ctrl-C (see interrupt.h). The handler may only call async-signal-safe
// functions, so the paths and pids live in fixed slots claimed with atomics.
#include "host/common/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace tpu {
namespace {

constexpr int kSlots = 64;
constexpr size_t kPathMax = 4096;

struct PathSlot {
  std::atomic<bool> used{false};
  std::atomic<bool> ready{false};
  char path[kPathMax];
};
struct PidSlot {
  std::atomic<bool> used{false};
  std::atomic<pid_t> pid{0};
};
PathSlot g_paths[kSlots];
PidSlot g_pids[kSlots];

void Say(const char* s) {
  ssize_t n = ::write(2, s, std::strlen(s));
  (void)n;
}

void OnInterrupt(int sig) {
  for (PidSlot& s : g_pids) {
    const pid_t pid = s.pid.load();
    if (s.used.load() && pid > 0) ::kill(pid, SIGTERM);
  }
  // Files first, then folders, so that a temporary folder is empty when its turn comes
  // (whatever slots its files took).
  for (PathSlot& s : g_paths) {
    if (s.used.load() && s.ready.load()) ::unlink(s.path);
  }
  for (PathSlot& s : g_paths) {
    if (s.used.load() && s.ready.load()) ::rmdir(s.path);
  }
  Say(sig == SIGINT ? "\ntpusim: interrupted (Ctrl-C); finished outputs are complete, nothing "
                      "half-written was left\n"
                    : "\ntpusim: terminated; finished outputs are complete, nothing "
                      "half-written was left\n");
  ::_exit(128 + sig);
}

template <class Slot>
int Claim(Slot* slots) {
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (slots[i].used.compare_exchange_strong(expected, true)) return i;
  }
  return -1;  // more at once than the slots: that one is not cleaned up on interrupt
}

}  // namespace

void InstallInterruptHandler() {
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

RemoveOnInterrupt::RemoveOnInterrupt(const std::string& path) : slot_(Claim(g_paths)) {
  if (slot_ < 0 || path.size() >= kPathMax) return;
  std::memcpy(g_paths[slot_].path, path.c_str(), path.size() + 1);
  g_paths[slot_].ready = true;
}

RemoveOnInterrupt::~RemoveOnInterrupt() {
  if (slot_ < 0) return;
  g_paths[slot_].ready = false;
  g_paths[slot_].used = false;
}

StopOnInterrupt::StopOnInterrupt(pid_t pid) : slot_(Claim(g_pids)) {
  if (slot_ >= 0) g_pids[slot_].pid = pid;
}

StopOnInterrupt::~StopOnInterrupt() {
  if (slot_ < 0) return;
  g_pids[slot_].pid = 0;
  g_pids[slot_].used = false;
}

}  // namespace tpu
