// GEMM tiling and its closed-form cycle count (see gemm_plan.h and docs/mxu.md).
#include "host/gemm/gemm_plan.h"

#include <algorithm>
#include <string>

#include "host/common/errors.h"

namespace tpu::gemm {
namespace {

constexpr int64_t kMaxDim = int64_t{1} << 20;
constexpr int64_t kMaxElements = int64_t{1} << 28;
// About an hour of simulation at the ~1e6 cycles/s of a 16 x 16 array.
constexpr uint64_t kMaxCycles = uint64_t{4} << 30;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

int64_t GemmPlan::RowsInChunk(int64_t chunk) const {
  return std::min(m_chunk, shape.m - chunk * m_chunk);
}

int64_t GemmPlan::IssuedMacs() const {
  return shape.m * n_tiles * k_tiles * int64_t{array_dim} * array_dim;
}

GemmPlan PlanGemm(const GemmShape& s, int array_dim, int acc_depth_rows) {
  for (auto [name, v] : {std::pair<const char*, int64_t>{"M", s.m}, {"K", s.k}, {"N", s.n}}) {
    if (v < 1) {
      throw UsageError(std::string("GEMM dimension ") + name + " = " + std::to_string(v) +
                       " is invalid; every dimension must be at least 1");
    }
    if (v > kMaxDim) {
      throw UsageError(std::string("GEMM dimension ") + name + " = " + std::to_string(v) +
                       " is too large; the limit is " + std::to_string(kMaxDim));
    }
  }
  for (auto [name, v] : {std::pair<const char*, int64_t>{"A (M x K)", s.m * s.k},
                         {"B (K x N)", s.k * s.n},
                         {"C (M x N)", s.m * s.n}}) {
    if (v > kMaxElements) {
      throw UsageError(std::string("matrix ") + name + " would have " + std::to_string(v) +
                       " elements; the limit is " + std::to_string(kMaxElements));
    }
  }
  GemmPlan p;
  p.shape = s;
  p.array_dim = array_dim;
  p.acc_depth_rows = acc_depth_rows;
  p.k_tiles = CeilDiv(s.k, array_dim);
  p.n_tiles = CeilDiv(s.n, array_dim);
  p.m_chunk = std::min<int64_t>(s.m, acc_depth_rows);
  p.m_chunks = CeilDiv(s.m, p.m_chunk);
  p.tiles = p.m_chunks * p.n_tiles * p.k_tiles;
  const uint64_t cycles = PredictCycles(p).total;
  if (cycles > kMaxCycles) {
    throw UsageError("this GEMM would take " + std::to_string(cycles) +
                     " simulated cycles; the limit is " + std::to_string(kMaxCycles) +
                     " (about an hour on a 16 x 16 array). Use a larger " + Field("array") +
                     " or smaller shapes");
  }
  return p;
}

PredictedCycles PredictCycles(const GemmPlan& p) {
  // Tile t streams M_t rows; tile t + 1 may start max(M_t, N) cycles after tile t
  // (its weights load in N cycles, starting when tile t's first row enters). The
  // first tile waits N cycles for its weights; the last row's result needs 2N cycles
  // to reach the accumulators and 1 more to be read: 2N + 1 after it entered.
  const uint64_t dim = static_cast<uint64_t>(p.array_dim);
  const uint64_t tiles_per_chunk = static_cast<uint64_t>(p.n_tiles * p.k_tiles);
  PredictedCycles c;
  c.load = dim;
  c.drain = 2 * dim + 1;
  for (int64_t chunk = 0; chunk < p.m_chunks; ++chunk) {
    const uint64_t rows = static_cast<uint64_t>(p.RowsInChunk(chunk));
    const bool last_chunk = (chunk == p.m_chunks - 1);
    // Every tile of the chunk but the very last of the run is followed by another.
    const uint64_t followed = last_chunk ? tiles_per_chunk - 1 : tiles_per_chunk;
    c.stream += rows * tiles_per_chunk;
    if (rows < dim) c.load += (dim - rows) * followed;
  }
  c.total = c.stream + c.load + c.drain;
  return c;
}

PredictedOsCycles PredictOsCycles(int64_t m, int64_t k, int64_t n, int dim) {
  const uint64_t d = static_cast<uint64_t>(dim);
  PredictedOsCycles c;
  c.tiles = static_cast<uint64_t>((m + dim - 1) / dim) * static_cast<uint64_t>((n + dim - 1) / dim);
  c.beats = c.tiles * static_cast<uint64_t>(k);
  c.flush = c.tiles * 2 * (d - 1);
  c.drain = c.tiles * d;
  c.total = c.beats + c.flush + c.drain;
  return c;
}

}  // namespace tpu::gemm
