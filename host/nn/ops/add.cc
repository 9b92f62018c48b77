// An elementwise add of two maps of one shape (a residual connection).
#include <fmt/format.h>

#include "arith/int8.h"
#include "host/common/errors.h"
#include "host/nn/ops/op.h"
#include "host/nn/quantize.h"

namespace tpu::nn::ops {
namespace {

void Infer(const Model& m, const std::string& where, Layer* l) {
  if (l->activation == Activation::kSoftmax) {
    throw UsageError(where + ": an add takes relu, relu6 or no activation");
  }
  const Shape3& s = m.OutputOf(l->inputs[1]);
  if (!(s == l->in)) {
    throw UsageError(fmt::format("{}: adds a {} x {} x {} map to a {} x {} x {} one", where, s.h,
                                 s.w, s.c, l->in.h, l->in.w, l->in.c));
  }
  l->out = l->in;
}

int64_t Macs(const Layer& /*l*/) { return 0; }

void Forward(const Layer& /*l*/, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/,
             MatrixF* out) {
  *out = *xs[0] + *xs[1];
}

// The int8 rule: AddRequantize of each value (docs/quantization.md).
void Int8(const Layer& l, const std::vector<const int8_t*>& xs,
          const std::vector<int>& /*channels*/, int8_t* y) {
  const int8_t* a = xs[0];
  const int8_t* b = xs[1];
  const int32_t lo = ClampsAtZero(l.activation) ? 0 : -128;
  const auto ma = static_cast<uint32_t>(l.q.multiplier[0]),
             mb = static_cast<uint32_t>(l.q.multiplier[1]);
  const auto shift = static_cast<uint32_t>(l.q.shift[0]);
  for (int64_t i = 0; i < l.out.Size(); ++i)
    y[i] = arith::AddRequantize(a[i], b[i], ma, mb, shift, lo);
}

// Calibrated like a layer's output (an empty range: ReLU6's 6 / 127, else 1); the two
// inputs' multipliers with one shift (QuantizeAddMultipliers).
float Quantize(Layer* l, const std::vector<float>& in_scales, float range) {
  QuantizedLayer& q = l->q;
  q.input_scales = in_scales;
  const float empty = l->activation == Activation::kRelu6 ? 6.0f / 127.0f : 1.0f;
  q.output_scale = range > 0 ? range / 127.0f : empty;
  q.multiplier.assign(2, 0);
  q.shift.assign(1, 62);
  QuantizeAddMultipliers(double{in_scales[0]} / q.output_scale,
                         double{in_scales[1]} / q.output_scale, &q.multiplier[0], &q.multiplier[1],
                         &q.shift[0]);
  l->quantized = true;
  return q.output_scale;
}

}  // namespace

const OpDef& AddOp() {
  // clang-format off
  static const OpDef op{LayerType::kAdd, "add", /*inputs=*/2, 2, /*activation=*/true,
                        Infer, Macs, Forward, /*backward=*/nullptr, Int8, Quantize};
  // clang-format on
  return op;
}

}  // namespace tpu::nn::ops
