// An LSTM layer over a sequence (PyTorch's nn.LSTM of one layer, batch first, from a zero
// state): the pixels of its input map, in raster order, are its steps and their channels the
// step's inputs x_t; its output is the last step's h (1 x 1 x H). The cell's arithmetic is
// host/nn/lstm.h's, in fp32 and in int8 (docs/quantization.md, "LSTM cells"); the chip runs
// each step as the gates' products on the array and the vector unit's tables, products and
// sum (host/compiler/lower/lstm.cc).
#include "host/nn/lstm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "host/common/errors.h"
#include "host/nn/ops/op.h"

namespace tpu::nn::ops {
namespace {

int64_t Steps(const Layer& l) { return int64_t{l.in.h} * l.in.w; }

// model.json: "hidden", H.
void Read(const nlohmann::json& lj, const std::string& where, Layer* l) {
  const int hidden = lj.at("hidden").get<int>();
  if (hidden < 1) throw UsageError(where + ": an lstm's 'hidden' must be at least 1");
  l->out = {1, 1, hidden};
}

void Write(const Layer& l, nlohmann::json* lj) { (*lj)["hidden"] = l.out.c; }

void Infer(const Model& /*m*/, const std::string& /*where*/, Layer* l) {
  l->out = {1, 1, l->out.c};
}

// The gates' 4H columns; [x; h] W: (X + H) x 4H.
int64_t Columns(const Layer& l) { return 4 * int64_t{l.out.c}; }
std::vector<int64_t> WeightShape(const Layer& l) { return {int64_t{l.in.c} + l.out.c, Columns(l)}; }
// From a zero state: the first step has no products with h (h0 = 0) and no f gate (c0 = 0).
int64_t Macs(const Layer& l) {
  const int64_t x = l.in.c, h = l.out.c;
  return x * 3 * h + (Steps(l) - 1) * (x + h) * 4 * h;
}

Lstm CellOf(const Layer& l) {
  Lstm c;
  c.inputs = l.in.c;
  c.hidden = l.out.c;
  c.weights = l.weights.data;
  c.bias = l.bias.data;
  return c;
}

QuantizedLstm Int8CellOf(const Layer& l) {
  QuantizedLstm q;
  q.inputs = l.in.c;
  q.hidden = l.out.c;
  q.cell_scale = l.q.cell_scale;
  q.weights = l.q.weights.data;
  q.bias = l.q.bias.data;
  q.weight_scale = l.q.weight_scales;
  q.multiplier = l.q.multiplier;
  q.shift = l.q.shift;
  const std::vector<int32_t>& m = l.q.cell_multiplier;
  const std::vector<int32_t>& s = l.q.cell_shift;
  q.fc_mul = m[0], q.fc_shift = s[0];
  q.ig_mul = m[1], q.ig_shift = s[1];
  q.tanh_mul = m[2], q.tanh_shift = s[2];
  q.h_mul = m[3], q.h_shift = s[3];
  return q;
}

// The fp32 cell over the batch's sequences (x: one row of steps x X each) from h = c = 0:
// the last h, one row each; on_step(c) is called after each step.
template <class F>
MatrixF RunFp32(const Layer& l, const MatrixF& x, F&& on_step) {
  const Lstm cell = CellOf(l);
  const int64_t b = x.rows(), xs = l.in.c, hs = l.out.c;
  std::vector<float> h(static_cast<size_t>(b * hs), 0.0f), c = h, xt(static_cast<size_t>(b * xs));
  for (int64_t t = 0; t < Steps(l); ++t) {
    for (int64_t i = 0; i < b; ++i)
      for (int64_t k = 0; k < xs; ++k) xt[static_cast<size_t>(i * xs + k)] = x(i, t * xs + k);
    Fp32LstmStep(cell, xt.data(), h.data(), c.data(), b);
    on_step(c);
  }
  return Eigen::Map<const MatrixF>(h.data(), b, hs);
}

void Forward(const Layer& l, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/,
             MatrixF* out) {
  *out = RunFp32(l, *xs[0], [](const std::vector<float>&) {});
}

// The largest |c| over the steps (the cell's int8 scale is that over 127).
float CellRange(const Layer& l, const MatrixF& x) {
  float most = 0;
  RunFp32(l, x, [&](const std::vector<float>& c) {
    for (const float v : c) most = std::max(most, std::fabs(v));
  });
  return most;
}

// The int8 rule: nn::Int8LstmStep over the steps from h = c = 0; y is the last h.
void Int8(const Layer& l, const std::vector<const int8_t*>& xs,
          const std::vector<int>& /*channels*/, int8_t* y) {
  const QuantizedLstm q = Int8CellOf(l);
  std::vector<int8_t> c(static_cast<size_t>(q.hidden), 0);
  std::fill_n(y, q.hidden, int8_t{0});
  for (int64_t t = 0; t < Steps(l); ++t) Int8LstmStep(q, xs[0] + t * q.inputs, y, c.data(), 1);
}

// nn::QuantizeLstm with the cell scale calibrated (q.cell_scale, quantize.cc) and the
// input's scale folded into its rows of weights; h has scale 1/127.
float Quantize(Layer* l, const std::vector<float>& in_scales, float /*range*/) {
  const QuantizedLstm c = QuantizeLstm(CellOf(*l), l->q.cell_scale, in_scales[0]);
  QuantizedLayer& q = l->q;
  q.input_scale = in_scales[0];
  q.output_scale = 1.0f / 127.0f;
  q.weights = {WeightShape(*l), c.weights};
  q.bias = {{Columns(*l)}, c.bias};
  q.weight_scales = c.weight_scale;
  q.multiplier = c.multiplier;
  q.shift = c.shift;
  q.cell_multiplier = {c.fc_mul, c.ig_mul, c.tanh_mul, c.h_mul};
  q.cell_shift = {c.fc_shift, c.ig_shift, c.tanh_shift, c.h_shift};
  l->quantized = true;
  return q.output_scale;
}

// The int8 section's cell: "cell_scale", and "cell_multiplier" and "cell_shift" (4 each).
void ReadInt8(const nlohmann::json& qj, const std::string& where, Layer* l) {
  l->q.cell_scale = qj.at("cell_scale").get<float>();
  l->q.cell_multiplier = VectorOf<int32_t>(qj, "cell_multiplier", 4, where);
  l->q.cell_shift = VectorOf<int32_t>(qj, "cell_shift", 4, where);
  if (!(l->q.cell_scale > 0)) throw UsageError(where + ": 'cell_scale' must be positive");
}

void WriteInt8(const Layer& l, nlohmann::json* qj) {
  (*qj)["cell_scale"] = l.q.cell_scale;
  (*qj)["cell_multiplier"] = l.q.cell_multiplier;
  (*qj)["cell_shift"] = l.q.cell_shift;
}

[[noreturn]] void RefuseBf16(const Layer& l) {
  throw UsageError(fmt::format(
      "lstm '{}' runs on int8 chips only: its gates take the vector unit's function tables, "
      "which a bf16 chip's has not (docs/vpu.md)",
      l.name));
}

void Bf16Prepare(Bf16Layer* p) { RefuseBf16(*p->layer); }

Bf16Values Bf16(const Bf16Layer& p, const std::vector<const Bf16Values*>& /*xs*/) {
  RefuseBf16(*p.layer);
}

}  // namespace

const OpDef& LstmOp() {
  static const OpDef op = [] {
    OpDef d;
    d.type = LayerType::kLstm;
    d.name = "lstm";
    d.read = Read;
    d.write = Write;
    d.version = GraphVersion;
    d.weight_shape = WeightShape;
    d.columns = Columns;
    d.state_range = CellRange;
    d.read_int8 = ReadInt8;
    d.write_int8 = WriteInt8;
    d.infer = Infer;
    d.macs = Macs;
    d.forward = Forward;
    d.int8 = Int8;
    d.quantize = Quantize;
    d.bf16_prepare = Bf16Prepare;
    d.bf16 = Bf16;
    return d;
  }();
  return op;
}

}  // namespace tpu::nn::ops
