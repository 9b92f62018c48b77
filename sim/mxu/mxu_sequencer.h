// Cycle-level driver policy of the matrix subsystem, shared by the C++ and SystemC
// engines: what to present on the input ports each cycle, and what to do with what
// the RTL answers. It keeps the weight and activation streams as full as the RTL's
// ready signals allow and reads every accumulator row as soon as it is final.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "sim/mxu/mxu_workload.h"

namespace tpu::sim {

// Values for the input ports during one cycle.
struct MxuInputs {
  bool w_valid = false;
  std::vector<int8_t> w_data;  // ArrayDim operands of OperandBytes() each
  bool a_valid = false;
  std::vector<int8_t> a_data;
  bool a_switch = false;
  RowTag a_tag;
  bool rd_en = false;
  uint32_t rd_addr = 0;
};

// Registered outputs seen at the start of a cycle (results of the previous edge).
struct MxuRegisteredOutputs {
  bool rd_valid = false;
  const int32_t* rd_data = nullptr;  // ArrayDim values when rd_valid
  bool final_valid = false;
  uint32_t final_addr = 0;
  bool error = false;
};

class MxuSequencer {
 public:
  // A run that moves nothing for watchdog_cycles cycles in a row is stuck: Commit()
  // then throws std::runtime_error saying what was still waiting.
  MxuSequencer(MxuWorkload& workload, uint64_t watchdog_cycles);

  // Consumes the registered outputs and fills the inputs for this cycle.
  void Present(const MxuRegisteredOutputs& outputs, MxuInputs* inputs);
  // Records which handshakes complete at this cycle's clock edge.
  void Commit(const MxuInputs& inputs, bool w_ready, bool a_ready);

  bool Done() const { return results_taken_ == workload_.NumResults(); }
  // Fraction of result rows taken, for progress bars.
  double Progress() const;

 private:
  [[noreturn]] void Stuck(const MxuInputs& inputs) const;

  MxuWorkload& workload_;
  int dim_;
  int row_bytes_;
  int64_t num_tiles_;
  int64_t w_tile_ = 0;
  int w_row_ = 0;
  int64_t a_tile_ = 0;
  int a_row_ = 0;
  std::deque<int64_t> in_flight_ids_;  // result ids of final folds, in issue order
  std::deque<int64_t> reading_ids_;    // ids whose read was issued last cycle
  int64_t results_taken_ = 0;
  bool progressed_ = false;
  uint64_t watchdog_cycles_;
  uint64_t quiet_cycles_ = 0;
  uint64_t cycle_ = 0;
};

}  // namespace tpu::sim
