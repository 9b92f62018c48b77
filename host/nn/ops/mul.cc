// An elementwise product of two maps of one shape: a gate (a gated linear unit, the x times
// its Erf branch of a GELU that PyTorch exports, the products of an LSTM-like cell).
#include <fmt/format.h>

#include "host/common/errors.h"
#include "host/nn/ops/op.h"
#include "host/nn/quantize.h"

namespace tpu::nn::ops {
namespace {

void Infer(const Model& m, const std::string& where, Layer* l) {
  InferOneShape(m, where, l, "mul", "multiplies a {a} map by a {b} one");
}

void Forward(const Layer& /*l*/, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/,
             MatrixF* out) {
  *out = xs[0]->cwiseProduct(*xs[1]);
}

// The int8 rule: MulRequantize of each pair of values, as the vector unit's residual product
// computes it (docs/quantization.md, "Products").
void Int8(const Layer& l, const std::vector<const int8_t*>& xs,
          const std::vector<int>& /*channels*/, int8_t* y) {
  ResidualInt8(l, xs, /*product=*/true, y);
}

// Calibrated like a layer's output (an empty range: ReLU6's 6 / 127, else 1); one multiplier
// and shift for the product's scale over the output's, s_a s_b / s_y. The second multiplier
// is 0: the residual's own term, which a product does not add (docs/isa.md, set_residual).
float Quantize(Layer* l, const std::vector<float>& in_scales, float range) {
  QuantizedLayer& q = l->q;
  q.input_scales = in_scales;
  q.output_scale = JoinOutputScale(*l, range);
  const double real = double{in_scales[0]} * in_scales[1] / q.output_scale;
  if (!(real < double{1 << 30})) {
    throw UsageError(fmt::format(
        "mul '{}': its inputs' scales over its output's ({}) exceed 2^30, which the vector "
        "unit's multiplier cannot hold; calibrate with inputs that reach its output",
        l->name, real));
  }
  q.multiplier.assign(2, 0);
  q.shift.assign(1, 62);
  QuantizeMultiplier(real, &q.multiplier[0], &q.shift[0]);
  l->quantized = true;
  return q.output_scale;
}

[[noreturn]] void RefuseBf16(const Layer& l) {
  throw UsageError("mul '" + l.name +
                   "' runs on int8 chips only: a bf16 chip's vector unit adds a residual but "
                   "does not multiply by one (the controller refuses the product; docs/bf16.md)");
}

void Bf16Prepare(Bf16Layer* p) { RefuseBf16(*p->layer); }

Bf16Values Bf16(const Bf16Layer& p, const std::vector<const Bf16Values*>& /*xs*/) {
  RefuseBf16(*p.layer);
}

}  // namespace

const OpDef& MulOp() {
  static const OpDef op = [] {
    OpDef d = ValueJoin(LayerType::kMul, "mul");
    d.infer = Infer;
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
