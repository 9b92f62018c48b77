// Timing of one DMA port of an external memory, cycle by cycle. The chip asks for one row
// (row_bytes) per request. The port accepts a request when its channel can (the rule both
// engines share, contract/memory_channel.h: bytes_per_cycle bytes each cycle, fractions
// carried); read data comes back latency_cycles after its last byte, in order, one row per
// cycle at most, with the tag of its request (the core that asked, on a chip of several).
// Writes are posted: the bytes land in memory when the request is accepted. A port of
// several (the weight memory: one per matrix unit's weight DMA) serves its ports in turn
// from the one channel, each port's rows in order, one a cycle per port.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

#include "contract/memory_channel.h"
#include "sim/system/memory_model.h"

namespace tpu::sim {

class MemoryPort {
 public:
  // `ports` ports into the one channel (a port per weight DMA for the weight memory: one a
  // matrix unit of each core; docs/timing.md), each with its read rows in order.
  MemoryPort(MemoryModel& memory, int row_bytes, int ports = 1)
      : memory_(memory),
        row_bytes_(row_bytes),
        channel_(static_cast<uint64_t>(row_bytes), memory.Timing().bytes_per_cycle,
                 memory.Timing().latency_cycles),
        turns_(ports),
        pending_(static_cast<size_t>(ports)),
        current_(static_cast<size_t>(ports)) {}

  void Reset() {
    channel_.Reset();
    turns_.Reset();
    for (auto& p : pending_) p.clear();
  }

  bool Ready(uint64_t cycle) const { return channel_.Ready(cycle); }

  // A request accepted at the clock edge that ends `cycle`; a read row goes to `port`'s
  // rows. Throws std::out_of_range (from the memory) for an address outside it.
  void Accept(uint64_t cycle, bool write, uint64_t addr, const uint8_t* data, int tag = 0,
              int port = 0) {
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
    pending_[static_cast<size_t>(port)].push_back(std::move(p));
  }

  // The requests of the asking ports (bit p: port p; `request(p)` its write flag, address
  // and a written row's bytes), taken in turn while the channel can (hw::PortTurns).
  // Returns the ports taken.
  struct PortRequest {
    bool write = false;
    uint64_t addr = 0;
    const uint8_t* data = nullptr;
  };
  template <class Request>
  uint64_t AcceptRequests(uint64_t cycle, uint64_t asking, Request&& request) {
    return turns_.Serve(
        asking, [&] { return channel_.Ready(cycle); },
        [&](int p) {
          const PortRequest r = request(p);
          Accept(cycle, r.write, r.addr, r.data, 0, p);
        });
  }

  // The read row `port` presents to the chip during `cycle`, or nullptr; its request's tag
  // into *tag. Call once per cycle and port.
  const uint8_t* Respond(uint64_t cycle, int* tag = nullptr, int port = 0) {
    std::vector<uint8_t>& current = current_[static_cast<size_t>(port)];
    std::deque<Pending>& pending = pending_[static_cast<size_t>(port)];
    if (!current.empty()) current.clear();
    if (pending.empty() || pending.front().due > cycle) return nullptr;
    if (tag != nullptr) *tag = pending.front().tag;
    current = std::move(pending.front().data);
    pending.pop_front();
    return current.data();
  }

  bool Idle() const {
    return std::all_of(pending_.begin(), pending_.end(), [](const auto& p) { return p.empty(); });
  }

 private:
  struct Pending {
    uint64_t due = 0;
    int tag = 0;
    std::vector<uint8_t> data;
  };
  MemoryModel& memory_;
  int row_bytes_;
  hw::MemoryChannel channel_;
  hw::PortTurns turns_;
  std::vector<std::deque<Pending>> pending_;  // per port
  std::vector<std::vector<uint8_t>> current_;
};

}  // namespace tpu::sim
