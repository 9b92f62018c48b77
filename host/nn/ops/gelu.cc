// GELU, value by value: x Phi(x) = x (1 + erf(x / sqrt 2)) / 2, PyTorch's exact form, which
// its ONNX export writes as Div, Erf, Add, Mul, Mul (docs/transformers.md).
#include <cmath>

#include "host/nn/ops/transformer_ops.h"

namespace tpu::nn::ops {
namespace {

void Infer(const Model& /*m*/, const std::string& /*where*/, Layer* l) { l->out = l->in; }

// The export's order: ((x (erf(x / sqrt 2) + 1)) 0.5.
void Forward(const Layer& /*l*/, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/,
             MatrixF* out) {
  const float root2 = std::sqrt(2.0f);
  *out = xs[0]->unaryExpr([root2](float x) { return x * (std::erf(x / root2) + 1.0f) * 0.5f; });
}

}  // namespace

const OpDef& GeluOp() {
  static const OpDef op = [] {
    OpDef d = FloatOnly(LayerType::kGelu, "gelu");
    d.infer = Infer;
    d.forward = Forward;
    return d;
  }();
  return op;
}

}  // namespace tpu::nn::ops
