// Flatten: a map's values as one vector (h, w, c order: the same row).
#include "host/nn/ops/op.h"

namespace tpu::nn::ops {
namespace {

void Infer(const Model& /*m*/, const std::string& /*where*/, Layer* l) {
  l->out = {1, 1, static_cast<int>(l->in.Size())};
}

int64_t Macs(const Layer& /*l*/) { return 0; }

void Forward(const Layer& /*l*/, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/,
             MatrixF* out) {
  *out = *xs[0];
}

void Backward(const Layer& /*l*/, const BackwardStep& s) {
  if (s.dx != nullptr) *s.dx = s.dy;
}

}  // namespace

const OpDef& FlattenOp() {
  // clang-format off
  static const OpDef op{LayerType::kFlatten, "flatten", /*inputs=*/1, 1, /*activation=*/false,
                        Infer, Macs, Forward, Backward, CopyInt8, KeepScale};
  // clang-format on
  return op;
}

}  // namespace tpu::nn::ops
