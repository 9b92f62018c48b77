// Flatten: a map's values as one vector (h, w, c order: the same row).
#include "host/nn/ops/op.h"

namespace tpu::nn::ops {
namespace {

void Infer(const Model& /*m*/, const std::string& /*where*/, Layer* l) {
  l->out = {1, 1, static_cast<int>(l->in.Size())};
}

void Forward(const Layer& /*l*/, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/,
             MatrixF* out) {
  *out = *xs[0];
}

void Backward(const Layer& /*l*/, const BackwardStep& s) {
  if (s.dx[0] != nullptr) *s.dx[0] = s.dy;
}

// The same values in the same order.
Bf16Values Bf16(const Bf16Layer& /*p*/, const std::vector<const Bf16Values*>& xs) { return *xs[0]; }

}  // namespace

const OpDef& FlattenOp() {
  static const OpDef op = [] {
    OpDef d;
    d.type = LayerType::kFlatten;
    d.name = "flatten";
    d.infer = Infer;
    d.macs = NoMacs;
    d.forward = Forward;
    d.backward = Backward;
    d.int8 = CopyInt8;
    d.quantize = KeepScale;
    d.bf16 = Bf16;
    return d;
  }();
  return op;
}

}  // namespace tpu::nn::ops
