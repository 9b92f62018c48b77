// The matrix subsystem (rtl/tpu_mxu_top.sv: the matrix unit, its accumulators and
// counters) as plain C++, behind the same MxuEngine interface as its Verilated models, so
// `tpusim gemm --engine fast` runs any array size without a build. Cycle-exact with the
// RTL: the same handshakes, the same 2N-cycle row pipeline, the same counters; each row's
// result is computed when it enters the array (with the tile that is active for it, which
// the switch bit decides exactly as in the PEs).
#pragma once

#include <string>

#include "sim/mxu/mxu_engine.h"

namespace tpu::fast {

class FastMxuEngine final : public sim::MxuEngine {
 public:
  // Throws std::invalid_argument for an array size outside 2..512 or a depth below 2.
  // input_bits: 8 (int8 operands, int32 sums) or 16 (bfloat16 operands, float32 sums,
  // docs/bf16.md).
  FastMxuEngine(int array_dim, int acc_depth, int input_bits = 8);

  std::string Name() const override { return "fast"; }
  sim::MxuParams Params() override { return params_; }
  sim::MxuRunResult Run(sim::MxuWorkload& workload, const sim::RunOptions& options) override;

 private:
  sim::MxuParams params_;
};

}  // namespace tpu::fast
