// A GEMM as a TPU program: C = A x B compiled by the network compiler as the one dense
// layer it is (each of A's rows an image of k values, each output column requantized to int8
// by its own VPU parameters, or in bf16 rounded after its bias), with the host and weight
// memory images it needs. Used by the chip tests and benchmarks; the program is what the
// whole-network compiler emits for it (docs/compiler.md), so the GEMM is no lowering of its
// own.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "arith/format.h"
#include "host/common/npy.h"
#include "host/compiler/core_split.h"
#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"

namespace tpu::compiler {

// An int8 program's parameters, one per output column (nt x N), as vectors.
struct GemmParams {
  std::vector<int32_t> bias, multiplier, shift;
  std::vector<arith::Int8Format::Channel> Channels() const;
};

// A run of a GEMM program: the engine's result, and the outputs (an m x cols matrix) where
// the engine computes values (empty in timing-only runs).
template <class T>
struct GemmRun {
  engine::ExecResult result;
  Matrix<T> c;
};

class NetworkCompiler;

// The program of C = A x B in the format whose operands are T (int8_t, or bfloat16 bit
// patterns, uint16_t), compiled once for A's m rows and for B: GemmProgram in int8. Its
// executable holds B (the weight tiles) and the parameter sets, written when it is loaded;
// each run writes an A into region "inputs" and reads C from region "outputs".
template <class T>
struct GemmProgramOf {
  using Format = arith::FormatOf<T>;
  // The program and its regions (core_split.h's TakeExecutable): "inputs" (A, row by row as
  // the network compiler takes a batch of images), "outputs" (C), "host image" (the
  // parameter sets) and "weight image" (B's tiles).
  engine::Executable exe;
  int64_t m = 0, k = 0, cols = 0, n = 0, kt = 0, nt = 0;
  std::vector<typename Format::Channel> channels;  // one per output column
  std::shared_ptr<const NetworkCompiler> network;  // the dense layer it was compiled from

  // A (m x k) as region "inputs" holds it.
  std::vector<uint8_t> PackA(const Matrix<T>& a) const;
  // Writes A, runs, and reads C back, on an engine `exe` is loaded on (ChipEngine::Load).
  // Throws UsageError when A is not m x k.
  GemmRun<T> Run(engine::ChipEngine& engine, const Matrix<T>& a) const;
  // The outputs the program must produce from the products C (int32, or float32 bit
  // patterns: arith::Bf16Gemm with n-row K tiles), as an m x cols matrix.
  Matrix<T> Expected(const Matrix<int32_t>& c) const;
  // The outputs as region "outputs" holds them, as an m x cols matrix.
  Matrix<T> Unpack(const std::vector<uint8_t>& out) const;
};
using GemmProgram = GemmProgramOf<int8_t>;

// Random parameters for `columns` lanes: biases in +-2^15, multipliers in [2^30, 2^31),
// shifts in [shift_lo, shift_hi].
GemmParams RandomGemmParams(int64_t columns, std::mt19937& rng, int shift_lo, int shift_hi);

// C = A x B on chip `config` for an A of m rows, with seeded random parameters: int8,
// RandomGemmParams with shifts 39 to 43; bf16, float32 biases drawn from N(0, 1) and no bound
// (docs/bf16.md). Throws UsageError where the chip cannot run it (the network compiler's
// reason) or T is not the chip's format.
template <class T>
GemmProgramOf<T> MakeGemmProgram(int64_t m, const Matrix<T>& b, const config::TpuConfig& config,
                                 uint64_t seed = 7);

// How a GEMM is spread over the cores: A's rows (data parallel: every core uses all of B)
// or B's columns in whole N-column tiles (model parallel: every core reads all of A, and
// only its own weight tiles).
enum class CoreSplit { kRows, kColumns };

// The int8 GEMM on the chip's cores (config `cores`): core c computes a block of rows or of
// columns (blocks as even as whole rows, or whole N-column tiles, allow; in core order),
// each block a GemmProgram of its own with the parameter sets of its columns, compiled for
// cores that share the host link, combined by CombineCoreJobs (split by rows, the cores
// share B's tiles in weight memory) into one executable: TakeExecutable's, with core c's
// block of A in region InputsRegion(c), every core's C in region "outputs".
struct GemmOnCores {
  CoreSplit split = CoreSplit::kRows;
  engine::Executable exe;
  CoreJobs layout;                 // where each core's window lies (no images, no programs)
  std::vector<GemmProgram> parts;  // per core (a core without a block has none)
  std::vector<int64_t> first;      // the first row (column) of each part
  GemmProgram whole;               // the shape and parameter sets of the whole (no program)
  // Writes each core's block of A (m x k), runs, and reads the whole C back, on an engine
  // `exe` is loaded on.
  GemmRun<int8_t> Run(engine::ChipEngine& engine, const Matrix<int8_t>& a) const;
  // The int8 outputs the job must produce, from the whole's int32 products.
  Matrix<int8_t> Expected(const Matrix<int32_t>& c) const { return whole.Expected(c); }
};
GemmOnCores MakeGemmOnCores(int64_t m, const Matrix<int8_t>& b, const config::TpuConfig& config,
                            CoreSplit split = CoreSplit::kRows, uint64_t seed = 7);

}  // namespace tpu::compiler
