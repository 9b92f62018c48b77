// What the fast engine needs to know about the chip it models, and each instruction decoded once,
// with the checks and the footprint that rtl/tpu_controller.sv computes for it every cycle.
#pragma once

#include <algorithm>
#include <cstdint>

#include "contract/tpu_contract.h"

namespace tpu::fast {

// The config's chip fields (hw::ChipParams, generated from contract/tpu_contract.toml)
// and what the config does not set: the instruction queue's depth, tpu_top's IqDepth.
struct ChipParams : hw::ChipParams {
  int iq_depth = 16;
};

// The rows an instruction reads or writes, kept by the controller while its unit runs;
// ub2 is a second unified-buffer range that is only read (activate residual).
struct Footprint {
  bool ub_use = false, ub_wr = false;
  uint32_t ub_lo = 0, ub_hi = 0;
  bool ub2_use = false;
  uint32_t ub2_lo = 0, ub2_hi = 0;
  bool acc_use = false, acc_wr = false;
  uint32_t acc_lo = 0, acc_hi = 0;
  bool par_use = false, par_wr = false;
  uint32_t par_lo = 0, par_hi = 0;
};

// The window geometry set_window sets (rtl/tpu_pkg.sv window_t, docs/isa.md).
struct Window {
  bool valid = false, pooled = false, pad_min = false;
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
  bool valid = false, relu = false;
  uint32_t shift = 0, mul_a = 0, mul_b = 0, ub = 0;
};

struct Decoded {
  uint8_t op = 0, flags = 0;
  uint32_t len = 0, src = 0, dst = 0, aux = 0;
  uint64_t weight_addr = 0;            // read_weights: the 48-bit address (src, aux bits 0-15)
  hw::Status check = hw::Status::kOk;  // what the controller's checks say
  int unit = -1;                       // hw::kUnit*, or -1 (retired by the controller)
  bool sync = false;                   // sync or halt: waits for every unit
  bool pooled = false;
  uint32_t out_rows = 0;          // activate: rows written (len / 4 with pooling)
  uint32_t step = 1;              // matmul: rows between rows read; activate: between rows written
  uint32_t first = 0, ktile = 0;  // matmul window: the first output pixel, the K-tile
  uint32_t param_set = 0;         // activate
  Window window;                  // matmul window: the geometry it walks; set_window: the new one
  Residual residual;              // activate residual: what it adds; set_residual: the new one
  Footprint fp;
};

// Decodes one instruction word exactly as the controller does (the same checks in the
// same order, 64-bit range arithmetic, 32-bit footprint bounds). `window` and `residual`
// are the controller's registers: decode a program in order, and a good set_window or
// set_residual updates them.
inline Decoded Decode(const uint8_t* w, const ChipParams& p, Window& window, Residual& residual) {
  auto get32 = [&](int off) {
    return uint32_t{w[off]} | uint32_t{w[off + 1]} << 8 | uint32_t{w[off + 2]} << 16 |
           uint32_t{w[off + 3]} << 24;
  };
  Decoded d;
  d.op = w[hw::kOpcodeOffset];
  d.flags = w[hw::kFlagsOffset];
  d.len = uint32_t{w[hw::kLengthOffset]} | uint32_t{w[hw::kLengthOffset + 1]} << 8;
  d.src = get32(hw::kSrcOffset);
  d.dst = get32(hw::kDstOffset);
  d.aux = get32(hw::kAuxOffset);
  const uint64_t n = static_cast<uint64_t>(p.array_dim), len = d.len, src = d.src, dst = d.dst;
  const uint64_t hm = std::min<uint64_t>(static_cast<uint64_t>(p.host_mem_bytes), 0xffffffffu);
  const uint64_t wm = static_cast<uint64_t>(p.weight_mem_bytes);
  auto range = [](uint64_t start, uint64_t count, uint64_t size) {
    if (start >= size) return hw::Status::kAddressOutOfRange;
    if (start + count > size) return hw::Status::kBufferOverflow;
    return hw::Status::kOk;
  };
  auto first = [](hw::Status a, hw::Status b) { return a != hw::Status::kOk ? a : b; };
  const uint8_t f = d.flags;
  const bool pool_avg = f & hw::kFlagPoolAvg, pool_max = f & hw::kFlagPoolMax;
  d.pooled = pool_avg || pool_max;
  d.out_rows = d.pooled ? d.len >> 2 : d.len;
  Footprint& fp = d.fp;
  using hw::Opcode;
  using hw::Status;
  switch (static_cast<Opcode>(d.op)) {
    case Opcode::kNop:
    case Opcode::kSync:
    case Opcode::kHalt:
      if (f != 0) d.check = Status::kBadOperand;
      d.sync = d.op != static_cast<uint8_t>(Opcode::kNop);
      break;
    case Opcode::kSetWindow: {
      Window& nw = d.window;
      nw.valid = true;
      nw.pooled = f & hw::kFlagPooled;
      nw.pad_min = f & hw::kFlagPadMin;
      nw.in_h = hw::kOpdSetWindowInH.Get(d.src);
      nw.in_w = hw::kOpdSetWindowInW.Get(d.src);
      nw.kh = hw::kOpdSetWindowKh.Get(d.src);
      nw.kw = hw::kOpdSetWindowKw.Get(d.src);
      nw.out_h = hw::kOpdSetWindowOutH.Get(d.dst);
      nw.out_w = hw::kOpdSetWindowOutW.Get(d.dst);
      nw.stride_y = hw::kOpdSetWindowStrideY.Get(d.dst);
      nw.stride_x = hw::kOpdSetWindowStrideX.Get(d.dst);
      nw.channels = hw::kOpdSetWindowChannels.Get(d.aux);
      nw.pad_top = hw::kOpdSetWindowPadTop.Get(d.aux);
      nw.pad_left = hw::kOpdSetWindowPadLeft.Get(d.aux);
      nw.pixel_bytes = hw::kOpdSetWindowPixelBytes.Get(d.len);
      const bool bad =
          nw.in_h == 0 || nw.in_w == 0 || nw.kh == 0 || nw.kw == 0 || nw.out_h == 0 ||
          nw.out_w == 0 || nw.stride_y == 0 || nw.stride_x == 0 || nw.channels == 0 ||
          nw.pixel_bytes < nw.channels || nw.pad_top >= nw.kh || nw.pad_left >= nw.kw ||
          (nw.out_h - 1) * nw.stride_y > nw.in_h - 1 + nw.pad_top ||
          (nw.out_w - 1) * nw.stride_x > nw.in_w - 1 + nw.pad_left ||
          (nw.pooled && ((nw.out_h & 1) || (nw.out_w & 1))) ||
          (d.aux >> (hw::kOpdSetWindowPadLeft.lsb + hw::kOpdSetWindowPadLeft.bits)) != 0;
      if ((f & ~(hw::kFlagPooled | hw::kFlagPadMin)) != 0 || len == 0)
        d.check = Status::kBadOperand;
      else if (bad)
        d.check = Status::kBadWindow;
      else
        window = nw;
      break;
    }
    case Opcode::kSetResidual: {
      Residual& nr = d.residual;
      nr.valid = true;
      nr.relu = f & hw::kFlagResidualRelu;
      nr.shift = hw::kOpdSetResidualShift.Get(d.len);
      nr.mul_a = d.src;
      nr.mul_b = d.aux;
      nr.ub = d.dst;
      const bool bad = nr.shift == 0 || nr.shift > 62 ||
                       (d.len >> hw::kOpdSetResidualShift.bits) != 0 || (d.src >> 31) != 0 ||
                       (d.aux >> 31) != 0;
      if ((f & ~hw::kFlagResidualRelu) != 0 || bad)
        d.check = Status::kBadOperand;
      else
        residual = nr;
      break;
    }
    case Opcode::kReadHost: {
      const bool params = f & hw::kFlagParams;
      if ((f & ~hw::kFlagParams) != 0 || len == 0) {
        d.check = Status::kBadOperand;
      } else if (params) {
        d.check = first(range(src, len * hw::kParamRows * n, hm),
                        range(dst, len, static_cast<uint64_t>(p.param_sets)));
      } else {
        d.check =
            first(range(src, len * n, hm), range(dst, len, static_cast<uint64_t>(p.ub_depth_rows)));
      }
      fp.ub_use = !params;
      fp.ub_wr = true;
      fp.ub_lo = d.dst;
      fp.ub_hi = static_cast<uint32_t>(dst + len);
      fp.par_use = params;
      fp.par_wr = true;
      fp.par_lo = d.dst;
      fp.par_hi = static_cast<uint32_t>(dst + len);
      d.unit = hw::kUnitHostDma;
      break;
    }
    case Opcode::kReadWeights:
      d.weight_addr = uint64_t{hw::kOpdReadWeightsAddrHi.Get(d.aux)} << 32 | d.src;
      if (f != 0 || len == 0 ||
          (d.aux >> (hw::kOpdReadWeightsAddrHi.lsb + hw::kOpdReadWeightsAddrHi.bits)) != 0)
        d.check = Status::kBadOperand;
      else
        d.check = range(d.weight_addr, len * n * n, wm);
      d.unit = hw::kUnitWeightDma;
      break;
    case Opcode::kMatmul: {
      const bool win = f & hw::kFlagWindow;
      d.first = hw::kOpdMatmulFirst.Get(d.aux);
      d.ktile = hw::kOpdMatmulKtile.Get(d.aux);
      d.step = win || hw::kOpdMatmulStride.Get(d.aux) == 0 ? 1 : hw::kOpdMatmulStride.Get(d.aux);
      d.window = window;
      const uint64_t rows = win ? window.Rows(n) : (len - 1) * d.step + 1;
      if ((f & ~(hw::kFlagAccumulate | hw::kFlagSwitch | hw::kFlagWindow | hw::kFlagMax)) != 0 ||
          ((f & hw::kFlagMax) && (f & hw::kFlagAccumulate)) || len == 0 ||
          (!win && (d.aux >> hw::kOpdMatmulStride.bits) != 0)) {
        d.check = Status::kBadOperand;
      } else if (win &&
                 (!window.valid || d.ktile >= window.Tiles(n) || d.first + len > window.Pixels())) {
        d.check = Status::kBadWindow;
      } else {
        d.check = first(range(src, rows, static_cast<uint64_t>(p.ub_depth_rows)),
                        range(dst, len, static_cast<uint64_t>(p.acc_depth_rows)));
      }
      fp.ub_use = true;
      fp.ub_lo = d.src;
      fp.ub_hi = static_cast<uint32_t>(src + rows);
      fp.acc_use = fp.acc_wr = true;
      fp.acc_lo = d.dst;
      fp.acc_hi = static_cast<uint32_t>(dst + len);
      d.unit = hw::kUnitMatrix;
      break;
    }
    case Opcode::kActivate: {
      d.step = hw::kOpdActivateStride.Get(d.aux) == 0 ? 1 : hw::kOpdActivateStride.Get(d.aux);
      d.param_set = hw::kOpdActivateParams.Get(d.aux);
      const uint64_t set = d.param_set, span = (uint64_t{d.out_rows} - 1) * d.step + 1;
      const bool res = f & hw::kFlagResidual;
      d.residual = residual;
      if ((f & ~(hw::kFlagRelu | hw::kFlagPoolAvg | hw::kFlagPoolMax | hw::kFlagResidual)) != 0 ||
          (pool_avg && pool_max) || len == 0 || (d.pooled && (len & 3) != 0) ||
          (res && (d.pooled || !residual.valid))) {
        d.check = Status::kBadOperand;
      } else {
        d.check = first(first(range(src, len, static_cast<uint64_t>(p.acc_depth_rows)),
                              range(dst, span, static_cast<uint64_t>(p.ub_depth_rows))),
                        range(set, 1, static_cast<uint64_t>(p.param_sets)));
        if (res)
          d.check =
              first(d.check, range(residual.ub, span, static_cast<uint64_t>(p.ub_depth_rows)));
      }
      fp.ub2_use = res;
      fp.ub2_lo = residual.ub;
      fp.ub2_hi = static_cast<uint32_t>(residual.ub + span);
      fp.acc_use = true;
      fp.acc_lo = d.src;
      fp.acc_hi = static_cast<uint32_t>(src + len);
      fp.ub_use = fp.ub_wr = true;
      fp.ub_lo = d.dst;
      fp.ub_hi = static_cast<uint32_t>(dst + span);
      fp.par_use = true;
      fp.par_lo = static_cast<uint32_t>(set);
      fp.par_hi = static_cast<uint32_t>(set + 1);
      d.unit = hw::kUnitActivate;
      break;
    }
    case Opcode::kWriteHost:
      if (f != 0 || len == 0)
        d.check = Status::kBadOperand;
      else
        d.check =
            first(range(src, len, static_cast<uint64_t>(p.ub_depth_rows)), range(dst, len * n, hm));
      fp.ub_use = true;
      fp.ub_lo = d.src;
      fp.ub_hi = static_cast<uint32_t>(src + len);
      d.unit = hw::kUnitHostDma;
      break;
    default:
      d.check = Status::kInvalidOpcode;
      break;
  }
  return d;
}

}  // namespace tpu::fast
