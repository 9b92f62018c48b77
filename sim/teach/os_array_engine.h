// The output-stationary array (rtl/tpu_os_top.sv) as an engine: C = A x B, tile by tile,
// on a teaching model. Only `tpusim teach` and its tests use it; the chip is
// weight-stationary.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace tpu::sim {

struct OsOperands {
  int64_t m = 0, k = 0, n = 0;
  std::vector<int8_t> a;  // m x k, row-major
  std::vector<int8_t> b;  // k x n, row-major
};

// The RTL's own counters (tpu_os_top cnt_*), read after the run.
struct OsCounters {
  uint64_t cycles = 0;        // every cycle from reset to the last result row
  uint64_t beat_cycles = 0;   // an input beat (column of A, row of B) entered
  uint64_t flush_cycles = 0;  // the wavefront crossing the array after a tile's last beat
  uint64_t drain_cycles = 0;  // a row of results leaving
};

struct OsRunResult {
  std::vector<int32_t> c;  // m x n, row-major
  OsCounters counters;
  uint64_t tiles = 0;
};

class OsArrayEngine {
 public:
  virtual ~OsArrayEngine() = default;
  // Runs the product; on_cycle (if set) is called in every cycle once its inputs have
  // settled, before the clock edge that ends it (as sim::RunOptions::on_cycle).
  // Throws std::runtime_error when the RTL stops making progress.
  virtual OsRunResult Run(const OsOperands& operands,
                          const std::function<void(uint64_t)>& on_cycle) = 0;
};

}  // namespace tpu::sim
