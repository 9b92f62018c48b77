// What the fast engine needs to know about the chip it models (the fields of TpuConfig
// that shape the hardware), and each instruction decoded once, with the checks and the
// footprint that rtl/tpu_controller.sv computes for it every cycle.
#pragma once

#include <cstdint>

#include "contract/tpu_contract.h"

namespace tpu::fast {

struct ChipParams {
  int array_dim = 16;    // N, 2 .. 512
  int acc_depth = 1024;  // accumulator rows
  int ub_depth = 16384;  // unified-buffer rows
  int fifo_tiles = 4;    // weight FIFO depth in tiles
  int param_sets = 32;   // VPU parameter sets
  int iq_depth = 16;     // instruction queue entries (tpu_top's IqDepth)
  uint64_t host_mem_bytes = 16u << 20;
  uint64_t host_latency_cycles = 100, host_bytes_per_cycle = 16;
  uint64_t weight_mem_bytes = 16u << 20;
  uint64_t weight_latency_cycles = 50, weight_bytes_per_cycle = 16;
};

// The rows an instruction reads or writes, kept by the controller while its unit runs.
struct Footprint {
  bool ub_use = false, ub_wr = false;
  uint32_t ub_lo = 0, ub_hi = 0;
  bool acc_use = false, acc_wr = false;
  uint32_t acc_lo = 0, acc_hi = 0;
  bool par_use = false, par_wr = false;
  uint32_t par_lo = 0, par_hi = 0;
};

struct Decoded {
  uint8_t op = 0, flags = 0;
  uint32_t len = 0, src = 0, dst = 0, aux = 0;
  hw::Status check = hw::Status::kOk;  // what the controller's checks say
  int unit = -1;                       // hw::kUnit*, or -1 (retired by the controller)
  bool sync = false;                   // sync or halt: waits for every unit
  bool pooled = false;
  uint32_t out_rows = 0;  // activate: rows written (len / 4 with pooling)
  Footprint fp;
};

// Decodes one instruction word exactly as the controller does (the same checks in the
// same order, 64-bit range arithmetic, 32-bit footprint bounds).
inline Decoded Decode(const uint8_t* w, const ChipParams& p) {
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
  const uint64_t n = static_cast<uint64_t>(p.array_dim), len = d.len, src = d.src, dst = d.dst,
                 aux = d.aux;
  const uint64_t hm = p.host_mem_bytes < 0xffffffffu ? p.host_mem_bytes : 0xffffffffu;
  const uint64_t wm = p.weight_mem_bytes < 0xffffffffu ? p.weight_mem_bytes : 0xffffffffu;
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
    case Opcode::kReadHost: {
      const bool params = f & hw::kFlagParams;
      if ((f & ~hw::kFlagParams) != 0 || len == 0) {
        d.check = Status::kBadOperand;
      } else if (params) {
        d.check = first(range(src, len * hw::kParamRows * n, hm),
                        range(dst, len, static_cast<uint64_t>(p.param_sets)));
      } else {
        d.check =
            first(range(src, len * n, hm), range(dst, len, static_cast<uint64_t>(p.ub_depth)));
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
      if (f != 0 || len == 0)
        d.check = Status::kBadOperand;
      else
        d.check = range(src, len * n * n, wm);
      d.unit = hw::kUnitWeightDma;
      break;
    case Opcode::kMatmul:
      if ((f & ~(hw::kFlagAccumulate | hw::kFlagSwitch)) != 0 || len == 0) {
        d.check = Status::kBadOperand;
      } else {
        d.check = first(range(src, len, static_cast<uint64_t>(p.ub_depth)),
                        range(dst, len, static_cast<uint64_t>(p.acc_depth)));
      }
      fp.ub_use = true;
      fp.ub_lo = d.src;
      fp.ub_hi = static_cast<uint32_t>(src + len);
      fp.acc_use = fp.acc_wr = true;
      fp.acc_lo = d.dst;
      fp.acc_hi = static_cast<uint32_t>(dst + len);
      d.unit = hw::kUnitMatrix;
      break;
    case Opcode::kActivate:
      if ((f & ~7u) != 0 || (pool_avg && pool_max) || len == 0 || (d.pooled && (len & 3) != 0)) {
        d.check = Status::kBadOperand;
      } else {
        d.check = first(first(range(src, len, static_cast<uint64_t>(p.acc_depth)),
                              range(dst, d.out_rows, static_cast<uint64_t>(p.ub_depth))),
                        range(aux, 1, static_cast<uint64_t>(p.param_sets)));
      }
      fp.acc_use = true;
      fp.acc_lo = d.src;
      fp.acc_hi = static_cast<uint32_t>(src + len);
      fp.ub_use = fp.ub_wr = true;
      fp.ub_lo = d.dst;
      fp.ub_hi = static_cast<uint32_t>(dst + d.out_rows);
      fp.par_use = true;
      fp.par_lo = d.aux;
      fp.par_hi = static_cast<uint32_t>(aux + 1);
      d.unit = hw::kUnitActivate;
      break;
    case Opcode::kWriteHost:
      if (f != 0 || len == 0)
        d.check = Status::kBadOperand;
      else
        d.check =
            first(range(src, len, static_cast<uint64_t>(p.ub_depth)), range(dst, len * n, hm));
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
