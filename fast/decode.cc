// Decoding an instruction as rtl/tpu_controller.sv does (see decode.h): one function per
// opcode, each with the controller's checks in its order.
#include "fast/decode.h"

#include <algorithm>

namespace tpu::fast {
namespace {

using hw::Opcode;
using hw::Status;

// The sizes the checks compare against: N, the memories in bytes, the buffers in rows, a
// row's bytes and a parameter set's rows.
struct Sizes {
  uint64_t n, host, weight, ub, acc, sets, row, param_rows, mxus;
};

// mxu= sits at the same bits of read_weights, matmul and activate (rtl/tpu_controller.sv).
constexpr uint8_t kMxuBits = static_cast<uint8_t>(hw::kOpdMatmulMxu.Max() << hw::kOpdMatmulMxu.lsb);

// Reads mxu= into d.mxu and tells whether it is past the core's last matrix unit.
bool MxuBad(Decoded& d, const Sizes& s) {
  d.mxu = static_cast<uint8_t>(hw::kOpdMatmulMxu.Get(d.flags));
  return d.mxu >= s.mxus;
}

Status Range(uint64_t start, uint64_t count, uint64_t size) {
  if (start >= size) return Status::kAddressOutOfRange;
  if (start + count > size) return Status::kBufferOverflow;
  return Status::kOk;
}

Status First(Status a, Status b) { return a != Status::kOk ? a : b; }

uint32_t Get32(const uint8_t* w, int off) {
  return uint32_t{w[off]} | uint32_t{w[off + 1]} << 8 | uint32_t{w[off + 2]} << 16 |
         uint32_t{w[off + 3]} << 24;
}

void SetWindow(Decoded& d, Window& window) {
  Window& nw = d.window;
  nw.valid = true;
  nw.pooled = d.flags & hw::kFlagPooled;
  nw.pad_min = d.flags & hw::kFlagPadMin;
  nw.dilated = d.flags & hw::kFlagDilated;
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
  const bool bad = nw.in_h == 0 || nw.in_w == 0 || nw.kh == 0 || nw.kw == 0 || nw.out_h == 0 ||
                   nw.out_w == 0 || nw.stride_y == 0 || nw.stride_x == 0 || nw.channels == 0 ||
                   nw.pixel_bytes < nw.channels || nw.pad_top >= nw.kh || nw.pad_left >= nw.kw ||
                   (nw.out_h - 1) * nw.stride_y > ((nw.in_h - 1) << nw.dilated) + nw.pad_top ||
                   (nw.out_w - 1) * nw.stride_x > ((nw.in_w - 1) << nw.dilated) + nw.pad_left ||
                   (nw.pooled && ((nw.out_h & 1) || (nw.out_w & 1))) ||
                   (d.aux >> (hw::kOpdSetWindowPadLeft.lsb + hw::kOpdSetWindowPadLeft.bits)) != 0;
  if ((d.flags & ~(hw::kFlagPooled | hw::kFlagPadMin | hw::kFlagDilated)) != 0 || d.len == 0)
    d.check = Status::kBadOperand;
  else if (bad)
    d.check = Status::kBadWindow;
  else
    window = nw;
}

void SetResidual(Decoded& d, Residual& residual) {
  Residual& nr = d.residual;
  nr.valid = true;
  nr.relu = d.flags & hw::kFlagResidualRelu;
  nr.product = d.flags & hw::kFlagProduct;
  nr.shift = hw::kOpdSetResidualShift.Get(d.len);
  nr.mul_a = d.src;
  nr.mul_b = d.aux;
  nr.ub = d.dst;
  const bool bad = nr.shift == 0 || nr.shift > 62 ||
                   (d.len >> hw::kOpdSetResidualShift.bits) != 0 || (d.src >> 31) != 0 ||
                   (d.aux >> 31) != 0 || (nr.product && d.aux != 0);
  if ((d.flags & ~(hw::kFlagResidualRelu | hw::kFlagProduct)) != 0 || bad)
    d.check = Status::kBadOperand;
  else
    residual = nr;
}

// read_host and read_hbm (the controller's read_check and read_fp): `len` rows from `addr`
// of a memory of `size` bytes into buffer rows [dst, dst + len), or with `params` parameter
// sets [dst, dst + len); `bad`: an operand the instruction's own checks refuse.
void ReadInto(Decoded& d, const Sizes& s, uint64_t addr, uint64_t size, bool bad) {
  const bool params = d.flags & hw::kFlagParams;
  const uint64_t len = d.len;
  if (bad || (d.flags & ~hw::kFlagParams) != 0 || len == 0)
    d.check = Status::kBadOperand;
  else if (params)
    d.check = First(Range(addr, len * s.param_rows * s.row, size), Range(d.dst, len, s.sets));
  else
    d.check = First(Range(addr, len * s.row, size), Range(d.dst, len, s.ub));
  Footprint& fp = d.fp;
  fp.ub_use = !params;
  fp.ub_wr = true;
  fp.ub_lo = d.dst;
  fp.ub_hi = static_cast<uint32_t>(d.dst + len);
  fp.par_use = params;
  fp.par_wr = true;
  fp.par_lo = d.dst;
  fp.par_hi = static_cast<uint32_t>(d.dst + len);
  d.unit = hw::kUnitHostDma;
}

void ReadHost(Decoded& d, const Sizes& s) { ReadInto(d, s, d.src, s.host, false); }

// read_hbm: from weight memory, on the host DMA's own port.
void ReadHbm(Decoded& d, const Sizes& s) {
  d.weight_addr = uint64_t{hw::kOpdReadHbmAddrHi.Get(d.aux)} << 32 | d.src;
  ReadInto(d, s, d.weight_addr, s.weight,
           (d.aux >> (hw::kOpdReadHbmAddrHi.lsb + hw::kOpdReadHbmAddrHi.bits)) != 0);
  d.fp.wm_rd = true;
}

// write_hbm: unified-buffer rows into weight memory, on the host DMA's own port.
void WriteHbm(Decoded& d, const Sizes& s) {
  d.weight_addr = uint64_t{hw::kOpdWriteHbmAddrHi.Get(d.aux)} << 32 | d.dst;
  if (d.flags != 0 || d.len == 0 ||
      (d.aux >> (hw::kOpdWriteHbmAddrHi.lsb + hw::kOpdWriteHbmAddrHi.bits)) != 0)
    d.check = Status::kBadOperand;
  else
    d.check =
        First(Range(d.src, d.len, s.ub), Range(d.weight_addr, uint64_t{d.len} * s.row, s.weight));
  Footprint& fp = d.fp;
  fp.ub_use = true;
  fp.ub_lo = d.src;
  fp.ub_hi = static_cast<uint32_t>(uint64_t{d.src} + d.len);
  fp.wm_wr = true;
  d.unit = hw::kUnitHostDma;
}

void ReadWeights(Decoded& d, const Sizes& s) {
  d.weight_addr = uint64_t{hw::kOpdReadWeightsAddrHi.Get(d.aux)} << 32 | d.src;
  if ((d.flags & ~kMxuBits) != 0 || MxuBad(d, s) || d.len == 0 ||
      (d.aux >> (hw::kOpdReadWeightsAddrHi.lsb + hw::kOpdReadWeightsAddrHi.bits)) != 0)
    d.check = Status::kBadOperand;
  else
    d.check = Range(d.weight_addr, uint64_t{d.len} * s.n * s.row, s.weight);
  d.fp.wm_rd = true;
  d.unit = hw::kUnitWeightDma;
}

void LoadWeights(Decoded& d, const Sizes& s) {
  const uint64_t rows = uint64_t{d.len} * s.n;
  if ((d.flags & ~(hw::kFlagTranspose | kMxuBits)) != 0 || MxuBad(d, s) || d.len == 0)
    d.check = Status::kBadOperand;
  else
    d.check = Range(d.src, rows, s.ub);
  Footprint& fp = d.fp;
  fp.ub_use = true;
  fp.ub_lo = d.src;
  fp.ub_hi = static_cast<uint32_t>(d.src + rows);
  d.unit = hw::kUnitWeightDma;
}

void Matmul(Decoded& d, const Sizes& s, const Window& window) {
  const uint8_t f = d.flags;
  const bool win = f & hw::kFlagWindow;
  d.first = hw::kOpdMatmulFirst.Get(d.aux);
  d.ktile = hw::kOpdMatmulKtile.Get(d.aux);
  d.step = win || hw::kOpdMatmulStride.Get(d.aux) == 0 ? 1 : hw::kOpdMatmulStride.Get(d.aux);
  d.window = window;
  const uint64_t len = d.len, rows = win ? window.Rows(s.n) : (len - 1) * d.step + 1;
  if ((f & ~(hw::kFlagAccumulate | hw::kFlagSwitch | hw::kFlagWindow | hw::kFlagMax | kMxuBits)) !=
          0 ||
      MxuBad(d, s) || ((f & hw::kFlagMax) && (f & hw::kFlagAccumulate)) || len == 0 ||
      (!win && (d.aux >> hw::kOpdMatmulStride.bits) != 0)) {
    d.check = Status::kBadOperand;
  } else if (win &&
             (!window.valid || d.ktile >= window.Tiles(s.n) || d.first + len > window.Pixels())) {
    d.check = Status::kBadWindow;
  } else {
    d.check = First(Range(d.src, rows, s.ub), Range(d.dst, len, s.acc));
  }
  Footprint& fp = d.fp;
  fp.ub_use = true;
  fp.ub_lo = d.src;
  fp.ub_hi = static_cast<uint32_t>(d.src + rows);
  fp.acc_use = fp.acc_wr = true;
  fp.acc_mxu = d.mxu;
  fp.acc_lo = d.dst;
  fp.acc_hi = static_cast<uint32_t>(d.dst + len);
  d.unit = hw::kUnitMatrix;
}

void Activate(Decoded& d, const Sizes& s, const Residual& residual) {
  const uint8_t f = d.flags;
  d.step = hw::kOpdActivateStride.Get(d.aux) == 0 ? 1 : hw::kOpdActivateStride.Get(d.aux);
  d.param_set = hw::kOpdActivateParams.Get(d.aux);
  const uint64_t len = d.len, set = d.param_set, span = (uint64_t{d.out_rows} - 1) * d.step + 1;
  const bool res = f & hw::kFlagResidual;
  d.residual = residual;
  if ((f & ~(hw::kFlagRelu | hw::kFlagPoolAvg | hw::kFlagPoolMax | hw::kFlagResidual |
             hw::kFlagSigmoid | hw::kFlagTanh | kMxuBits)) != 0 ||
      MxuBad(d, s) || ((f & hw::kFlagSigmoid) && (f & hw::kFlagTanh)) || len == 0 ||
      (d.pooled && (len & 3) != 0) || (res && (d.pooled || d.lanes || !residual.valid))) {
    d.check = Status::kBadOperand;
  } else {
    d.check =
        First(First(Range(d.src, len, s.acc), Range(d.dst, span, s.ub)), Range(set, 1, s.sets));
    if (res) d.check = First(d.check, Range(residual.ub, span, s.ub));
  }
  Footprint& fp = d.fp;
  fp.ub2_use = res;
  fp.ub2_lo = residual.ub;
  fp.ub2_hi = static_cast<uint32_t>(residual.ub + span);
  fp.acc_use = true;
  fp.acc_mxu = d.mxu;
  fp.acc_lo = d.src;
  fp.acc_hi = static_cast<uint32_t>(d.src + len);
  fp.ub_use = fp.ub_wr = true;
  fp.ub_lo = d.dst;
  fp.ub_hi = static_cast<uint32_t>(d.dst + span);
  fp.par_use = true;
  fp.par_lo = static_cast<uint32_t>(set);
  fp.par_hi = static_cast<uint32_t>(set + 1);
  d.unit = hw::kUnitActivate;
}

// Two row ranges that are the same or apart (a vector instruction's result and an operand).
bool SameOrApart(uint64_t a_lo, uint64_t a_hi, uint64_t b_lo, uint64_t b_hi) {
  return (a_lo == b_lo && a_hi == b_hi) || a_hi <= b_lo || b_hi <= a_lo;
}

void Vector(Decoded& d, const Sizes& s) {
  VectorOperands& v = d.vec;
  const uint32_t opv = hw::kOpdVectorOp.Get(d.aux);
  v.op = static_cast<hw::VectorOp>(opv);
  v.kind = opv < hw::kNumVectorOps ? hw::Info(v.op).kind : hw::VectorKind::kUnary;
  v.b = hw::kOpdVectorB.Get(d.aux);
  v.wa = d.flags & hw::kFlagA32 ? 2 : 1;
  v.wb = d.flags & hw::kFlagB32 ? 2 : 1;
  v.wo = d.flags & hw::kFlagO32 ? 2 : 1;
  v.bcast = d.flags & hw::kFlagBcast;
  const uint64_t len = d.len, a_hi = d.src + len * v.wa, b_hi = v.b + (v.bcast ? 1 : len) * v.wb,
                 d_hi = d.dst + uint64_t{v.OutRows(d.len)} * v.wo;
  const uint8_t known = hw::kFlagA32 | hw::kFlagB32 | hw::kFlagO32 | hw::kFlagBcast;
  if ((d.flags & ~known) != 0 || opv >= hw::kNumVectorOps || len == 0 ||
      (!v.UsesB() && ((d.flags & (hw::kFlagB32 | hw::kFlagBcast)) || v.b != 0))) {
    d.check = Status::kBadOperand;
  } else {
    d.check = First(First(Range(d.src, len * v.wa, s.ub),
                          Range(v.UsesB() ? v.b : 0, v.UsesB() ? b_hi - v.b : 1, s.ub)),
                    Range(d.dst, d_hi - d.dst, s.ub));
  }
  const bool b_clash =
      v.bcast ? !(d_hi <= v.b || b_hi <= d.dst) : !SameOrApart(d.dst, d_hi, v.b, b_hi);
  if (d.check == Status::kOk && (!SameOrApart(d.dst, d_hi, d.src, a_hi) || (v.UsesB() && b_clash)))
    d.check = Status::kBadOperand;
  Footprint& fp = d.fp;
  fp.ub_use = fp.ub_wr = true;
  fp.ub_lo = d.dst;
  fp.ub_hi = static_cast<uint32_t>(d_hi);
  fp.ub2_use = true;
  fp.ub2_lo = d.src;
  fp.ub2_hi = static_cast<uint32_t>(a_hi);
  fp.ub3_use = v.UsesB();
  fp.ub3_lo = v.b;
  fp.ub3_hi = static_cast<uint32_t>(b_hi);
  d.unit = hw::kUnitVector;
}

void WriteHost(Decoded& d, const Sizes& s) {
  const uint64_t len = d.len;
  if (d.flags != 0 || len == 0)
    d.check = Status::kBadOperand;
  else
    d.check = First(Range(d.src, len, s.ub), Range(d.dst, len * s.row, s.host));
  Footprint& fp = d.fp;
  fp.ub_use = true;
  fp.ub_lo = d.src;
  fp.ub_hi = static_cast<uint32_t>(d.src + len);
  d.unit = hw::kUnitHostDma;
}

void SetFormat(Decoded& d, bool chip_bf16, bool& bf16) {
  const bool want = d.flags & hw::kFlagBf16;
  if ((d.flags & ~hw::kFlagBf16) != 0)
    d.check = Status::kBadOperand;
  else if (want != chip_bf16)
    d.check = Status::kWrongFormat;
  else
    bf16 = want;
}

// The number format (docs/bf16.md): a bf16 chip runs what set_format dtype=bf16 declared,
// and its float32 vector unit has no tables and no residual product.
void CheckFormat(Decoded& d, bool chip_bf16, bool bf16) {
  const auto op = static_cast<Opcode>(d.op);
  if (!chip_bf16 && op == Opcode::kVector) d.check = Status::kWrongFormat;  // no float32 unit
  if (!chip_bf16 || d.check == Status::kInvalidOpcode || op == Opcode::kNop ||
      op == Opcode::kSync || op == Opcode::kHalt || op == Opcode::kSetFormat ||
      op == Opcode::kBarrier)
    return;
  const bool vpu_extra =
      (op == Opcode::kActivate && (d.flags & (hw::kFlagSigmoid | hw::kFlagTanh))) ||
      (op == Opcode::kSetResidual && (d.flags & hw::kFlagProduct));
  if (!bf16 || vpu_extra) d.check = Status::kWrongFormat;
}

}  // namespace

Decoded Decode(const uint8_t* w, const ChipParams& p, Registers& regs) {
  Window& window = regs.window;
  Residual& residual = regs.residual;
  Decoded d;
  d.op = w[hw::kOpcodeOffset];
  d.flags = w[hw::kFlagsOffset];
  d.len = uint32_t{w[hw::kLengthOffset]} | uint32_t{w[hw::kLengthOffset + 1]} << 8;
  d.src = Get32(w, hw::kSrcOffset);
  d.dst = Get32(w, hw::kDstOffset);
  d.aux = Get32(w, hw::kAuxOffset);
  // activate: 2 x 2 pooling over rows with one pooling flag; over lanes with both.
  d.pooled = bool(d.flags & hw::kFlagPoolAvg) != bool(d.flags & hw::kFlagPoolMax);
  d.lanes = (d.flags & hw::kFlagPoolAvg) && (d.flags & hw::kFlagPoolMax);
  d.out_rows = d.pooled ? d.len >> 2 : d.len;
  const Sizes s{static_cast<uint64_t>(p.array_dim),
                std::min<uint64_t>(static_cast<uint64_t>(p.host_mem_bytes), 0xffffffffu),
                static_cast<uint64_t>(p.weight_mem_bytes),
                static_cast<uint64_t>(p.ub_depth_rows),
                static_cast<uint64_t>(p.acc_depth_rows),
                static_cast<uint64_t>(p.param_sets),
                static_cast<uint64_t>(hw::RowBytes(p)),
                static_cast<uint64_t>(hw::ParamRows(hw::ElementBytes(p.dtype))),
                static_cast<uint64_t>(p.mxus_per_core)};
  const bool chip_bf16 = p.dtype == hw::Dtype::kBf16;
  switch (static_cast<Opcode>(d.op)) {
    case Opcode::kNop:
    case Opcode::kSync:
    case Opcode::kHalt:
      if (d.flags != 0) d.check = Status::kBadOperand;
      d.sync = d.op != static_cast<uint8_t>(Opcode::kNop);
      break;
    case Opcode::kBarrier:
      if (d.flags != 0 || (uint64_t{d.src} >> p.cores) != 0) d.check = Status::kBadOperand;
      d.barrier = true;
      d.cores = static_cast<uint16_t>(d.src);
      break;
    case Opcode::kSetWindow:
      SetWindow(d, window);
      break;
    case Opcode::kSetResidual:
      SetResidual(d, residual);
      break;
    case Opcode::kReadHost:
      ReadHost(d, s);
      break;
    case Opcode::kReadWeights:
      ReadWeights(d, s);
      break;
    case Opcode::kReadHbm:
      ReadHbm(d, s);
      break;
    case Opcode::kWriteHbm:
      WriteHbm(d, s);
      break;
    case Opcode::kLoadWeights:
      LoadWeights(d, s);
      break;
    case Opcode::kMatmul:
      Matmul(d, s, window);
      break;
    case Opcode::kActivate:
      Activate(d, s, residual);
      break;
    case Opcode::kWriteHost:
      WriteHost(d, s);
      break;
    case Opcode::kVector:
      Vector(d, s);
      break;
    case Opcode::kSetFormat:
      SetFormat(d, chip_bf16, regs.bf16);
      break;
    default:
      d.check = Status::kInvalidOpcode;
      break;
  }
  CheckFormat(d, chip_bf16, regs.bf16);
  return d;
}

}  // namespace tpu::fast
