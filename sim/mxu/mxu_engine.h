// A way of running the matrix-subsystem RTL on a workload: the plain C++ Verilated
// model, or the same RTL as a SystemC module under the SystemC kernel.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include "sim/mxu/mxu_counters.h"
#include "sim/mxu/mxu_workload.h"

namespace tpu::sim {

struct TraceOptions {
  std::string path;  // empty: no trace; *.fst or *.vcd
  uint64_t start_cycle = 0;
  uint64_t end_cycle = std::numeric_limits<uint64_t>::max();  // inclusive
};

struct RunOptions {
  TraceOptions trace;
  // A run that moves nothing (no row in, no weight in, no result out) for this many
  // cycles is stopped with an error: the RTL is stuck.
  uint64_t watchdog_cycles = 100000;
  // Called now and then with the fraction of result rows done.
  std::function<void(double)> progress;
  // Called in every cycle (0, 1, ...) once the cycle's inputs have settled, before the
  // clock edge that ends it: registers hold what the previous cycle computed, and the
  // combinational signals show what this edge will take in (the C++ engine only).
  std::function<void(uint64_t)> on_cycle;
};

struct MxuRunResult {
  MxuCounters counters;
  MxuParams params;
};

class MxuEngine {
 public:
  virtual ~MxuEngine() = default;
  virtual std::string Name() const = 0;
  // The parameters the RTL was built with, read back from the model.
  virtual MxuParams Params() = 0;
  // Resets the RTL, runs the workload to completion, returns the RTL's counters.
  // Throws std::runtime_error when the RTL flags an error or the watchdog fires.
  virtual MxuRunResult Run(MxuWorkload& workload, const RunOptions& options) = 0;
};

}  // namespace tpu::sim
