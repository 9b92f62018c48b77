// Builds a TPU program from typed instructions, the way compilers emit one (the layer
// compiler, the GEMM program): no text is printed and parsed again. Assembly for people
// comes from the disassembler (isa::Disassemble).
#pragma once

#include <cstdint>

#include "host/isa/isa.h"

namespace tpu::isa {

// An activate's pooling (docs/isa.md): none, 2 x 2 over rows (average, maximum), or the
// maximum of each four adjacent lanes (`pool=lanes`).
enum class Pool { kNone, kAvg, kMax, kLanes };
// The function table an activate applies after requantizing (`fn=`, docs/vpu.md).
enum class Fn { kNone, kSigmoid, kTanh };
// What a matmul does with the accumulator rows: overwrite, add (`accumulate`), or keep the
// larger value (`max`).
enum class Acc { kOverwrite, kAdd, kMax };
inline Acc AddIf(bool accumulate) { return accumulate ? Acc::kAdd : Acc::kOverwrite; }

// The geometry of set_window (docs/isa.md).
struct WindowGeometry {
  uint64_t in_h = 0, in_w = 0, channels = 0, pixel_bytes = 0;
  uint64_t kh = 1, kw = 1, stride_y = 1, stride_x = 1, pad_top = 0, pad_left = 0;
  uint64_t out_h = 0, out_w = 0;
  bool pooled = false;
  bool pad_min = false;  // positions outside the map read -128 (max pooling)
  bool dilated = false;  // a zero between neighbouring pixels: pixel (y, x) read at (2y, 2x)

  // The rows of the map a window matmul reads from its first (its footprint, docs/isa.md) on
  // a chip of n lanes.
  uint64_t Rows(uint64_t n) const {
    return ((in_h * in_w - 1) * pixel_bytes + channels + n - 1) / n;
  }

  bool operator==(const WindowGeometry& o) const {
    return in_h == o.in_h && in_w == o.in_w && channels == o.channels &&
           pixel_bytes == o.pixel_bytes && kh == o.kh && kw == o.kw && stride_y == o.stride_y &&
           stride_x == o.stride_x && pad_top == o.pad_top && pad_left == o.pad_left &&
           out_h == o.out_h && out_w == o.out_w && pooled == o.pooled && pad_min == o.pad_min &&
           dilated == o.dilated;
  }
};

// The residual of set_residual (docs/isa.md): `activate ... residual` turns its output y
// into clamp((y * mul_a + r * mul_b + 2^(shift-1)) >> shift) with r the residual row's lane,
// or with `product` into clamp((y * r * mul_a + 2^(shift-1)) >> shift) (mul_b 0).
struct Residual {
  uint64_t ub = 0;  // the first residual row; row k of the activate adds row ub + k x stride
  uint64_t mul_a = 0, mul_b = 0, shift = 1;
  bool relu = false;
  bool product = false;

  bool operator==(const Residual& o) const {
    return ub == o.ub && mul_a == o.mul_a && mul_b == o.mul_b && shift == o.shift &&
           relu == o.relu && product == o.product;
  }
};

// A vector instruction's operands (docs/vpu.md, "The vector unit"): rows of a, b and the
// result, float32 (two buffer rows a row) or bfloat16, b one row for all with `bcast`.
struct VectorOperands {
  hw::VectorOp op = hw::VectorOp::kAdd;
  uint64_t a = 0, b = 0, out = 0, rows = 1;
  bool a32 = false, b32 = false, o32 = false, bcast = false;
};

// Vector flags: float32 a, b, result; b one row for all.
enum VectorFlags : int { kA32 = 1, kB32 = 2, kO32 = 4, kBcast = 8 };

class ProgramBuilder;
// `rows` rows of a vector operation (flags: VectorFlags), in instructions of at most
// ProgramBuilder::kMaxLength rows each.
void EmitVector(ProgramBuilder& p, hw::VectorOp op, int64_t a, int64_t b, int64_t out, int64_t rows,
                int flags);

class ProgramBuilder {
 public:
  // The most a length operand holds (rows, tiles or sets): 16 bits.
  static constexpr uint64_t kMaxLength = 0xffff;

  void ReadHost(uint64_t host_addr, uint64_t ub_row, uint64_t rows);
  void ReadParams(uint64_t host_addr, uint64_t first_set, uint64_t sets);
  // `weight_addr`: a 48-bit byte address.
  void ReadWeights(uint64_t weight_addr, uint64_t tiles);
  // read_hbm / write_hbm: unified-buffer rows from and into HBM (the weight memory) at a
  // 48-bit byte address (docs/isa.md).
  void ReadHbm(uint64_t hbm_addr, uint64_t ub_row, uint64_t rows);
  // read_hbm params=: parameter sets [first_set, first_set + sets) from HBM.
  void ReadHbmParams(uint64_t hbm_addr, uint64_t first_set, uint64_t sets);
  void WriteHbm(uint64_t ub_row, uint64_t hbm_addr, uint64_t rows);
  // load_weights: `tiles` tiles of N unified-buffer rows from `ub_row` into the weight FIFO;
  // `transpose`: FIFO row k of a tile is lane k of its rows (docs/isa.md).
  void LoadWeights(uint64_t ub_row, uint64_t tiles, bool transpose);
  // `stride`: rows between the rows read (1: contiguous).
  void Matmul(uint64_t ub_row, uint64_t acc_row, uint64_t rows, bool switch_tile, Acc mode,
              uint64_t stride = 1);
  void SetWindow(const WindowGeometry& g);
  // Rows formed by the window stage: output pixels [first, first + rows) of the window set
  // last, K-tile `ktile` of their receptive fields, from the map starting at `ub_row`.
  void MatmulWindow(uint64_t ub_row, uint64_t acc_row, uint64_t rows, uint64_t first,
                    uint64_t ktile, bool switch_tile, Acc mode);
  void SetResidual(const Residual& r);
  // `stride`: rows between the rows written (1: contiguous); `residual`: add (or multiply
  // by) the residual set last; `fn`: a function table after requantizing.
  void Activate(uint64_t acc_row, uint64_t ub_row, uint64_t rows, uint64_t param_set, bool relu,
                Pool pool, uint64_t stride = 1, bool residual = false, Fn fn = Fn::kNone);
  void WriteHost(uint64_t ub_row, uint64_t host_addr, uint64_t rows);
  // vector: a float32 operation over unified-buffer rows (bf16 chips).
  void Vector(const VectorOperands& v);
  void Sync();
  // barrier: waits for the cores of bit mask `cores` (docs/isa.md, "Several cores").
  void Barrier(uint64_t cores);
  void Halt();
  // set_format: the program's number format (docs/bf16.md); without it a program is int8.
  void SetFormat(bool bf16);

  // The matrix unit (mxu=, docs/isa.md) that the read_weights, load_weights, matmul and
  // activate added
  // from now on name; 0 at first.
  void SetUnit(uint64_t mxu) { unit_ = mxu; }
  uint64_t Unit() const { return unit_; }

  const Program& program() const { return program_; }
  Program Take() { return std::move(program_); }

 private:
  // Throws std::invalid_argument when a field does not fit its bits (a compiler bug).
  void Add(Opcode op, uint8_t flags, uint64_t length, uint64_t src, uint64_t dst, uint64_t aux);
  void AddReadHbm(uint8_t flags, uint64_t hbm_addr, uint64_t dst, uint64_t len);

  Program program_;
  uint64_t unit_ = 0;
};

}  // namespace tpu::isa
