// Random TPU programs for co-simulation (see program_generator.h).
#include "host/cosim/program_generator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "contract/tpu_contract.h"
#include "host/engine/cycle_observer.h"
#include "host/isa/isa.h"

namespace tpu::cosim {
namespace {

using isa::Instruction;
using isa::Opcode;

class ProgramDraw {
 public:
  // Its host memory addresses start at host_base, its weight memory addresses at
  // weight_base (a core's window on a chip of several cores).
  ProgramDraw(const config::TpuConfig& c, uint64_t seed, int64_t host_base = 0,
              int64_t weight_base = 0)
      : host_base_(host_base),
        weight_base_(weight_base),
        c_(c),
        n_(c.array_dim),
        bf16_(c.dtype == hw::Dtype::kBf16),
        row_(hw::RowBytes(c)),
        set_bytes_(int64_t{hw::ParamRows(hw::ElementBytes(c.dtype))} * row_),
        mxus_(c.mxus_per_core),
        rng_(seed) {}

  GeneratedProgram Build();
  // The job's host image (input data, parameter sets, the output area) and weight image
  // (`tiles` tiles, some using only part of the array).
  void FillImages(engine::ExecJob* job, int64_t tiles);
  // The body: 3 to 40 random instructions, the invalid one of `kind` among them where the
  // program is meant to end so.
  void Body(const std::string& kind);

 private:
  int64_t Uniform(int64_t lo, int64_t hi) {  // inclusive; lo when hi < lo
    if (hi <= lo) return lo;
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  // A matmul (window: with the window) on a random matrix unit, half of them switching to
  // its next tile where it has one.
  void LaneMatmul(bool window) {
    const int64_t m = PickMxu();
    const bool do_switch = brought_[m] > switched_[m] && Chance(0.5);
    window ? WindowMatmul(m, do_switch) : Matmul(m, do_switch);
  }
  void Emit(Opcode op, uint8_t flags, int64_t len, int64_t src, int64_t dst, int64_t aux = 0) {
    if (!raw_) AtBase(op, flags, &src, &dst, &aux);
    if (op == Opcode::kReadHost) src += host_base_;
    if (op == Opcode::kWriteHost) dst += host_base_;
    const bool wide = op == Opcode::kReadWeights || op == Opcode::kReadHbm;
    if (wide) {  // a weight-memory address: bits 32-47 in aux
      src += weight_base_;
      aux = static_cast<int64_t>(hw::kOpdReadWeightsAddrHi.Put(static_cast<uint64_t>(src) >> 32));
    }
    if (op == Opcode::kWriteHbm) {  // the same in dst
      dst += weight_base_;
      aux = static_cast<int64_t>(hw::kOpdWriteHbmAddrHi.Put(static_cast<uint64_t>(dst) >> 32));
    }
    Instruction in;
    in.opcode = op;
    in.flags = flags;
    in.length = static_cast<uint16_t>(len);
    in.src = static_cast<uint32_t>(src);
    in.dst = static_cast<uint32_t>(dst);
    in.aux = static_cast<uint32_t>(aux);
    words_.push_back(isa::Encode(in));
  }
  // The program's unified-buffer rows are [ub_base_, ub_base_ + ub_rows_): each row operand
  // of a valid instruction moved there (the bad ones keep the addresses they were drawn with).
  void AtBase(Opcode op, uint8_t flags, int64_t* src, int64_t* dst, int64_t* aux) const {
    switch (op) {
      case Opcode::kReadHost:
        if (!(flags & hw::kFlagParams)) *dst += ub_base_;
        break;
      case Opcode::kReadHbm:
        if (!(flags & hw::kFlagParams)) *dst += ub_base_;
        break;
      case Opcode::kActivate:
      case Opcode::kSetResidual:
        *dst += ub_base_;
        break;
      case Opcode::kLoadWeights:
      case Opcode::kMatmul:
      case Opcode::kWriteHost:
      case Opcode::kWriteHbm:
        *src += ub_base_;
        break;
      case Opcode::kVector: {
        *src += ub_base_;
        *dst += ub_base_;
        const auto k =
            hw::Info(static_cast<hw::VectorOp>(hw::kOpdVectorOp.Get(static_cast<uint32_t>(*aux))))
                .kind;
        if (k == hw::VectorKind::kBinary || k == hw::VectorKind::kSelect)
          *aux += static_cast<int64_t>(hw::kOpdVectorB.Put(static_cast<uint64_t>(ub_base_)));
        break;
      }
      default:
        break;
    }
  }
  void ReadHost() {
    const int64_t rows = Uniform(1, std::min<int64_t>(ub_rows_, 48));
    Emit(Opcode::kReadHost, 0, rows, Uniform(0, in_bytes_ - rows * row_),
         Uniform(0, ub_rows_ - rows));
  }
  // Rows of weight memory (the Cloud TPU's HBM) into the buffer, on the host DMA.
  void ReadHbm() {
    const int64_t rows = Uniform(1, std::min<int64_t>({ub_rows_, 48, weight_bytes_ / row_}));
    Emit(Opcode::kReadHbm, 0, rows, Uniform(0, weight_bytes_ - rows * row_),
         Uniform(0, ub_rows_ - rows));
  }
  // Buffer rows into the program's weight memory (over tiles and rows later reads take), on
  // the host DMA; it waits for the weight DMAs' read_weights, so only where their tiles fit.
  void WriteHbm() {
    const int64_t rows = Uniform(1, std::min<int64_t>({ub_rows_, 48, weight_bytes_ / row_}));
    Emit(Opcode::kWriteHbm, 0, rows, Uniform(0, ub_rows_ - rows),
         Uniform(0, weight_bytes_ - rows * row_));
  }
  void ReadParams() {
    const int64_t sets = Uniform(1, sets_);
    const int64_t first = Uniform(0, sets_ - sets);
    // From host memory, or from their copy in weight memory (read_hbm params=).
    if (Chance(0.5))
      Emit(Opcode::kReadHost, hw::kFlagParams, sets, params_addr_ + first * set_bytes_, first);
    else
      Emit(Opcode::kReadHbm, hw::kFlagParams, sets, weight_params_ + first * set_bytes_, first);
    // Sometimes an activate of a set still on its way: the parameter-set hazard.
    if (Chance(0.3)) Activate(Uniform(first, first + sets - 1));
  }
  // A random matrix unit (none drawn on a core of one); mxu= as flag bits.
  int64_t PickMxu() { return mxus_ == 1 ? 0 : Uniform(0, mxus_ - 1); }
  static uint8_t MxuFlags(int64_t m) { return static_cast<uint8_t>(hw::kOpdMatmulMxu.Put(m)); }
  // Flag bits that make a matmul or read_weights a bad operand: an mxu= past the last (a
  // reserved bit on a core of four).
  uint8_t BadMxuBits() const { return mxus_ <= 2 ? 0x80 : mxus_ == 3 ? 0xC0 : 0x20; }
  void ReadWeights(int64_t tiles, int64_t m) {
    const int64_t bytes = tiles * n_ * row_;
    Emit(Opcode::kReadWeights, MxuFlags(m), tiles, Uniform(0, weight_bytes_ - bytes), 0);
    brought_[m] += tiles;
  }
  // Tiles of the program's unified-buffer rows (computed tensors), half of them transposed;
  // some over rows other units still write (the unified-buffer hazards).
  void LoadWeights(int64_t tiles, int64_t m) {
    const uint8_t flags = MxuFlags(m) | (Chance(0.5) ? hw::kFlagTranspose : 0);
    Emit(Opcode::kLoadWeights, flags, tiles, Uniform(0, ub_rows_ - tiles * n_), 0);
    brought_[m] += tiles;
  }
  // Weight tiles from weight memory or, where the program's rows hold one, the buffer. A
  // load_weights keeps writers off its rows until its last row is in the FIFO, so its
  // tiles must fit the FIFO and the shadow registers (as Fits) or a later writer before
  // the matmuls that make room would wait for ever.
  void BringWeights(int64_t m) {
    const int64_t tiles = Uniform(1, 3);
    const bool fits = brought_[m] + tiles - switched_[m] <= c_.weight_fifo_tiles + 1;
    if (tiles * n_ <= ub_rows_ && fits && Chance(0.3)) return LoadWeights(tiles, m);
    ReadWeights(tiles, m);
  }
  // Overwrite, add, or keep the larger (max pooling).
  uint8_t AccFlags() {
    const int64_t r = Uniform(0, 99);
    return r < 45 ? hw::kFlagAccumulate : r < 60 ? hw::kFlagMax : 0;
  }
  void Matmul(int64_t m, bool do_switch) {
    const int64_t rows = Uniform(1, std::min<int64_t>({acc_rows_, ub_rows_, 64}));
    uint8_t flags = AccFlags() | MxuFlags(m);
    if (do_switch) {
      flags |= hw::kFlagSwitch;
      ++switched_[m];
    }
    // Some read every k-th row (a dense layer's K-tile across a batch of images).
    const int64_t step = Chance(0.2) ? Uniform(2, 5) : 1;
    const int64_t span = (rows - 1) * step + 1;
    if (span > ub_rows_) {
      Emit(Opcode::kMatmul, flags, rows, Uniform(0, ub_rows_ - rows), Uniform(0, acc_rows_ - rows));
      return;
    }
    Emit(Opcode::kMatmul, flags, rows, Uniform(0, ub_rows_ - span), Uniform(0, acc_rows_ - rows),
         step == 1 && Chance(0.5) ? 0 : step);
  }
  // A convolution window over a small map that fits the rows the program uses.
  void SetWindow() {
    for (int tries = 0; tries < 50; ++tries) {
      Win w;
      w.c = Chance(0.3) ? Uniform(1, 3) : Uniform(1, 2 * n_);
      w.p = Chance(0.5) ? (w.c + n_ - 1) / n_ * n_ : w.c + (Chance(0.7) ? 0 : Uniform(1, 5));
      w.kh = Uniform(1, 5);
      w.kw = Uniform(1, 5);
      w.sy = Uniform(1, 3);
      w.sx = Uniform(1, 3);
      w.pt = Uniform(0, w.kh - 1);
      w.pl = Uniform(0, w.kw - 1);
      w.h = Uniform(1, 12);
      w.w = Uniform(1, 12);
      w.dilated = Chance(0.2);
      // The map as read: with `dilated`, a zero between neighbouring pixels.
      const int64_t h = w.dilated ? 2 * w.h - 1 : w.h, wd = w.dilated ? 2 * w.w - 1 : w.w;
      const int64_t pb = Uniform(0, w.kh - 1), pr = Uniform(0, w.kw - 1);
      if (h + w.pt + pb < w.kh || wd + w.pl + pr < w.kw) continue;
      w.oh = (h + w.pt + pb - w.kh) / w.sy + 1;
      w.ow = (wd + w.pl + pr - w.kw) / w.sx + 1;
      w.pooled = Chance(0.4) && w.oh >= 2 && w.ow >= 2;
      w.pad_min = Chance(0.3);
      if (w.pooled) {
        w.oh &= ~int64_t{1};
        w.ow &= ~int64_t{1};
      }
      if (w.Rows(n_) > ub_rows_) continue;
      EmitWindow(w);
      win_ = w;
      return;
    }
  }
  void WindowMatmul(int64_t m, bool do_switch) {
    if (win_.h == 0) return;
    const int64_t pixels = win_.oh * win_.ow;
    const int64_t rows = Uniform(1, std::min<int64_t>({pixels, acc_rows_, 64}));
    uint8_t flags = hw::kFlagWindow | AccFlags() | MxuFlags(m);
    if (do_switch) {
      flags |= hw::kFlagSwitch;
      ++switched_[m];
    }
    const int64_t tiles = (win_.kh * win_.kw * win_.c + n_ - 1) / n_;
    Emit(Opcode::kMatmul, flags, rows, Uniform(0, ub_rows_ - win_.Rows(n_)),
         Uniform(0, acc_rows_ - rows),
         hw::kOpdMatmulFirst.Put(Uniform(0, pixels - rows)) |
             hw::kOpdMatmulKtile.Put(Uniform(0, tiles - 1)));
  }
  // The residual of later activates: rows, multipliers, shift, ReLU, a sum or a product
  // (whose products of two int8 values need about 14 more bits of shift to stay in range).
  // (The bf16 chip adds only: no product.)
  void SetResidual() {
    const bool product = !bf16_ && Chance(0.3);
    const int64_t shift = Chance(0.9) ? Uniform(28, 34) + (product ? 12 : 0) : Uniform(1, 62);
    residual_ub_ = Uniform(0, ub_rows_ - 1);
    residual_set_ = true;
    const uint8_t flags = static_cast<uint8_t>((Chance(0.5) ? hw::kFlagResidualRelu : 0) |
                                               (product ? hw::kFlagProduct : 0));
    Emit(Opcode::kSetResidual, flags, hw::kOpdSetResidualShift.Put(shift), Uniform(0, 0x7fffffff),
         residual_ub_, product || Chance(0.1) ? 0 : Uniform(1 << 28, 0x7fffffff));
  }
  // An activate's function table: none mostly, sigmoid or tanh.
  // (The bf16 chip has no tables.)
  uint8_t FnFlag() {
    if (bf16_) return 0;
    return Chance(0.6) ? 0 : Chance(0.5) ? hw::kFlagSigmoid : hw::kFlagTanh;
  }
  // `set`: the parameter set to use (-1: any).
  void Activate(int64_t set = -1) {
    if (set < 0) set = Uniform(0, sets_ - 1);
    if (residual_set_ && Chance(0.3)) return ResidualActivate(set);
    const bool pooled = acc_rows_ >= 4 && Chance(0.4);
    const int64_t rows = pooled ? 4 * Uniform(1, std::min<int64_t>(acc_rows_ / 4, 16))
                                : Uniform(1, std::min<int64_t>(acc_rows_, 64));
    const int64_t out = pooled ? rows / 4 : rows;
    auto flags =
        static_cast<uint8_t>((Chance(0.5) ? hw::kFlagRelu : 0) | FnFlag() | MxuFlags(PickMxu()));
    if (pooled) flags |= Chance(0.5) ? hw::kFlagPoolAvg : hw::kFlagPoolMax;
    if (!pooled && Chance(0.2)) flags |= hw::kFlagPoolAvg | hw::kFlagPoolMax;  // over lanes
    const int64_t step = Chance(0.2) ? Uniform(2, 4) : 1, span = (out - 1) * step + 1;
    if (span > ub_rows_) {
      Emit(Opcode::kActivate, flags, rows, Uniform(0, acc_rows_ - rows), Uniform(0, ub_rows_ - out),
           set);
      return;
    }
    Emit(Opcode::kActivate, flags, rows, Uniform(0, acc_rows_ - rows), Uniform(0, ub_rows_ - span),
         hw::kOpdActivateParams.Put(set) | hw::kOpdActivateStride.Put(step == 1 ? 0 : step));
  }
  // An activate that adds the residual: its rows inside the program's, some written onto
  // the residual rows themselves.
  void ResidualActivate(int64_t set) {
    const int64_t step = Chance(0.2) ? Uniform(2, 4) : 1;
    const int64_t most = std::min<int64_t>((ub_rows_ - 1 - residual_ub_) / step + 1, acc_rows_);
    const int64_t rows = Uniform(1, std::min<int64_t>(most, 64)), span = (rows - 1) * step + 1;
    const int64_t dst = Chance(0.3) ? residual_ub_ : Uniform(0, ub_rows_ - span);
    Emit(Opcode::kActivate,
         hw::kFlagResidual | (Chance(0.5) ? hw::kFlagRelu : 0) | FnFlag() | MxuFlags(PickMxu()),
         rows, Uniform(0, acc_rows_ - rows), dst,
         hw::kOpdActivateParams.Put(set) | hw::kOpdActivateStride.Put(step == 1 ? 0 : step));
  }
  // A vector instruction (bf16 chips): any operation, each operand float32 or bfloat16, b
  // rows or one broadcast row; the result in place over a (a third of them) or anywhere
  // apart from a and b, as the controller's checks want.
  void Vector() {
    const auto op = static_cast<hw::VectorOp>(Uniform(0, hw::kNumVectorOps - 1));
    const hw::VectorKind kind = hw::Info(op).kind;
    const bool uses_b = kind == hw::VectorKind::kBinary || kind == hw::VectorKind::kSelect;
    const int64_t wa = Chance(0.5) ? 2 : 1, wo = Chance(0.5) ? 2 : 1;
    const int64_t wb = uses_b && Chance(0.5) ? 2 : 1;
    const bool bcast = uses_b && Chance(0.3);
    const int64_t most = std::min<int64_t>(64, ub_rows_ / 4);
    if (most < 1) return;
    for (int tries = 0; tries < 20; ++tries) {
      const int64_t rows = Uniform(1, most);
      const int64_t out_rows = (kind == hw::VectorKind::kRows ? 1 : rows) * wo;
      const int64_t a = Uniform(0, ub_rows_ - rows * wa), a_hi = a + rows * wa;
      const int64_t b_span = (bcast ? 1 : rows) * wb;
      const int64_t b = uses_b ? Uniform(0, ub_rows_ - b_span) : 0, b_hi = b + b_span;
      const int64_t out =
          out_rows == rows * wa && Chance(0.3) ? a : Uniform(0, ub_rows_ - out_rows);
      const int64_t out_hi = out + out_rows;
      auto same_or_apart = [&](int64_t lo, int64_t hi) {
        return (lo == out && hi == out_hi) || hi <= out || out_hi <= lo;
      };
      if (!same_or_apart(a, a_hi)) continue;
      if (uses_b && (bcast ? !(b_hi <= out || out_hi <= b) : !same_or_apart(b, b_hi))) continue;
      const auto flags =
          static_cast<uint8_t>((wa == 2 ? hw::kFlagA32 : 0) | (wb == 2 ? hw::kFlagB32 : 0) |
                               (wo == 2 ? hw::kFlagO32 : 0) | (bcast ? hw::kFlagBcast : 0));
      Emit(Opcode::kVector, flags, rows, a, out,
           hw::kOpdVectorB.Put(static_cast<uint64_t>(b)) |
               hw::kOpdVectorOp.Put(static_cast<uint64_t>(op)));
      return;
    }
  }
  void WriteHost() {
    const int64_t rows = Uniform(1, std::min<int64_t>(ub_rows_, out_bytes_ / row_));
    Emit(Opcode::kWriteHost, 0, rows, Uniform(0, ub_rows_ - rows),
         out_addr_ + Uniform(0, out_bytes_ - rows * row_));
  }
  // Tiles brought and not yet switched in must fit the FIFO and the shadow registers before
  // anything waits for every unit (sync, halt) or for the weight DMA (the next read_weights):
  // otherwise the DMA never finishes, since the matmuls that would make room issue later.
  // Per matrix unit, as the weight DMA serves them in program order.
  bool Fits(int64_t m) const { return brought_[m] - switched_[m] <= c_.weight_fifo_tiles + 1; }
  bool TilesFit() const {
    for (int64_t m = 0; m < mxus_; ++m)
      if (!Fits(m)) return false;
    return true;
  }
  void Invalid(const std::string& kind);
  void InvalidAtRaw(const std::string& kind);  // Invalid's instructions
  // The invalid instructions of each ending, `which` picking one of its kinds.
  void OutOfRange(int which);
  void Overflow(int which);
  void BadWindow(int which);
  void WrongFormat(int which);
  void BadOperand(int which);
  void BadVector();

  struct Win {
    int64_t h = 0, w = 0, c = 0, p = 0, kh = 0, kw = 0, sy = 0, sx = 0, pt = 0, pl = 0, oh = 0,
            ow = 0;
    bool pooled = false, pad_min = false, dilated = false;
    int64_t Rows(int64_t n) const { return ((h * w - 1) * p + c + n - 1) / n; }
  };
  void EmitWindow(const Win& w, int64_t reserved = 0) {
    using namespace hw;                          // the kOpdSetWindow* operands
    const Operand& last = kOpdSetWindowPadLeft;  // reserved bits follow it
    Emit(Opcode::kSetWindow,
         static_cast<uint8_t>((w.pooled ? kFlagPooled : 0) | (w.pad_min ? kFlagPadMin : 0) |
                              (w.dilated ? kFlagDilated : 0)),
         w.p,
         kOpdSetWindowInH.Put(w.h) | kOpdSetWindowInW.Put(w.w) | kOpdSetWindowKh.Put(w.kh) |
             kOpdSetWindowKw.Put(w.kw),
         kOpdSetWindowOutH.Put(w.oh) | kOpdSetWindowOutW.Put(w.ow) |
             kOpdSetWindowStrideY.Put(w.sy) | kOpdSetWindowStrideX.Put(w.sx),
         kOpdSetWindowChannels.Put(w.c) | kOpdSetWindowPadTop.Put(w.pt) |
             kOpdSetWindowPadLeft.Put(w.pl) |
             static_cast<uint32_t>(reserved << (last.lsb + last.bits)));
  }
  Win win_;  // the last window set (h == 0: none yet)
  bool residual_set_ = false;
  int64_t residual_ub_ = 0;  // the residual's first row

  // An operand of the data: random bytes (int8), or on a bf16 chip mostly normal values of
  // moderate size (so that sums round, cancel and carry rather than overflow) with some of
  // every special: zeros of both signs, subnormals, infinities, NaNs, the largest values.
  void PutData(uint8_t* p, int64_t bytes) {
    if (!bf16_) {
      for (int64_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(rng_());
      return;
    }
    static const uint16_t kSpecial[] = {0x0000, 0x8000, 0x0001, 0x807f, 0x7f80,
                                        0xff80, 0x7fc0, 0xffff, 0x7f7f, 0xff7f};
    for (int64_t i = 0; i + 1 < bytes; i += 2) {
      const auto sign = static_cast<uint16_t>(Chance(0.5) ? 0x8000 : 0);
      const auto v = Chance(0.02)
                         ? kSpecial[Uniform(0, 9)]
                         : static_cast<uint16_t>(sign | Uniform(118, 136) << 7 | Uniform(0, 127));
      std::memcpy(p + i, &v, 2);
    }
  }
  // One lane of a parameter set: int8 bias, multiplier and shift; or bf16's float32 bias
  // and upper bound (mostly none, sometimes 6 or a random bound).
  void PutParams(uint8_t* p, int64_t l);

  int64_t host_base_, weight_base_;
  config::TpuConfig c_;
  int64_t n_;
  bool bf16_;
  int64_t row_, set_bytes_;  // a row's bytes, a parameter set's
  int64_t mxus_;             // matrix units
  std::mt19937_64 rng_;
  std::vector<isa::Word> words_;
  int64_t ub_rows_ = 0, acc_rows_ = 0, sets_ = 0;
  int64_t ub_base_ = 0;  // the first of the program's unified-buffer rows (AtBase)
  bool raw_ = false;     // Emit keeps the addresses as drawn (a bad instruction's)
  int64_t in_bytes_ = 0, params_addr_ = 0, out_addr_ = 0, out_bytes_ = 0, weight_bytes_ = 0;
  int64_t weight_params_ = 0;  // the sets' copy in weight memory, after the rows drawn from
  // Per matrix unit: tiles read_weights and load_weights brought, tiles matmuls switched in.
  std::array<int64_t, engine::kMaxMxus> brought_ = {}, switched_ = {};
};

void ProgramDraw::Invalid(const std::string& kind) {
  raw_ = true;
  InvalidAtRaw(kind);
  raw_ = false;
}

void ProgramDraw::InvalidAtRaw(const std::string& kind) {
  const int which = static_cast<int>(Uniform(0, 5));
  if (kind == "invalid-opcode") {
    Instruction in;
    in.opcode = static_cast<Opcode>(Uniform(hw::kLastOpcode + 1, 255));
    in.length = static_cast<uint16_t>(Uniform(0, 9));
    words_.push_back(isa::Encode(in));
  } else if (kind == "address-out-of-range") {
    OutOfRange(which);
  } else if (kind == "buffer-overflow") {
    Overflow(which);
  } else if (kind == "bad-window") {
    BadWindow(which);
  } else if (kind == "wrong-format") {
    WrongFormat(which);
  } else {
    BadOperand(which);
  }
}

// A start address outside its memory, by `which` of six instructions.
void ProgramDraw::OutOfRange(int which) {
  const int64_t ub = c_.ub_depth_rows, acc = c_.acc_depth_rows, sets = c_.param_sets;
  const int64_t host = c_.host_mem_bytes, wm = c_.weight_mem_bytes;
  switch (which) {
    case 0:
      Emit(Opcode::kReadHost, 0, 1, host + Uniform(0, 99), 0);
      break;
    case 1:
      Emit(Chance(0.5) ? Opcode::kReadHost : Opcode::kReadHbm, 0, 1, 0, ub + Uniform(0, 9));
      break;
    case 2:
      if (Chance(0.5))
        Emit(Chance(0.5) ? Opcode::kReadWeights : Opcode::kReadHbm, 0, 1, wm + Uniform(0, 9), 0);
      else if (Chance(0.5))
        Chance(0.5) ? Emit(Opcode::kWriteHbm, 0, 1, ub + Uniform(0, 9), 0)
                    : Emit(Opcode::kWriteHbm, 0, 1, 0, wm + Uniform(0, 9));
      else
        Emit(Opcode::kLoadWeights, 0, 1, ub + Uniform(0, 9), 0);
      break;
    case 3:
      Emit(Opcode::kMatmul, 0, 1, 0, acc + Uniform(0, 9));
      break;
    case 4:
      Emit(Opcode::kActivate, 0, 1, 0, 0, sets + Uniform(0, 9));
      break;
    default:
      if (bf16_ && Chance(0.5))  // a vector instruction's b or result outside the buffer
        Emit(Opcode::kVector, 0, 1, 0, Chance(0.5) ? ub + Uniform(0, 9) : 0,
             hw::kOpdVectorB.Put(static_cast<uint64_t>(ub + Uniform(0, 9))));
      else
        Emit(Opcode::kWriteHost, 0, 1, ub + Uniform(0, 9), 0);
      break;
  }
}

// A transfer that starts inside its memory and runs past the end.
void ProgramDraw::Overflow(int which) {
  const int64_t ub = c_.ub_depth_rows, acc = c_.acc_depth_rows;
  const int64_t host = c_.host_mem_bytes, wm = c_.weight_mem_bytes;
  switch (which) {
    case 0:
      Emit(Opcode::kReadHost, 0, 2, host - row_, 0);
      break;
    case 1:
      Emit(Chance(0.5) ? Opcode::kReadHost : Opcode::kReadHbm, 0, 3, 0, ub - 1);
      break;
    case 2:
      if (Chance(0.5))
        Chance(0.5) ? Emit(Opcode::kReadWeights, 0, 2, wm - n_ * row_, 0)
                    : Emit(Opcode::kReadHbm, 0, 2, wm - row_, 0);
      else if (Chance(0.3))
        Chance(0.5) ? Emit(Opcode::kWriteHbm, 0, 2, 0, wm - row_)
                    : Emit(Opcode::kWriteHbm, 0, 3, ub - 1, 0);
      else
        Emit(Opcode::kLoadWeights, hw::kFlagTranspose, 2, ub - n_, 0);
      break;
    case 3:
      Emit(Opcode::kMatmul, 0, 5, ub - 2, 0);
      break;
    case 4:
      Emit(Opcode::kActivate, hw::kFlagPoolMax, 8, acc - 4, 0);
      break;
    default:
      if (bf16_ && Chance(0.5))  // float32 rows of a past the buffer's end
        Emit(Opcode::kVector, hw::kFlagA32, 2, ub - 3, 0,
             hw::kOpdVectorOp.Put(static_cast<uint64_t>(hw::VectorOp::kExp)));
      else
        Emit(Opcode::kWriteHost, 0, 2, 0, host - row_);
      break;
  }
}

// An inconsistent window, or a window matmul outside the window.
void ProgramDraw::BadWindow(int which) {
  Win w;
  w.h = w.w = 6;
  w.c = w.p = 2;
  w.kh = w.kw = 3;
  w.sy = w.sx = 1;
  w.pt = w.pl = 1;
  w.oh = w.ow = 6;
  switch (which) {
    case 0:  // padding as large as the kernel
      w.pt = 3;
      EmitWindow(w);
      break;
    case 1:  // the output walks past the input
      w.oh = 8;
      EmitWindow(w);
      break;
    case 2:  // pooling order of an odd size
      w.pooled = true;
      w.ow = 5;
      EmitWindow(w);
      break;
    case 3:  // a pixel stride shorter than the pixel, or reserved bits
      if (Chance(0.5))
        w.p = 1;
      else
        w.sy = 0;
      EmitWindow(w, Chance(0.5) ? 0 : Uniform(1, 255));
      break;
    case 4:  // a K-tile past the receptive field
      EmitWindow(w);
      Emit(Opcode::kMatmul, hw::kFlagWindow, 1, 0, 0,
           hw::kOpdMatmulKtile.Put((w.kh * w.kw * w.c + n_ - 1) / n_));
      break;
    default:  // pixels past the output, or no window set yet
      if (win_.h == 0 && Chance(0.5)) {
        Emit(Opcode::kMatmul, hw::kFlagWindow, 1, 0, 0);
      } else {
        EmitWindow(w);
        Emit(Opcode::kMatmul, hw::kFlagWindow, 2, 0, 0, hw::kOpdMatmulFirst.Put(w.oh * w.ow - 1));
      }
      break;
  }
}

// An instruction a bf16 chip refuses as another format's.
void ProgramDraw::WrongFormat(int which) {
  if (which < 2)
    Emit(Opcode::kSetFormat, 0, 0, 0, 0);
  else if (which < 4)
    Emit(Opcode::kSetResidual, hw::kFlagProduct, 30, 1, 0, 0);
  else
    Emit(Opcode::kActivate, which == 4 ? hw::kFlagTanh : hw::kFlagSigmoid, 1, 0, 0);
}

// A bad operand: a zero length, reserved flags, conflicting modes.
void ProgramDraw::BadOperand(int which) {
  switch (which) {
    case 0:
      Emit(Opcode::kReadHost, 0, 0, 0, 0);
      break;
    case 1:
      if (Chance(0.5))
        Emit(Opcode::kMatmul, static_cast<uint8_t>(Chance(0.5) ? 0x10 : BadMxuBits()), 1, 0, 0);
      else
        Emit(Opcode::kMatmul, hw::kFlagMax | hw::kFlagAccumulate, 1, 0, 0);
      break;
    case 2:
      if (Chance(0.5))
        Emit(Opcode::kActivate, hw::kFlagResidual | hw::kFlagPoolAvg | hw::kFlagPoolMax, 4, 0, 0);
      else
        Emit(Opcode::kActivate, hw::kFlagSigmoid | hw::kFlagTanh, 4, 0, 0);
      break;
    case 3:
      if (bf16_ && Chance(0.5))
        BadVector();
      else
        Emit(Opcode::kActivate, hw::kFlagPoolAvg, 6, 0, 0);
      break;
    case 4:
      if (Chance(0.5)) {  // sync with a flag, or a barrier waiting for a core past the last
        if (Chance(0.5))
          Emit(Opcode::kSync, 1, 0, 0, 0);
        else
          Emit(Opcode::kBarrier, 0, 0, int64_t{1} << Uniform(c_.cores, 15), 0);
      } else if (Chance(0.5)) {  // a shift outside 1..62, a multiplier of 2^31, or a
                                 // product with a second multiplier
        const bool shift = Chance(0.5), product = !shift && !bf16_ && Chance(0.3);
        Emit(Opcode::kSetResidual, product ? hw::kFlagProduct : 0,
             shift ? (Chance(0.5) ? 0 : 63) : 30, shift || product ? 1 : 0x80000000u, 0, 1);
      } else if (residual_set_) {  // the residual with pooling
        Emit(Opcode::kActivate, hw::kFlagResidual | hw::kFlagPoolMax, 4, 0, 0);
      } else {  // the residual before any set_residual
        Emit(Opcode::kActivate, hw::kFlagResidual, 1, 0, 0);
      }
      break;
    default:  // an mxu= past the last, or load_weights with a reserved flag or no tiles
      if (Chance(0.5))
        Emit(Opcode::kReadWeights, BadMxuBits(), 1, 0, 0);
      else
        Emit(Opcode::kLoadWeights, Chance(0.5) ? 0x02 : BadMxuBits(), Chance(0.5) ? 1 : 0, 0, 0);
      break;
  }
}

// A bad vector instruction: an operation past the table, b for an operation without one,
// a reserved flag, a result overlapping a without being it.
void ProgramDraw::BadVector() {
  const int64_t why = Uniform(0, 3);
  const uint64_t op = why == 0 ? static_cast<uint64_t>(Uniform(hw::kNumVectorOps, 255))
                               : static_cast<uint64_t>(hw::VectorOp::kAdd);
  const uint64_t b = why == 1 ? 1 : 0;
  Emit(Opcode::kVector, why == 2 ? 0x10 : 0, 4, 0, why == 3 ? 2 : 8,
       hw::kOpdVectorB.Put(b) |
           hw::kOpdVectorOp.Put(why == 1 ? static_cast<uint64_t>(hw::VectorOp::kExp) : op));
}

void ProgramDraw::PutParams(uint8_t* p, int64_t l) {
  if (bf16_) {
    const float bias = Chance(0.95)  ? std::normal_distribution<float>(0.0f, 2.0f)(rng_)
                       : Chance(0.5) ? INFINITY
                                     : NAN;
    const float hi = Chance(0.6)   ? INFINITY
                     : Chance(0.5) ? 6.0f
                                   : static_cast<float>(Uniform(-4, 4));
    std::memcpy(p + hw::kParamBiasByte * n_ + 4 * l, &bias, 4);
    std::memcpy(p + hw::kParamMultiplierByte * n_ + 4 * l, &hi, 4);
    p[hw::kParamShiftByte * n_ + l] = static_cast<uint8_t>(rng_());
    return;
  }
  const auto bias = static_cast<int32_t>(Chance(0.9) ? Uniform(-(1 << 16), 1 << 16)
                                                     : static_cast<int64_t>(rng_()));
  uint32_t mult = static_cast<uint32_t>(Uniform(1 << 30, 0x7fffffff));
  if (Chance(0.1)) mult = 0;
  if (Chance(0.1)) mult = static_cast<uint32_t>(rng_());
  const auto shift = static_cast<uint8_t>(Chance(0.85) ? Uniform(34, 46) : Uniform(0, 255));
  std::memcpy(p + hw::kParamBiasByte * n_ + 4 * l, &bias, 4);
  std::memcpy(p + hw::kParamMultiplierByte * n_ + 4 * l, &mult, 4);
  p[hw::kParamShiftByte * n_ + l] = shift;
}

GeneratedProgram ProgramDraw::Build() {
  GeneratedProgram g;
  // What the program touches: a window of unified-buffer and accumulator rows, some
  // parameter sets, an input and an output area of host memory, some weight tiles.
  ub_rows_ = Uniform(8, std::min<int64_t>(c_.ub_depth_rows, 256));
  // Half the programs use rows anywhere in the buffer (its address bits all toggle).
  ub_base_ = Chance(0.5) ? 0 : Uniform(0, c_.ub_depth_rows - ub_rows_);
  acc_rows_ = Uniform(8, std::min<int64_t>({c_.acc_depth_rows, ub_rows_, 128}));
  sets_ = Uniform(1, std::min<int64_t>(c_.param_sets, 6));
  in_bytes_ = (ub_rows_ + Uniform(0, ub_rows_)) * row_ + Uniform(0, row_);
  params_addr_ = in_bytes_ + Uniform(0, 64);
  out_addr_ = params_addr_ + sets_ * set_bytes_ + Uniform(0, 64);
  out_bytes_ = (ub_rows_ + Uniform(0, ub_rows_)) * row_;
  const int64_t tiles = Uniform(2, 12);
  weight_bytes_ = tiles * n_ * row_ + Uniform(0, row_);
  weight_params_ = weight_bytes_ + Uniform(0, 64);

  FillImages(&g.job, tiles);

  // How the program is meant to end (a bf16 chip also refuses programs of the other format).
  static const char* kKinds[] = {"invalid-opcode", "address-out-of-range", "buffer-overflow",
                                 "bad-operand",    "bad-window",           "watchdog",
                                 "no-halt",        "wrong-format"};
  g.kind = Chance(0.7) ? "valid" : kKinds[Uniform(0, bf16_ ? 7 : 6)];

  // Prologue: the format; every row, set and the active tile the body may read.
  if (bf16_) Emit(Opcode::kSetFormat, hw::kFlagBf16, 0, 0, 0);
  Emit(Opcode::kReadHost, 0, ub_rows_, 0, 0);
  Emit(Opcode::kReadHost, hw::kFlagParams, sets_, params_addr_, 0);
  for (int64_t m = 0; m < mxus_; ++m) {  // every matrix unit's tile and accumulators
    ReadWeights(1, m);
    Emit(Opcode::kMatmul, hw::kFlagSwitch | MxuFlags(m), acc_rows_, 0, 0);
    ++switched_[m];
  }

  Body(g.kind);
  // Epilogue: use the tiles that would not fit; a watchdog program waits for one too many.
  for (int64_t m = 0; m < mxus_; ++m)
    while (!Fits(m)) Matmul(m, true);
  if (g.kind == "watchdog")
    while (switched_[0] <= brought_[0]) Matmul(0, true);
  if (Chance(0.5)) WriteHost();
  if (g.kind != "no-halt") Emit(Opcode::kHalt, 0, 0, 0, 0);
  g.job.program.words = words_;
  g.job.host_out_addr = 0;
  g.job.host_out_bytes = g.job.host_image.size();
  return g;
}

void ProgramDraw::FillImages(engine::ExecJob* job, int64_t tiles) {
  std::vector<uint8_t>& host = job->host_image;
  host.assign(static_cast<size_t>(out_addr_ + out_bytes_), 0);
  PutData(host.data(), in_bytes_);
  for (int64_t s = 0; s < sets_; ++s)
    for (int64_t l = 0; l < n_; ++l)
      PutParams(&host[static_cast<size_t>(params_addr_ + s * set_bytes_)], l);
  std::vector<uint8_t>& w = job->weight_image;
  w.assign(static_cast<size_t>(weight_params_ + sets_ * set_bytes_), 0);
  std::copy_n(&host[static_cast<size_t>(params_addr_)], sets_ * set_bytes_,
              &w[static_cast<size_t>(weight_params_)]);
  const int64_t eb = row_ / n_;  // an operand's bytes
  for (int64_t t = 0; t < tiles; ++t) {
    // Some tiles use only part of the array (a layer narrower than N), as compilers make.
    const int64_t rows = Chance(0.3) ? Uniform(1, n_) : n_,
                  cols = Chance(0.3) ? Uniform(1, n_) : n_;
    for (int64_t r = 0; r < rows; ++r)
      PutData(&w[static_cast<size_t>(t * n_ * row_ + r * row_)], cols * eb);
  }
}

void ProgramDraw::Body(const std::string& kind) {
  const int64_t body = Uniform(3, 40);
  const int64_t bad_at = Uniform(0, body);
  for (int64_t i = 0; i < body; ++i) {
    if (i == bad_at && kind != "valid" && kind != "watchdog" && kind != "no-halt") {
      Invalid(kind);
    }
    const int64_t pick = Uniform(0, 99);
    if (pick < 18) {
      const int64_t r = Uniform(0, 7);
      r < 2 ? ReadHbm() : r == 2 && TilesFit() ? WriteHbm() : ReadHost();
    } else if (pick < 22)
      ReadParams();
    else if (pick < 34 && TilesFit())
      BringWeights(PickMxu());
    else if (pick < 37)
      SetWindow();
    else if (pick < 40)
      SetResidual();
    else if (pick < 50 && win_.h != 0)
      LaneMatmul(true);
    else if (pick < 58)
      LaneMatmul(false);
    else if (pick < 70 || (pick < 78 && !bf16_))
      Activate();
    else if (pick < 78)
      Vector();
    else if (pick < 92)
      WriteHost();
    else if (pick < 96 && TilesFit())  // sync, or a barrier for any of the chip's cores
      Chance(0.5) ? Emit(Opcode::kSync, 0, 0, 0, 0)
                  : Emit(Opcode::kBarrier, 0, 0, Uniform(0, (int64_t{1} << c_.cores) - 1), 0);
    else
      Emit(Opcode::kNop, 0, 0, 0, 0);
  }
  if (bad_at == body && kind != "valid" && kind != "watchdog" && kind != "no-halt") {
    Invalid(kind);
  }
}

}  // namespace

ProgramGenerator::ProgramGenerator(const config::TpuConfig& config, uint64_t seed)
    : config_(config), seed_(seed) {}

GeneratedProgram ProgramGenerator::Make(uint64_t index) const {
  const uint64_t seed = seed_ * 0x9E3779B97F4A7C15ull + index;
  if (config_.cores == 1) return ProgramDraw(config_, seed).Build();
  // A chip of several cores: a program for each core, each in its own window of host and
  // weight memory (so no core reads rows another writes), except that a core after the
  // first sometimes gets none and stays idle. Their barriers wait for random sets of cores:
  // for one that is idle, ended without halt or waits for a weight tile, until the watchdog.
  GeneratedProgram g;
  std::mt19937_64 pick(seed ^ 0xC0DEC0DEC0DEC0DEull);
  constexpr int64_t kAlign = 64;
  int64_t host_base = 0, weight_base = 0;
  for (int c = 0; c < config_.cores; ++c) {
    if (c > 0 && pick() % 8 == 0) {
      g.job.other_programs.emplace_back();
      g.kind += ", idle";
      continue;
    }
    const uint64_t core_seed =
        c == 0 ? seed : seed + 0x51ED270B0B2F7E1Dull * static_cast<uint64_t>(c);
    GeneratedProgram p = ProgramDraw(config_, core_seed, host_base, weight_base).Build();
    auto place = [](std::vector<uint8_t>* image, int64_t base, const std::vector<uint8_t>& part) {
      image->resize(static_cast<size_t>(base), 0);
      image->insert(image->end(), part.begin(), part.end());
    };
    place(&g.job.host_image, host_base, p.job.host_image);
    place(&g.job.weight_image, weight_base, p.job.weight_image);
    host_base = (static_cast<int64_t>(g.job.host_image.size()) + kAlign - 1) / kAlign * kAlign;
    weight_base = (static_cast<int64_t>(g.job.weight_image.size()) + kAlign - 1) / kAlign * kAlign;
    g.kind += (c == 0 ? "" : ", ") + p.kind;
    if (c == 0) {
      g.job.program = std::move(p.job.program);
    } else {
      g.job.other_programs.push_back(std::move(p.job.program));
    }
  }
  g.job.host_out_addr = 0;
  g.job.host_out_bytes = g.job.host_image.size();
  return g;
}

}  // namespace tpu::cosim
