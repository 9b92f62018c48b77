// The timing of one external-memory port as the fast engine sees it: the same rules as the
// SystemC system's MemoryPort (sim/system/memory_port.h), without the bytes, which the fast
// engine moves per instruction instead. A request is accepted when the channel is free;
// a row keeps the channel busy for ceil(row_bytes / bytes_per_cycle) cycles; read data
// comes back latency_cycles after that, in order, at most one row per cycle.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace tpu::fast {

inline constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

class MemoryTiming {
 public:
  MemoryTiming(uint64_t row_bytes, uint64_t bytes_per_cycle, uint64_t latency_cycles)
      : occupancy_((row_bytes + bytes_per_cycle - 1) / bytes_per_cycle), latency_(latency_cycles) {}

  void Reset() {
    busy_until_ = 0;
    head_ = tail_ = 0;
  }
  bool Ready(uint64_t cycle) const { return cycle >= busy_until_; }
  // A request accepted at the clock edge that ends `cycle`.
  void Accept(uint64_t cycle, bool read) {
    busy_until_ = cycle + occupancy_;
    if (!read) return;
    if (tail_ - head_ == due_.size()) Grow();
    due_[tail_++ & (due_.size() - 1)] = cycle + occupancy_ + latency_;
  }
  // Whether a read row is presented to the chip during `cycle` (once per cycle).
  bool Respond(uint64_t cycle) {
    if (head_ == tail_ || due_[head_ & (due_.size() - 1)] > cycle) return false;
    ++head_;
    return true;
  }
  // The first cycle after `cycle` in which Ready() or Respond() can change.
  uint64_t NextEvent(uint64_t cycle) const {
    uint64_t next = busy_until_ > cycle ? busy_until_ : kNever;
    if (head_ != tail_) {
      const uint64_t due = due_[head_ & (due_.size() - 1)];
      if (due < next) next = due;
    }
    return next;
  }

 private:
  void Grow() {
    std::vector<uint64_t> bigger(due_.size() * 2);
    for (uint64_t i = head_; i < tail_; ++i) bigger[i - head_] = due_[i & (due_.size() - 1)];
    tail_ -= head_;
    head_ = 0;
    due_.swap(bigger);
  }

  uint64_t occupancy_, latency_;
  uint64_t busy_until_ = 0;
  std::vector<uint64_t> due_ = std::vector<uint64_t>(64);  // a power of two
  uint64_t head_ = 0, tail_ = 0;
};

}  // namespace tpu::fast
