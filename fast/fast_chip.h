// The fast engine: the whole tpusim chip as plain C++, cycle-exact with the RTL
// (rtl/tpu_top.sv in the SystemC system of sim/) on every counter, for any array size and
// buffer depth chosen at run time.
//
// How: the control is simulated cycle by cycle with the same registers as the RTL's units
// (controller and instruction queue, host and weight DMA, weight FIFO, matrix feeder,
// the matrix unit's shadow control and row pipeline, activation unit and VPU pipeline)
// and the same memory-port timing as the system; the values are computed in bulk, one
// instruction at a time (fast/chip_values.h), on a second thread while the cycle loop goes
// on (fast/value_worker.h). Stretches in which nothing but time moves
// (everything waits for a memory or for rows in flight) are skipped in one step, with the
// counters advanced by what each of those cycles adds; stretches in which rows move a row a
// cycle (a matmul streaming, an activate, a drain) and nothing else changes take only the
// units' clock edges, their counters advanced at once. docs/timing.md states the rules;
// `tpusim cosim` holds this model and the RTL equal on random programs.
//
// Thread-safe in the sense that matters: instances share nothing, so independent jobs run
// in parallel on separate instances (each with its own value worker).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "contract/tpu_contract.h"
#include "fast/chip_params.h"
#include "fast/chip_values.h"
#include "fast/mem_arbiter.h"
#include "fast/memory_timing.h"
#include "fast/value_worker.h"
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

// A run of a chip of several cores: how it ended (an error on any core, else the watchdog,
// else a core without halt, else halted), the cycle it ended in (the last core's end), and
// each core's own result (its end, the cycle it ended in, its counters).
struct ChipRunResult {
  RunEnd end = RunEnd::kHalted;
  uint64_t cycles = 0;
  std::vector<RunResult> cores;
};

// A core's program: `count` instruction words (16 bytes each); none for a core not started.
struct CoreProgram {
  const uint8_t* words = nullptr;
  size_t count = 0;
};

struct RunOptions {
  uint64_t watchdog_cycles = 100000;
  bool timing_only = false;  // skip the values: counters only
  // Cycles [first, first + count) of core `core`: the issue state (hw::Issue), the busy
  // units (bits hw::kUnit*) and obs_o (rtl/tpu_top.sv: the matrix unit's cycle, bits 2:0;
  // host memory, weight memory and weight FIFO stalls, bits 3 to 5) and the busy matrix
  // units (mxu_busy_o, bit m: unit m); called for every cycle that ends in a clock edge
  // while the core runs (a core's cycles 0 .. its end - 1; none for a core not started).
  std::function<void(int core, uint64_t first, uint64_t count, uint8_t issue, uint8_t busy,
                     uint8_t obs, uint8_t mxus)>
      on_cycles;
  // Called about every 65,536 cycles with the fraction of instructions handed over.
  std::function<void(double)> progress;
};

class FastChip {
 public:
  // A chip of params.cores cores (rtl/tpu_chip.sv; 1: rtl/tpu_top.sv). Throws
  // std::invalid_argument for parameters the model cannot honour.
  explicit FastChip(const ChipParams& params);
  ~FastChip();

  const ChipParams& Params() const { return p_; }
  int Cores() const { return static_cast<int>(values_.size()); }
  uint8_t* HostMemory() { return external_.host.get(); }
  uint8_t* WeightMemory() { return external_.weight.get(); }

  // Resets the chip and runs `count` instruction words (16 bytes each) on core 0 to the
  // end: halt, a chip error, no progress for watchdog_cycles, or the program ending
  // without halt.
  RunResult Run(const uint8_t* words, size_t count, const RunOptions& options);
  // Resets the chip and runs each core's program (at most Cores()) until every core has
  // ended; a core ends as Run's does, and keeps being clocked until the last one has.
  ChipRunResult RunCores(const std::vector<CoreProgram>& programs, const RunOptions& options);

 private:
  struct Core;
  bool EndCores(std::vector<Core>* cores, uint64_t cycle);
  static Requests Asking(const std::vector<Core>& cores);
  Answers Answer(const Requests& r, const MemArbiter& host_arb, uint64_t cycle) const;
  void Take(const Requests& r, const Answers& a, MemArbiter* host_arb, uint64_t cycle);
  bool StepPorts(std::vector<Core>* cores, MemArbiter* host_arb, uint64_t cycle, uint64_t iq_depth);
  static void StopOnWatchdog(std::vector<Core>* cores, uint64_t cycle, uint64_t quiet);
  void LoadCores(const std::vector<CoreProgram>& programs, bool timing_only,
                 std::vector<Core>* cores, uint64_t* total_words);
  bool DecideAndCount(std::vector<Core>* cores, uint64_t cycle, const RunOptions& o,
                      uint64_t* repeats);
  void SkipSteady(std::vector<Core>* cores, uint64_t* cycle, uint64_t* quiet, const RunOptions& o);
  void SkipRegular(std::vector<Core>* cores, MemArbiter* host_arb, uint64_t* cycle, uint64_t k,
                   const RunOptions& o);
  static ChipRunResult Results(std::vector<Core>* cores, size_t programs, uint64_t cycles);

  ChipParams p_;
  ExternalMemories external_;
  std::vector<std::unique_ptr<ChipValues>> values_;
  MemoryTiming host_, weight_;
  Requests asked_;      // this cycle's requests of the memories
  Answers answered_;    // and their answers
  ValueWorker worker_;  // declared last: joined before the values it applies go
};

}  // namespace tpu::fast
