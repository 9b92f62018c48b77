// See lower_ops.h: an LSTM layer, step by step, as the operations a cell is made of.
#include <fmt/format.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "arith/format.h"
#include "host/compiler/lower/lower_ops.h"
#include "host/compiler/lower/lowering.h"
#include "host/compiler/packing.h"

namespace tpu::compiler::lower {
namespace {

// The gates in PyTorch's order, their columns k H .. (k + 1) H of the weights.
enum Gate { kI = 0, kF = 1, kG = 2, kO = 3 };

class LstmLowering {
 public:
  LstmLowering(Lowering& lw, int i)
      : lw_(lw), g_(lw.graph()), l_(lw.L(i)), i_(i), n_(lw.n()), x_(l_.in.c), h_(l_.out.c) {}

  void Run();

 private:
  // The packed model input as a map of whole pixels (T rows of N lanes each, which the
  // gates' terms read in place): a 1 x 1 window of identity tiles.
  int Unpack(int t);
  // Gate k of step `step`: its products over x_t (row step x xt + kb of each image of the
  // sequence `seq`) and h (tile kb of `h`, -1 at the first step: h = 0), requantized by the
  // gate's columns' parameters into its table `fn`; with `residual` (-1: none) multiplied
  // by it through the vector unit's residual stage (`mul`, `shift`).
  int GateOp(int step, Gate k, int seq, int h, isa::Fn fn, int residual, int32_t mul,
             int32_t shift);
  // Weight tile (kb, j) of gate k: rows [row0 + kb N, ..) of the weights, at most `rows`.
  int GateTile(Gate k, int64_t row0, int64_t rows, int64_t kb, int64_t j);
  // Gate k's tile (kb, j) of x's rows (`x`) or h's: GateTile's, made once for every step
  // (-1: zeros).
  int TileOf(Gate k, bool x, int64_t kb, int64_t j);
  // An identity pass of tensor `a` (its activates requantized by `channel`, through table
  // `fn`), with `residual` (-1: none) joined by `r`.
  int Pass(const std::string& name, int a, arith::Int8Format::Channel channel, isa::Fn fn,
           int residual, isa::Residual r);
  GraphOp NewOp(OpKind kind, const std::string& name) const;
  // Adds op, writing a new tensor of h x w pixels of c channels; returns the tensor.
  int Finish(GraphOp op, int64_t h, int64_t w, int64_t c);

  Lowering& lw_;
  LoweredGraph& g_;
  const nn::Layer& l_;
  const int i_;
  const int64_t n_, x_, h_;
  std::map<std::tuple<int, bool, int64_t, int64_t>, int> tiles_;  // TileOf's
};

GraphOp LstmLowering::NewOp(OpKind kind, const std::string& name) const {
  GraphOp op = lw_.NewOp(kind, i_);
  op.name = l_.name + "." + name;
  return op;
}

int LstmLowering::Finish(GraphOp op, int64_t h, int64_t w, int64_t c) {
  op.output = lw_.NewTensor(h, w, c, false);
  const int out = op.output;
  lw_.Finish(std::move(op), i_, -1, -1);
  return out;
}

int LstmLowering::Unpack(int t) {
  const GraphTensor in = g_.tensors[static_cast<size_t>(t)];
  GraphOp op = NewOp(OpKind::kConv, "unpack");
  op.inputs = {t};
  op.rows = in.Pixels();
  lw_.SetWindow(&op, in, 1, 1, 1, 0, 0, in.h, in.w, in.c);
  op.nt = (in.c + n_ - 1) / n_;
  const int id = lw_.ShiftTile(0, n_, 0);
  for (int64_t j = 0; j < op.nt; ++j) op.terms.push_back({{0, true, j, id}});
  op.macs = in.Pixels() * in.c;
  lw_.IdentityParams(op, in.c);
  return Finish(std::move(op), in.h, in.w, in.c);
}

int LstmLowering::GateTile(Gate k, int64_t row0, int64_t rows, int64_t kb, int64_t j) {
  const int64_t gates = 4 * h_;
  std::vector<uint8_t> t(static_cast<size_t>(n_ * n_), 0);
  for (int64_t r = 0; r < n_ && kb * n_ + r < rows; ++r)
    for (int64_t c = 0; c < n_ && j * n_ + c < h_; ++c)
      t[static_cast<size_t>(r * n_ + c)] = static_cast<uint8_t>(
          l_.q.weights
              .data[static_cast<size_t>((row0 + kb * n_ + r) * gates + k * h_ + j * n_ + c)]);
  return Lowering::Zero(t) ? -1 : lw_.Tile(t);
}

int LstmLowering::TileOf(Gate k, bool x, int64_t kb, int64_t j) {
  const auto key = std::make_tuple(static_cast<int>(k), x, kb, j);
  const auto it = tiles_.find(key);
  if (it != tiles_.end()) return it->second;
  return tiles_[key] = x ? GateTile(k, 0, x_, kb, j) : GateTile(k, x_, h_, kb, j);
}

int LstmLowering::GateOp(int step, Gate k, int seq, int h, isa::Fn fn, int residual, int32_t mul,
                         int32_t shift) {
  static constexpr const char* kNames[] = {"i", "f", "g", "o"};
  GraphOp op = NewOp(OpKind::kDense, fmt::format("t{}.{}", step, kNames[k]));
  op.inputs = {seq};
  if (h >= 0) op.inputs.push_back(h);
  op.stacked = op.image_rows = true;  // one row per image: x_t's tiles, h's
  op.rows = 1;
  op.fn = fn;
  op.nt = (h_ + n_ - 1) / n_;
  const int64_t xt = (x_ + n_ - 1) / n_, ht = op.nt;
  op.terms.resize(static_cast<size_t>(op.nt));
  for (int64_t j = 0; j < op.nt; ++j) {
    for (int64_t kb = 0; kb < xt; ++kb)
      if (const int tile = TileOf(k, true, kb, j); tile >= 0)
        op.terms[static_cast<size_t>(j)].push_back({0, false, step * xt + kb, tile});
    for (int64_t kb = 0; h >= 0 && kb < ht; ++kb)
      if (const int tile = TileOf(k, false, kb, j); tile >= 0)
        op.terms[static_cast<size_t>(j)].push_back({1, false, kb, tile});
  }
  op.macs = (h >= 0 ? x_ + h_ : x_) * h_;
  const auto at = static_cast<size_t>(k * h_);
  lw_.Params<arith::Int8Format>(
      op, Int8Channels(l_.q.bias.data.data() + at, l_.q.multiplier.data() + at,
                       l_.q.shift.data() + at, h_));
  if (residual >= 0) {
    op.residual = residual;
    op.residual_mul.mul_a = static_cast<uint64_t>(mul);
    op.residual_mul.shift = static_cast<uint64_t>(shift);
    op.residual_mul.product = true;
  }
  return Finish(std::move(op), 1, 1, h_);
}

int LstmLowering::Pass(const std::string& name, int a, arith::Int8Format::Channel channel,
                       isa::Fn fn, int residual, isa::Residual r) {
  GraphOp op = NewOp(OpKind::kResidual, name);
  op.inputs = {a};
  op.fn = fn;
  IdentityPass(lw_, g_.tensors[static_cast<size_t>(a)], &op);
  lw_.Params<arith::Int8Format>(
      op, std::vector<arith::Int8Format::Channel>(static_cast<size_t>(h_), channel));
  op.residual = residual;
  op.residual_mul = r;
  return Finish(std::move(op), 1, 1, h_);
}

// Each step as the chip runs a cell (docs/quantization.md, "LSTM cells"): g = tanh(z_g);
// i g, the i gate's table times g in one activate; f c likewise (none at the first step, c
// being 0); c' = f c + i g through the residual stage's sum (the first step's c' is i g:
// (2 x 0 + 2 i g) / 2); tanh(c') requantized to the table's input; h' = o tanh(c'), the o
// gate's table times it.
void LstmLowering::Run() {
  if (lw_.bf16()) {
    lw_.No(
        fmt::format("lstm '{}' runs on int8 chips only: its gates take the vector unit's "
                    "function tables, which a bf16 chip's has not (docs/vpu.md)",
                    l_.name));
    return;
  }
  int seq = lw_.TensorOf(l_.inputs[0]);
  if (g_.tensors[static_cast<size_t>(seq)].packed) seq = Unpack(seq);
  if (!g_.why_not.empty()) return;
  const std::vector<int32_t>& m = l_.q.cell_multiplier;
  const std::vector<int32_t>& s = l_.q.cell_shift;
  const arith::Int8Format::Channel to_tanh{0, m[2], s[2]};
  const isa::Residual sum{0, 2, 2, 1, false, false}, none;
  int h = -1, c = -1;
  for (int step = 0; step < l_.in.h * l_.in.w; ++step) {
    const std::string t = fmt::format("t{}.", step);
    const int gt = GateOp(step, kG, seq, h, isa::Fn::kTanh, -1, 0, 0);
    const int ig = GateOp(step, kI, seq, h, isa::Fn::kSigmoid, gt, m[1], s[1]);
    if (c < 0) {
      c = ig;
    } else {
      const int fc = GateOp(step, kF, seq, h, isa::Fn::kSigmoid, c, m[0], s[0]);
      c = Pass(t + "c", fc, arith::Int8Format::Identity(), isa::Fn::kNone, ig, sum);
    }
    const int tc = Pass(t + "tanh", c, to_tanh, isa::Fn::kTanh, -1, none);
    h = GateOp(step, kO, seq, h, isa::Fn::kSigmoid, tc, m[3], s[3]);
  }
}

}  // namespace

void LowerLstm(Lowering& lw, int i) { LstmLowering(lw, i).Run(); }

}  // namespace tpu::compiler::lower
