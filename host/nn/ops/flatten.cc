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
  static const OpDef op{LayerType::kFlatten,
                        "flatten",
                        1,
                        1,
                        false,
                        Infer,
                        Macs,
                        Forward,
                        Backward,
                        CopyInt8,
                        KeepScale};
  return op;
}

}  // namespace tpu::nn::ops
