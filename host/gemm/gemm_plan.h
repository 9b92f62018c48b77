// How a GEMM C[M x N] = A[M x K] x B[K x N] is tiled onto an array_dim x array_dim
// weight-stationary array, and the closed-form cycle count of that tiling on the RTL
// (derived in docs/mxu.md; the tests hold the RTL to it).
#pragma once

#include <cstdint>

namespace tpu::gemm {

struct GemmShape {
  int64_t m = 0;
  int64_t k = 0;
  int64_t n = 0;
};

struct GemmPlan {
  GemmShape shape;
  int array_dim = 0;
  int acc_depth_rows = 0;
  int64_t k_tiles = 0;   // ceil(K / array_dim): folds accumulated at the same address
  int64_t n_tiles = 0;   // ceil(N / array_dim): column blocks of C
  int64_t m_chunk = 0;   // rows streamed per tile: min(M, acc_depth_rows)
  int64_t m_chunks = 0;  // ceil(M / m_chunk)
  int64_t tiles = 0;     // m_chunks * n_tiles * k_tiles weight tiles, in that nesting

  int64_t RowsInChunk(int64_t chunk) const;
  // Multiply-accumulates the GEMM needs, M * K * N.
  int64_t UsefulMacs() const { return shape.m * shape.k * shape.n; }
  // Multiply-accumulates the array performs: every streamed row uses all N x N PEs.
  int64_t IssuedMacs() const;
};

// Throws UsageError for empty or absurd shapes.
GemmPlan PlanGemm(const GemmShape& shape, int array_dim, int acc_depth_rows);

// Cycles the RTL takes for the plan, by the formula of docs/mxu.md, split the way the
// RTL's counters split them.
struct PredictedCycles {
  uint64_t total = 0;
  uint64_t stream = 0;
  uint64_t load = 0;
  uint64_t drain = 0;
};
PredictedCycles PredictCycles(const GemmPlan& plan);

// The output-stationary teaching array (rtl/tpu_os_top.sv) on C = A x B (M x K by K x N):
// ceil(M/dim) x ceil(N/dim) tiles of C, each K beats, a flush of 2 (dim - 1) cycles and a
// drain of dim cycles, one tile after another.
struct PredictedOsCycles {
  uint64_t total = 0;
  uint64_t tiles = 0;
  uint64_t beats = 0;  // K per tile
  uint64_t flush = 0;  // 2 (dim - 1) per tile
  uint64_t drain = 0;  // dim per tile
};
PredictedOsCycles PredictOsCycles(int64_t m, int64_t k, int64_t n, int dim);

// Largest K for which no int8 x int8 dot product can overflow int32:
// K * (-128)^2 <= 2^31 - 1.
inline constexpr int64_t kMaxSafeK = 131071;

}  // namespace tpu::gemm
