// Runs a tiled GEMM on the matrix-subsystem RTL and checks it against the reference product.
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

// C = A x B as the array computes it, in the format of operands T (arith/format.h's Gemm):
// int8, exact with int32 wrap-around; bfloat16, float32 bit patterns summed in K tiles of
// `tile` rows, the array's side (which an int8 product, exact in any order, may leave 0).
template <class T>
Matrix<int32_t> ReferenceGemm(const Matrix<T>& a, const Matrix<T>& b, int tile = 0);

// Random int8 matrix, uniform over [-128, 127], reproducible from the seed.
Matrix<int8_t> RandomInt8(int64_t rows, int64_t cols, uint64_t seed);

// Random bfloat16 matrix: normal values of mean 0 and deviation 1 rounded to bfloat16,
// reproducible from the seed.
Matrix<uint16_t> RandomBf16(int64_t rows, int64_t cols, uint64_t seed);

// Runs the plan on the engine, checked against ReferenceGemm with the plan's array size as
// the tile; T int8_t, or uint16_t (bfloat16 bit patterns in, float32 bit patterns out,
// docs/bf16.md). Throws RuntimeError when the model's built parameters disagree with the
// plan or the run fails.
template <class T>
GemmRunResult RunGemm(const GemmPlan& plan, const Matrix<T>& a, const Matrix<T>& b,
                      sim::MxuEngine& engine, const sim::RunOptions& options);

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
