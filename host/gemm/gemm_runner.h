// Runs a tiled GEMM on the matrix-subsystem RTL and checks it against Eigen.
#pragma once

#include <cstdint>
#include <string>

#include "host/common/npy.h"
#include "host/gemm/gemm_plan.h"
#include "sim/mxu/mxu_counters.h"
#include "sim/mxu/mxu_engine.h"

namespace tpu::gemm {

struct GemmMismatch {
  int64_t row = 0, col = 0;
  int32_t got = 0, want = 0;
};

struct GemmRunResult {
  GemmPlan plan;
  std::string engine;
  sim::MxuCounters counters;
  sim::MxuParams params;
  PredictedCycles predicted;
  Matrix<int32_t> c;
  bool matches_reference = false;
  int64_t mismatches = 0;
  GemmMismatch first_mismatch;
  double wall_seconds = 0;
};

// C = A x B with int32 wrap-around, as the hardware computes it (exact for K <= kMaxSafeK).
Matrix<int32_t> ReferenceGemm(const Matrix<int8_t>& a, const Matrix<int8_t>& b);

// Random int8 matrix, uniform over [-128, 127], reproducible from the seed.
Matrix<int8_t> RandomInt8(int64_t rows, int64_t cols, uint64_t seed);

// Runs the plan on the engine. Throws RuntimeError when the model's built parameters
// disagree with the plan or the run fails.
GemmRunResult RunGemm(const GemmPlan& plan, const Matrix<int8_t>& a, const Matrix<int8_t>& b,
                      sim::MxuEngine& engine, const sim::RunOptions& options);

}  // namespace tpu::gemm
