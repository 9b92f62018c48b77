// The fast engine: the whole tpusim chip as plain C++, cycle-exact with the RTL
// (rtl/tpu_top.sv in the SystemC system of sim/) on every counter, for any array size and
// buffer depth chosen at run time.
//
// How: the control is simulated cycle by cycle with the same registers as the RTL's units
// (controller and instruction queue, host and weight DMA, weight FIFO, matrix feeder,
// the matrix unit's shadow control and row pipeline, activation unit and VPU pipeline)
// and the same memory-port timing as the system; the values are computed in bulk, one
// instruction at a time (fast/chip_values.h). Stretches in which nothing but time moves
// (everything waits for a memory or for rows in flight) are skipped in one step, with the
// counters advanced by what each of those cycles adds. docs/timing.md states the rules;
// `tpusim cosim` holds this model and the RTL equal on random programs.
//
// Thread-safe in the sense that matters: instances share nothing, so independent jobs run
// in parallel on separate instances.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "contract/tpu_contract.h"
#include "fast/chip_params.h"
#include "fast/chip_values.h"
#include "fast/memory_timing.h"
#include "sim/system/stall_info.h"

namespace tpu::fast {

enum class RunEnd { kHalted, kError, kWatchdog, kNoHalt };

struct RunResult {
  RunEnd end = RunEnd::kHalted;
  hw::Status status = hw::Status::kOk;
  uint64_t error_pc = 0;
  uint64_t cycles = 0;  // the cycle in which the run ended (= the cycle counter)
  uint64_t fed = 0;     // instruction words handed to the chip
  hw::ChipCounters counters;
  sim::StallInfo stall;  // where a watchdog stop was stuck
};

struct RunOptions {
  uint64_t watchdog_cycles = 100000;
  bool timing_only = false;  // skip the values: counters only
  // Cycles [first, first + count) had issue state `issue` (hw::Issue) and busy units
  // `busy` (bits hw::kUnit*); called for every cycle that ends in a clock edge.
  // Cycles [first, first + count): the issue state, the busy units and obs_o
  // (rtl/tpu_top.sv: the matrix unit's cycle, bits 2:0; host memory, weight memory and
  // weight FIFO stalls, bits 3 to 5).
  std::function<void(uint64_t first, uint64_t count, uint8_t issue, uint8_t busy, uint8_t obs)>
      on_cycles;
  // Called about every 65,536 cycles with the fraction of instructions handed over.
  std::function<void(double)> progress;
};

class FastChip {
 public:
  // Throws std::invalid_argument for parameters the model cannot honour.
  explicit FastChip(const ChipParams& params);

  const ChipParams& Params() const { return p_; }
  uint8_t* HostMemory() { return values_.HostMemory(); }
  uint8_t* WeightMemory() { return values_.WeightMemory(); }

  // Resets the chip and runs `count` instruction words (16 bytes each) to the end: halt,
  // a chip error, no progress for watchdog_cycles, or the program ending without halt.
  RunResult Run(const uint8_t* words, size_t count, const RunOptions& options);

 private:
  ChipParams p_;
  ChipValues values_;
  MemoryTiming host_, weight_;
};

}  // namespace tpu::fast
