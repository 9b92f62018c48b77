// Typed construction of TPU programs (see program_builder.h).
#include "host/isa/program_builder.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tpu::isa {

void ProgramBuilder::Add(Opcode op, uint8_t flags, uint64_t length, uint64_t src, uint64_t dst,
                         uint64_t aux) {
  auto check = [&](const char* field, uint64_t v, uint64_t max) {
    if (v > max) {
      throw std::invalid_argument(std::string(Mnemonic(op)) + ": " + field + " " +
                                  std::to_string(v) + " does not fit the instruction word");
    }
  };
  check("length", length, kMaxLength);
  check("src", src, 0xffffffffu);
  check("dst", dst, 0xffffffffu);
  check("aux", aux, 0xffffffffu);
  check("mxu", unit_, hw::kOpdMatmulMxu.Max());
  Instruction in;
  in.opcode = op;
  in.flags = flags;
  if (op == Opcode::kReadWeights || op == Opcode::kLoadWeights || op == Opcode::kMatmul ||
      op == Opcode::kActivate)
    in.flags = static_cast<uint8_t>(flags | hw::kOpdMatmulMxu.Put(unit_));
  in.length = static_cast<uint16_t>(length);
  in.src = static_cast<uint32_t>(src);
  in.dst = static_cast<uint32_t>(dst);
  in.aux = static_cast<uint32_t>(aux);
  program_.words.push_back(Encode(in));
}

void ProgramBuilder::ReadHost(uint64_t host_addr, uint64_t ub_row, uint64_t rows) {
  Add(Opcode::kReadHost, 0, rows, host_addr, ub_row, 0);
}

void ProgramBuilder::ReadParams(uint64_t host_addr, uint64_t first_set, uint64_t sets) {
  Add(Opcode::kReadHost, kFlagParams, sets, host_addr, first_set, 0);
}

namespace {

uint8_t MatmulFlags(bool switch_tile, Acc mode) {
  return static_cast<uint8_t>((switch_tile ? kFlagSwitch : 0) |
                              (mode == Acc::kAdd ? kFlagAccumulate : 0) |
                              (mode == Acc::kMax ? hw::kFlagMax : 0));
}

}  // namespace

void ProgramBuilder::ReadWeights(uint64_t weight_addr, uint64_t tiles) {
  const uint64_t hi = weight_addr >> 32;
  if (hi > hw::kOpdReadWeightsAddrHi.Max())
    throw std::invalid_argument("read_weights: address beyond 48 bits");
  Add(Opcode::kReadWeights, 0, tiles, weight_addr & 0xffffffffu, 0,
      hw::kOpdReadWeightsAddrHi.Put(hi));
}

void ProgramBuilder::ReadHbm(uint64_t hbm_addr, uint64_t ub_row, uint64_t rows) {
  AddReadHbm(0, hbm_addr, ub_row, rows);
}

void ProgramBuilder::ReadHbmParams(uint64_t hbm_addr, uint64_t first_set, uint64_t sets) {
  AddReadHbm(kFlagParams, hbm_addr, first_set, sets);
}

void ProgramBuilder::AddReadHbm(uint8_t flags, uint64_t hbm_addr, uint64_t dst, uint64_t len) {
  const uint64_t hi = hbm_addr >> 32;
  if (hi > hw::kOpdReadHbmAddrHi.Max())
    throw std::invalid_argument("read_hbm: address beyond 48 bits");
  Add(Opcode::kReadHbm, flags, len, hbm_addr & 0xffffffffu, dst, hw::kOpdReadHbmAddrHi.Put(hi));
}

void ProgramBuilder::WriteHbm(uint64_t ub_row, uint64_t hbm_addr, uint64_t rows) {
  const uint64_t hi = hbm_addr >> 32;
  if (hi > hw::kOpdWriteHbmAddrHi.Max())
    throw std::invalid_argument("write_hbm: address beyond 48 bits");
  Add(Opcode::kWriteHbm, 0, rows, ub_row, hbm_addr & 0xffffffffu, hw::kOpdWriteHbmAddrHi.Put(hi));
}

void ProgramBuilder::Vector(const VectorOperands& v) {
  if (v.b > hw::kOpdVectorB.Max()) throw std::invalid_argument("vector: b= beyond 24 bits");
  const auto flags =
      static_cast<uint8_t>((v.a32 ? hw::kFlagA32 : 0) | (v.b32 ? hw::kFlagB32 : 0) |
                           (v.o32 ? hw::kFlagO32 : 0) | (v.bcast ? hw::kFlagBcast : 0));
  Add(Opcode::kVector, flags, v.rows, v.a, v.out,
      hw::kOpdVectorB.Put(v.b) | hw::kOpdVectorOp.Put(static_cast<uint64_t>(v.op)));
}

void ProgramBuilder::LoadWeights(uint64_t ub_row, uint64_t tiles, bool transpose) {
  Add(Opcode::kLoadWeights, transpose ? hw::kFlagTranspose : 0, tiles, ub_row, 0, 0);
}

void ProgramBuilder::Matmul(uint64_t ub_row, uint64_t acc_row, uint64_t rows, bool switch_tile,
                            Acc mode, uint64_t stride) {
  if (stride < 1 || stride > hw::kOpdMatmulStride.Max())
    throw std::invalid_argument("matmul: stride out of range");
  Add(Opcode::kMatmul, MatmulFlags(switch_tile, mode), rows, ub_row, acc_row,
      stride == 1 ? 0 : hw::kOpdMatmulStride.Put(stride));
}

void ProgramBuilder::SetWindow(const WindowGeometry& g) {
  uint64_t src = 0, dst = 0, aux = 0;
  auto put = [](uint64_t* field, const char* what, const hw::Operand& o, uint64_t v) {
    if (v > o.Max())
      throw std::invalid_argument(std::string("set_window: ") + what + " " + std::to_string(v) +
                                  " does not fit the instruction word");
    *field |= o.Put(v);
  };
  put(&src, "in_h", hw::kOpdSetWindowInH, g.in_h);
  put(&src, "in_w", hw::kOpdSetWindowInW, g.in_w);
  put(&src, "kh", hw::kOpdSetWindowKh, g.kh);
  put(&src, "kw", hw::kOpdSetWindowKw, g.kw);
  put(&dst, "out_h", hw::kOpdSetWindowOutH, g.out_h);
  put(&dst, "out_w", hw::kOpdSetWindowOutW, g.out_w);
  put(&dst, "stride_y", hw::kOpdSetWindowStrideY, g.stride_y);
  put(&dst, "stride_x", hw::kOpdSetWindowStrideX, g.stride_x);
  put(&aux, "channels", hw::kOpdSetWindowChannels, g.channels);
  put(&aux, "pad_top", hw::kOpdSetWindowPadTop, g.pad_top);
  put(&aux, "pad_left", hw::kOpdSetWindowPadLeft, g.pad_left);
  Add(Opcode::kSetWindow,
      static_cast<uint8_t>((g.pooled ? kFlagPooled : 0) | (g.pad_min ? hw::kFlagPadMin : 0) |
                           (g.dilated ? hw::kFlagDilated : 0)),
      g.pixel_bytes, src, dst, aux);
}

void ProgramBuilder::SetResidual(const Residual& r) {
  if (r.shift < 1 || r.shift > 62 || r.mul_a >= (uint64_t{1} << 31) ||
      r.mul_b >= (uint64_t{1} << 31) || (r.product && r.mul_b != 0))
    throw std::invalid_argument("set_residual: shift or multiplier out of range");
  Add(Opcode::kSetResidual,
      static_cast<uint8_t>((r.relu ? hw::kFlagResidualRelu : 0) |
                           (r.product ? hw::kFlagProduct : 0)),
      hw::kOpdSetResidualShift.Put(r.shift), r.mul_a, r.ub, r.mul_b);
}

void ProgramBuilder::MatmulWindow(uint64_t ub_row, uint64_t acc_row, uint64_t rows, uint64_t first,
                                  uint64_t ktile, bool switch_tile, Acc mode) {
  if (first > hw::kOpdMatmulFirst.Max() || ktile > hw::kOpdMatmulKtile.Max())
    throw std::invalid_argument("matmul window: first or ktile does not fit the instruction word");
  Add(Opcode::kMatmul, static_cast<uint8_t>(kFlagWindow | MatmulFlags(switch_tile, mode)), rows,
      ub_row, acc_row, hw::kOpdMatmulFirst.Put(first) | hw::kOpdMatmulKtile.Put(ktile));
}

void ProgramBuilder::Activate(uint64_t acc_row, uint64_t ub_row, uint64_t rows, uint64_t param_set,
                              bool relu, Pool pool, uint64_t stride, bool residual, Fn fn) {
  const uint8_t flags = static_cast<uint8_t>(
      (relu ? kFlagRelu : 0) | (pool == Pool::kAvg || pool == Pool::kLanes ? kFlagPoolAvg : 0) |
      (pool == Pool::kMax || pool == Pool::kLanes ? kFlagPoolMax : 0) |
      (residual ? hw::kFlagResidual : 0) | (fn == Fn::kSigmoid ? hw::kFlagSigmoid : 0) |
      (fn == Fn::kTanh ? hw::kFlagTanh : 0));
  if (param_set > 0xffff || stride < 1 || stride > 0xffff)
    throw std::invalid_argument("activate: parameter set or stride out of range");
  Add(Opcode::kActivate, flags, rows, acc_row, ub_row,
      param_set | (stride == 1 ? 0 : stride) << 16);
}

void ProgramBuilder::WriteHost(uint64_t ub_row, uint64_t host_addr, uint64_t rows) {
  Add(Opcode::kWriteHost, 0, rows, ub_row, host_addr, 0);
}

void ProgramBuilder::Sync() { Add(Opcode::kSync, 0, 0, 0, 0, 0); }
void ProgramBuilder::Barrier(uint64_t cores) { Add(Opcode::kBarrier, 0, 0, cores, 0, 0); }
void ProgramBuilder::SetFormat(bool bf16) {
  Add(Opcode::kSetFormat, bf16 ? hw::kFlagBf16 : 0, 0, 0, 0, 0);
}

void ProgramBuilder::Halt() { Add(Opcode::kHalt, 0, 0, 0, 0, 0); }

void EmitVector(ProgramBuilder& p, hw::VectorOp op, int64_t a, int64_t b, int64_t out, int64_t rows,
                int flags) {
  for (int64_t r0 = 0; r0 < rows; r0 += ProgramBuilder::kMaxLength) {
    const int64_t r = std::min<int64_t>(ProgramBuilder::kMaxLength, rows - r0);
    auto at = [r0](int64_t base, bool fp32) { return base + r0 * (fp32 ? 2 : 1); };
    const bool bc = flags & kBcast;
    p.Vector({op, static_cast<uint64_t>(at(a, flags & kA32)),
              static_cast<uint64_t>(bc ? b : at(b, flags & kB32)),
              static_cast<uint64_t>(at(out, flags & kO32)), static_cast<uint64_t>(r),
              (flags & kA32) != 0, (flags & kB32) != 0, (flags & kO32) != 0, bc});
  }
}

}  // namespace tpu::isa
