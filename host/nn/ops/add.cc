// An elementwise add of two maps of one shape (a residual connection).

#include "arith/bf16.h"
#include "host/common/errors.h"
#include "host/nn/ops/op.h"
#include "host/nn/quantize.h"

namespace tpu::nn::ops {
namespace {

void Infer(const Model& m, const std::string& where, Layer* l) {
  InferOneShape(m, where, l, "add", "adds a {b} map to a {a} one");
}

void Forward(const Layer& /*l*/, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/,
             MatrixF* out) {
  *out = *xs[0] + *xs[1];
}

// Each input takes the output's gradient as it is.
void Backward(const Layer& /*l*/, const BackwardStep& s) {
  for (MatrixF* dx : s.dx)
    if (dx != nullptr) *dx = s.dy;
}

// The int8 rule: AddRequantize of each value (docs/quantization.md).
void Int8(const Layer& l, const std::vector<const int8_t*>& xs,
          const std::vector<int>& /*channels*/, int8_t* y) {
  ResidualInt8(l, xs, /*product=*/false, y);
}

// Calibrated like a layer's output (an empty range: ReLU6's 6 / 127, else 1); the two
// inputs' multipliers with one shift (QuantizeAddMultipliers).
float Quantize(Layer* l, const std::vector<float>& in_scales, float range) {
  QuantizedLayer& q = l->q;
  q.input_scales = in_scales;
  q.output_scale = JoinOutputScale(*l, range);
  q.multiplier.assign(2, 0);
  q.shift.assign(1, 62);
  QuantizeAddMultipliers(double{in_scales[0]} / q.output_scale,
                         double{in_scales[1]} / q.output_scale, &q.multiplier[0], &q.multiplier[1],
                         &q.shift[0]);
  l->quantized = true;
  return q.output_scale;
}

void Bf16Prepare(Bf16Layer* p) {
  if (p->layer->activation == Activation::kRelu6) {
    throw UsageError("add '" + p->layer->name +
                     "' ends in ReLU6, which the bf16 chip's residual add does not apply "
                     "(it applies ReLU or nothing; docs/bf16.md)");
  }
}

// The vector unit's residual add (arith::Bf16ResidualAdd), ReLU or none.
Bf16Values Bf16(const Bf16Layer& p, const std::vector<const Bf16Values*>& xs) {
  Bf16Values y(static_cast<size_t>(p.layer->out.Size()));
  const bool relu = p.layer->activation == Activation::kRelu;
  for (size_t j = 0; j < y.size(); ++j)
    y[j] = arith::Bf16ResidualAdd((*xs[0])[j], (*xs[1])[j], relu);
  return y;
}

}  // namespace

const OpDef& AddOp() {
  static const OpDef op = [] {
    OpDef d = ValueJoin(LayerType::kAdd, "add");
    d.infer = Infer;
    d.forward = Forward;
    d.backward = Backward;
    d.int8 = Int8;
    d.quantize = Quantize;
    d.bf16_prepare = Bf16Prepare;
    d.bf16 = Bf16;
    return d;
  }();
  return op;
}

}  // namespace tpu::nn::ops
