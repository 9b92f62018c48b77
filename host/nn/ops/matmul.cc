// The product of two computed tensors, one per head: for each of the h heads, the first
// input's w x c matrix by the second's, times `scale` (c rows; transposed with transpose_b:
// its w x c matrix as c x w). Attention's scores (Q K^T, scaled) and context (P V)
// (docs/transformers.md, "Operations").
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "host/common/errors.h"
#include "host/nn/ops/op.h"
#include "host/nn/ops/transformer_ops.h"

namespace tpu::nn::ops {
namespace {

using MapF = Eigen::Map<const MatrixF>;

// The second input's matrix of one head: K x N, as stored (transpose_b: N x K).
void Infer(const Model& m, const std::string& where, Layer* l) {
  const Shape3& a = l->in;
  const Shape3& b = m.OutputOf(l->inputs[1]);
  const int k = l->transpose_b ? b.c : b.w, n = l->transpose_b ? b.w : b.c;
  if (a.h != b.h || a.c != k) {
    throw UsageError(fmt::format(
        "{}: matmul multiplies {} heads of {} x {} by {} heads of {} x {}{}: the heads and the "
        "inner sizes must agree",
        where, a.h, a.w, a.c, b.h, b.w, b.c, l->transpose_b ? " transposed" : ""));
  }
  l->out = {a.h, a.w, n};
}

int64_t Macs(const Layer& l) { return l.out.Size() * l.in.c; }

void Forward(const Layer& l, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/,
             MatrixF* out) {
  const Shape3 a = l.in;
  const int64_t k = a.c, n = l.out.c, b_size = xs[1]->cols() / a.h;
  out->resize(xs[0]->rows(), l.out.Size());
  for (Eigen::Index r = 0; r < xs[0]->rows(); ++r) {
    for (int head = 0; head < a.h; ++head) {
      const MapF x(xs[0]->row(r).data() + head * a.w * k, a.w, k);
      const float* bp = xs[1]->row(r).data() + head * b_size;
      Eigen::Map<MatrixF> y(out->row(r).data() + head * a.w * n, a.w, n);
      if (l.transpose_b)
        y.noalias() = x * MapF(bp, n, k).transpose();
      else
        y.noalias() = x * MapF(bp, k, n);
      if (l.scale != 1.0f) y *= l.scale;
    }
  }
}

void ReadFields(const nlohmann::json& lj, const std::string& where, Layer* l) {
  l->transpose_b = lj.value("transpose_b", false);
  l->scale = lj.value("scale", 1.0f);
  if (!(l->scale > 0)) throw UsageError(where + ": matmul's scale must be positive");
}

void WriteFields(const Layer& l, nlohmann::json* lj) {
  (*lj)["transpose_b"] = l.transpose_b;
  (*lj)["scale"] = l.scale;
}

}  // namespace

const OpDef& MatMulOp() {
  static const OpDef op = [] {
    OpDef d = FloatOnly(LayerType::kMatMul, "matmul");
    d.min_inputs = d.max_inputs = 2;
    d.read = ReadFields;
    d.write = WriteFields;
    d.infer = Infer;
    d.macs = Macs;
    d.forward = Forward;
    return d;
  }();
  return op;
}

}  // namespace tpu::nn::ops
