// The timing of one external-memory port as the fast engine sees it: the channel rule both
// engines share (contract/memory_channel.h) and the rows in flight, without the bytes, which
// the fast engine moves per instruction instead. Read rows come back in order, at most one
// row per cycle.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "contract/memory_channel.h"

namespace tpu::fast {

inline constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

class MemoryTiming {
 public:
  MemoryTiming(uint64_t row_bytes, uint64_t bytes_per_cycle, uint64_t latency_cycles)
      : channel_(row_bytes, bytes_per_cycle, latency_cycles) {}

  void Reset() {
    channel_.Reset();
    head_ = tail_ = 0;
  }
  bool Ready(uint64_t cycle) const { return channel_.Ready(cycle); }
  // A request accepted at the clock edge that ends `cycle`, tagged with the core that asked.
  void Accept(uint64_t cycle, bool read, int tag = 0) {
    const uint64_t due = channel_.Accept(cycle);
    if (!read) return;
    if (tail_ - head_ == due_.size()) Grow();
    due_[tail_ & (due_.size() - 1)] = due;
    tags_[tail_++ & (due_.size() - 1)] = tag;
  }
  // The tag of the read row presented to the chip during `cycle`, or -1 (once per cycle).
  int Respond(uint64_t cycle) {
    if (head_ == tail_ || due_[head_ & (due_.size() - 1)] > cycle) return -1;
    return tags_[head_++ & (due_.size() - 1)];
  }
  // The first cycle after `cycle` in which Ready() or Respond() can change.
  uint64_t NextEvent(uint64_t cycle) const {
    const uint64_t free = channel_.FreeFrom();
    uint64_t next = free > cycle ? free : kNever;
    if (head_ != tail_) {
      const uint64_t due = due_[head_ & (due_.size() - 1)];
      if (due < next) next = due;
    }
    return next;
  }

 private:
  void Grow() {
    std::vector<uint64_t> bigger(due_.size() * 2);
    std::vector<int> bigger_tags(due_.size() * 2);
    for (uint64_t i = head_; i < tail_; ++i) {
      bigger[i - head_] = due_[i & (due_.size() - 1)];
      bigger_tags[i - head_] = tags_[i & (due_.size() - 1)];
    }
    tail_ -= head_;
    head_ = 0;
    due_.swap(bigger);
    tags_.swap(bigger_tags);
  }

  hw::MemoryChannel channel_;
  std::vector<uint64_t> due_ = std::vector<uint64_t>(64);  // a power of two
  std::vector<int> tags_ = std::vector<int>(64);
  uint64_t head_ = 0, tail_ = 0;
};

}  // namespace tpu::fast
