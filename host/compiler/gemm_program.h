// A GEMM as a TPU program: C = A x B tiled onto the N x N chip, each output column tile
// requantized to int8 by its own VPU parameter set, with the host and weight memory
// images it needs. Used by the chip tests and benchmarks; a small example of what a
// compiler for the chip emits (docs/isa.md, docs/architecture.md).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "host/common/npy.h"
#include "host/compiler/core_split.h"
#include "host/engine/chip_engine.h"

namespace tpu::compiler {

// One VPU parameter set per N output columns, lane by lane.
struct GemmParams {
  std::vector<int32_t> bias, multiplier, shift;  // one per output column (nt x N)
};

struct GemmProgram {
  engine::ExecJob job;  // program, memory images, the output range to read back
  int64_t m = 0, k = 0, cols = 0, n = 0, kt = 0, nt = 0;
  GemmParams params;
  std::vector<uint32_t> bias_bf16;  // a bf16 program's float32 biases, one per output column

  // The int8 outputs the program must produce, from int32 products.
  Matrix<int8_t> Expected(const Matrix<int32_t>& c) const;
  // The outputs read back from host memory, as an m x cols matrix.
  Matrix<int8_t> Unpack(const std::vector<uint8_t>& out) const;
  // A bf16 program's: the bfloat16 outputs (m x cols, row-major) from the float32 products
  // (arith::Bf16Gemm with n-row K tiles), and those read back.
  std::vector<uint16_t> ExpectedBf16(const std::vector<uint32_t>& c) const;
  std::vector<uint16_t> UnpackBf16(const std::vector<uint8_t>& out) const;
};

// Random parameters for `columns` lanes: biases in +-2^15, multipliers in [2^30, 2^31),
// shifts in [shift_lo, shift_hi].
GemmParams RandomGemmParams(int64_t columns, std::mt19937& rng, int shift_lo, int shift_hi);

// C = A x B on the chip: A in column blocks of n in the unified buffer, B in n x n tiles
// streamed through the weight FIFO, K folded by accumulating matmuls, every output column
// tile requantized by its own parameter set. `overlap` lets the weight DMA run ahead of the
// matrix unit (one read_weights for all tiles); otherwise each tile is fetched and used
// with a sync on either side.
GemmProgram MakeGemmProgram(const Matrix<int8_t>& a, const Matrix<int8_t>& b, int n, bool overlap,
                            uint64_t seed = 7);
// The same on a bf16 chip: bfloat16 operands, random float32 biases (normal), no bound, the
// outputs rounded to bfloat16 (docs/bf16.md).
GemmProgram MakeGemmProgramBf16(const Matrix<uint16_t>& a, const Matrix<uint16_t>& b, int n,
                                bool overlap, uint64_t seed = 7);

// How a GEMM is spread over the cores: A's rows (data parallel: every core uses all of B)
// or B's columns in whole N-column tiles (model parallel: every core reads all of A, and
// only its own weight tiles).
enum class CoreSplit { kRows, kColumns };

// The int8 GEMM on a chip of several cores: core c computes a block of rows or of columns
// (blocks as even as whole rows, or whole N-column tiles, allow; in core order), each block
// a GemmProgram of its own with the parameter sets of its columns, combined by
// CombineCoreJobs (split by rows, the cores share B's tiles in weight memory).
struct GemmOnCores {
  CoreSplit split = CoreSplit::kRows;
  CoreJobs jobs;
  std::vector<GemmProgram> parts;  // per core (a core without a block has none)
  std::vector<int64_t> first;      // the first row (column) of each part
  GemmProgram whole;               // the shape and parameter sets of the whole (no job)
  // The outputs of the whole, m x cols, from the job's read-back.
  Matrix<int8_t> Unpack(const std::vector<uint8_t>& out) const;
  // The int8 outputs the job must produce, from the whole's int32 products.
  Matrix<int8_t> Expected(const Matrix<int32_t>& c) const { return whole.Expected(c); }
};
GemmOnCores MakeGemmOnCores(const Matrix<int8_t>& a, const Matrix<int8_t>& b, int n, bool overlap,
                            int cores, CoreSplit split = CoreSplit::kRows, uint64_t seed = 7);

}  // namespace tpu::compiler
