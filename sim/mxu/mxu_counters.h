// The matrix subsystem's performance counters, as read from the RTL after a run.
#pragma once

#include <cstdint>

namespace tpu::sim {

struct MxuCounters {
  uint64_t cycles = 0;         // clock edges since reset
  uint64_t stream_cycles = 0;  // an activation row entered the array
  uint64_t load_cycles = 0;    // only a weight row was written
  uint64_t stall_cycles = 0;   // a row waited for weights that had not arrived
  uint64_t drain_cycles = 0;   // rows still in flight or being read out
  uint64_t idle_cycles = 0;    // nothing to do
  uint64_t weight_rows = 0;    // weight rows written into shadow registers
  uint64_t tiles = 0;          // weight switches (tiles started)
  uint64_t acc_writes = 0;     // accumulator row writes
  uint64_t acc_reads = 0;      // accumulator row reads
};

// Parameters the RTL model was built with, read back from its ports.
struct MxuParams {
  int array_dim = 0;
  int acc_depth = 0;
  int input_bits = 8;  // operand width: 8 (int8 x int8 into int32) or 16 (bf16 into float32)
};

}  // namespace tpu::sim
