// Each instruction decoded once, with the checks and the footprint that
// rtl/tpu_controller.sv computes for it every cycle.
#pragma once

#include <cstdint>

#include "fast/chip_params.h"

namespace tpu::fast {

// The rows an instruction reads or writes, kept by the controller while its unit runs;
// ub2 and ub3 are more unified-buffer ranges that are only read (activate residual's; a
// vector instruction's a and b).
struct Footprint {
  bool ub_use = false, ub_wr = false;
  uint32_t ub_lo = 0, ub_hi = 0;
  bool ub2_use = false;
  uint32_t ub2_lo = 0, ub2_hi = 0;
  bool ub3_use = false;
  uint32_t ub3_lo = 0, ub3_hi = 0;
  bool acc_use = false, acc_wr = false;
  uint8_t acc_mxu = 0;  // whose accumulators
  uint32_t acc_lo = 0, acc_hi = 0;
  bool par_use = false, par_wr = false;
  uint32_t par_lo = 0, par_hi = 0;
  bool wm_rd = false, wm_wr = false;  // reads, writes the weight memory (all of it)
};

// The window geometry set_window sets (rtl/tpu_pkg.sv window_t, docs/isa.md).
struct Window {
  bool valid = false, pooled = false, pad_min = false;
  bool dilated = false;  // a zero between neighbouring pixels: pixel (y, x) read at (2y, 2x)
  uint32_t in_h = 0, in_w = 0, out_h = 0, out_w = 0, kh = 0, kw = 0, stride_y = 0, stride_x = 0,
           pad_top = 0, pad_left = 0, channels = 0, pixel_bytes = 0;
  // Rows of the map from the matmul's first row, K-tiles of the receptive field, pixels.
  uint64_t Rows(uint64_t n) const {
    return ((uint64_t{in_h} * in_w - 1) * pixel_bytes + channels + n - 1) / n;
  }
  uint64_t Tiles(uint64_t n) const { return (uint64_t{kh} * kw * channels + n - 1) / n; }
  uint64_t Pixels() const { return uint64_t{out_h} * out_w; }
};

// The residual set_residual sets (rtl/tpu_pkg.sv residual_t, docs/isa.md).
struct Residual {
  bool valid = false, relu = false, product = false;
  uint32_t shift = 0, mul_a = 0, mul_b = 0, ub = 0;
};

// A vector instruction's operation and operands (docs/vpu.md, "The vector unit").
struct VectorOperands {
  hw::VectorOp op = hw::VectorOp::kAdd;
  hw::VectorKind kind = hw::VectorKind::kBinary;
  uint32_t b = 0;                   // b's first row
  uint32_t wa = 1, wb = 1, wo = 1;  // buffer rows a row of a, b and the result takes
  bool bcast = false;               // b is one row, taken with every row of a
  bool UsesB() const { return kind == hw::VectorKind::kBinary || kind == hw::VectorKind::kSelect; }
  uint32_t OutRows(uint32_t len) const { return kind == hw::VectorKind::kRows ? 1 : len; }
};

struct Decoded {
  uint8_t op = 0, flags = 0;
  uint8_t mxu = 0;  // read_weights, matmul, activate: the matrix unit (mxu=)
  uint32_t len = 0, src = 0, dst = 0, aux = 0;
  // read_weights, read_hbm: the 48-bit address (src, aux bits 0-15); write_hbm: (dst, aux)
  uint64_t weight_addr = 0;
  hw::Status check = hw::Status::kOk;  // what the controller's checks say
  int unit = -1;                       // hw::kUnit*, or -1 (retired by the controller)
  bool sync = false;                   // sync or halt: waits for every unit
  bool barrier = false;                // barrier: waits for every unit, then for the cores
  uint16_t cores = 0;                  // barrier: the mask of cores it waits for
  bool pooled = false;                 // activate: 2 x 2 pooling over rows (one pooling flag)
  bool lanes = false;                  // activate: pooling over lanes (both pooling flags)
  uint32_t out_rows = 0;               // activate: rows written (len / 4 with 2 x 2 pooling)
  uint32_t step = 1;              // matmul: rows between rows read; activate: between rows written
  uint32_t first = 0, ktile = 0;  // matmul window: the first output pixel, the K-tile
  uint32_t param_set = 0;         // activate
  Window window;                  // matmul window: the geometry it walks; set_window: the new one
  Residual residual;              // activate residual: what it adds; set_residual: the new one
  VectorOperands vec;             // vector
  Footprint fp;
};

// The controller's registers that instructions set: the window (set_window), the residual
// (set_residual) and the program's number format (set_format).
struct Registers {
  Window window;
  Residual residual;
  bool bf16 = false;
};

// Decodes one instruction word exactly as the controller does (the same checks in the
// same order, 64-bit range arithmetic, 32-bit footprint bounds). Decode a program in order:
// a good set_window, set_residual or set_format updates `regs`.
Decoded Decode(const uint8_t* w, const ChipParams& p, Registers& regs);

}  // namespace tpu::fast
