// Timing of one DMA port of an external memory, cycle by cycle. The chip asks for one row
// (row_bytes) per request. The port accepts a request when its channel can (the rule both
// engines share, contract/memory_channel.h: bytes_per_cycle bytes each cycle, fractions
// carried); read data comes back latency_cycles after its last byte, in order, one row per
// cycle at most, with the tag of its request (the core that asked, on a chip of several).
// Writes are posted: the bytes land in memory when the request is accepted.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "contract/memory_channel.h"
#include "sim/system/memory_model.h"

namespace tpu::sim {

class MemoryPort {
 public:
  MemoryPort(MemoryModel& memory, int row_bytes)
      : memory_(memory),
        row_bytes_(row_bytes),
        channel_(static_cast<uint64_t>(row_bytes), memory.Timing().bytes_per_cycle,
                 memory.Timing().latency_cycles) {}

  void Reset() {
    channel_.Reset();
    pending_.clear();
  }

  bool Ready(uint64_t cycle) const { return channel_.Ready(cycle); }

  // A request accepted at the clock edge that ends `cycle`. Throws std::out_of_range (from
  // the memory) for an address outside it.
  void Accept(uint64_t cycle, bool write, uint64_t addr, const uint8_t* data, int tag = 0) {
    const uint64_t due = channel_.Accept(cycle);
    if (write) {
      memory_.Write(addr, data, static_cast<uint64_t>(row_bytes_));
      return;
    }
    Pending p;
    p.due = due;
    p.tag = tag;
    p.data.resize(static_cast<size_t>(row_bytes_));
    memory_.Read(addr, p.data.data(), static_cast<uint64_t>(row_bytes_));
    pending_.push_back(std::move(p));
  }

  // The read row presented to the chip during `cycle`, or nullptr; its request's tag into
  // *tag. Call once per cycle.
  const uint8_t* Respond(uint64_t cycle, int* tag = nullptr) {
    if (!current_.empty()) current_.clear();
    if (pending_.empty() || pending_.front().due > cycle) return nullptr;
    if (tag != nullptr) *tag = pending_.front().tag;
    current_ = std::move(pending_.front().data);
    pending_.pop_front();
    return current_.data();
  }

  bool Idle() const { return pending_.empty(); }

 private:
  struct Pending {
    uint64_t due = 0;
    int tag = 0;
    std::vector<uint8_t> data;
  };
  MemoryModel& memory_;
  int row_bytes_;
  hw::MemoryChannel channel_;
  std::deque<Pending> pending_;
  std::vector<uint8_t> current_;
};

}  // namespace tpu::sim
