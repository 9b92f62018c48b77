// The bandwidth rule of an external memory's DMA port, one home for both engines (the
// SystemC system's MemoryPort and the fast engine's MemoryTiming; docs/timing.md, "External
// memories"). The channel moves bytes_per_cycle bytes in every cycle. A request of
// row_bytes starts where the previous request's bytes end, or at the start of the cycle
// that accepts it when the channel was idle; a request is accepted in any cycle in which the
// previous request's last byte leaves the channel before that cycle ends. Rows that follow
// each other so take row_bytes / bytes_per_cycle cycles each, fractions carried from row to
// row (TPU v1's 256-byte weight rows at 48 B/cycle: 5 1/3 cycles, 34 GB/s at 700 MHz, not
// the 6 cycles a whole-cycle rule would take), and at least one cycle (one request per
// cycle). A read row is presented latency_cycles after the cycle its last byte arrives in.
//
// Each matrix unit's weight DMA has its own port to the weight memory (a core of several
// units has several, a chip of several cores each core's), and the ports share the memory's
// one channel (PortTurns): in a cycle the asking ports are taken in turn while the channel
// can take another request, so the DMAs together move up to bytes_per_cycle bytes a cycle,
// each at most one row a cycle.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tpu::hw {

class MemoryChannel {
 public:
  MemoryChannel(uint64_t row_bytes, uint64_t bytes_per_cycle, uint64_t latency_cycles)
      : row_bytes_(row_bytes), bytes_per_cycle_(bytes_per_cycle), latency_(latency_cycles) {}

  void Reset() { end_ = 0; }
  // The first cycle in which a request can be accepted.
  uint64_t FreeFrom() const { return end_ / bytes_per_cycle_; }
  bool Ready(uint64_t cycle) const { return cycle >= FreeFrom(); }
  // Accepts a request at the clock edge that ends `cycle` (Ready(cycle) must hold); returns
  // the cycle in which its read data is presented to the chip.
  uint64_t Accept(uint64_t cycle) {
    end_ = std::max(end_, cycle * bytes_per_cycle_) + row_bytes_;
    return (end_ + bytes_per_cycle_ - 1) / bytes_per_cycle_ + latency_;
  }
  // Average cycles per row while rows follow each other: what bounds and schedules use.
  static double RowCycles(uint64_t row_bytes, uint64_t bytes_per_cycle) {
    return std::max(1.0, static_cast<double>(row_bytes) / static_cast<double>(bytes_per_cycle));
  }

 private:
  uint64_t row_bytes_, bytes_per_cycle_, latency_;
  uint64_t end_ = 0;  // where the last accepted request's bytes end, in bytes of channel time
};

// The turns of several ports (a weight DMA's each, at most 64) at one channel. In every cycle the ports that
// ask are taken in order, starting from the port after the one taken last and wrapping
// round, for as long as the channel is ready; the first port the channel cannot take ends
// the cycle's turns (it asks first in the next cycle). With one port: the port, alone.
class PortTurns {
 public:
  explicit PortTurns(int ports) : ports_(ports) {}
  void Reset() { next_ = 0; }
  // Serves `asking` (bit p: port p asks) in the cycle: `ready()` says whether the channel
  // can take a request now, `take(p)` gives it port p's. Returns the ports taken.
  template <class Ready, class Take>
  uint64_t Serve(uint64_t asking, Ready&& ready, Take&& take) {
    uint64_t taken = 0;
    for (int k = 0, p = next_; k < ports_; ++k, p = p + 1 == ports_ ? 0 : p + 1) {
      if (!(asking >> p & 1u)) continue;
      if (!ready()) break;
      take(p);
      taken |= uint64_t{1} << p;
      next_ = p + 1 == ports_ ? 0 : p + 1;
    }
    return taken;
  }

 private:
  int ports_;
  int next_ = 0;  // the port first in line
};

}  // namespace tpu::hw
