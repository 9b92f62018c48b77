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
  int32_t got = 0, want = 0;  // bf16: float32 bit patterns
};

struct GemmRunResult {
  GemmPlan plan;
  std::string engine;
  sim::MxuCounters counters;
  sim::MxuParams params;
  PredictedCycles predicted;
  bool bf16 = false;  // bfloat16 operands; c holds float32 bit patterns
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

// The same in bfloat16 (bit patterns in, float32 bit patterns out), checked against
// arith::Bf16Gemm with the plan's array size as the tile (docs/bf16.md).
GemmRunResult RunGemmBf16(const GemmPlan& plan, const Matrix<uint16_t>& a,
                          const Matrix<uint16_t>& b, sim::MxuEngine& engine,
                          const sim::RunOptions& options);

// The reference of RunGemmBf16.
Matrix<int32_t> ReferenceGemmBf16(const Matrix<uint16_t>& a, const Matrix<uint16_t>& b,
                                  int array_dim);

// Random bfloat16 matrix: normal values of mean 0 and deviation 1 rounded to bfloat16,
// reproducible from the seed.
Matrix<uint16_t> RandomBf16(int64_t rows, int64_t cols, uint64_t seed);

// RandomInt8 or RandomBf16, by operand type (int8_t or uint16_t), for callers of both.
template <class T>
Matrix<T> RandomOperand(int64_t rows, int64_t cols, uint64_t seed) {
  if constexpr (sizeof(T) == 1) {
    return RandomInt8(rows, cols, seed);
  } else {
    return RandomBf16(rows, cols, seed);
  }
}

}  // namespace tpu::gemm
