// See lower_ops.h: adds.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "host/compiler/lower/lower_ops.h"
#include "host/compiler/lower/lowering.h"

namespace tpu::compiler::lower {

void LowerAdd(Lowering& lw, int i) {
  const nn::Layer& l = lw.L(i);
  if (lw.bf16() && l.activation == nn::Activation::kRelu6) {
    lw.No("add '" + l.name +
          "' ends in ReLU6, which a bf16 chip's residual add does not apply (it applies ReLU "
          "or nothing; docs/bf16.md)");
    return;
  }
  if (lw.Fused(i)) return;
  if (lw.bf16()) return LowerVectorAdd(lw, i);
  LowerResidualJoin(lw, i, /*product=*/false, "add", "adds");
}

// arith::Bf16ResidualAdd on the vector unit: s = (a + 0) + b, the first add making a's zero
// +0 as the array would, and then ReLU as max(s, +0), each step rounded to bfloat16. With
// ReLU the +0 step is not needed: a zero sum becomes +0 whatever its sign. Rounding each
// step to bfloat16 gives the reference's one rounding: a + 0 is exact, and max(round(s), +0)
// = round(max(s, +0)) as rounding keeps the sign (docs/compiler.md, "Adds on the vector
// unit").
void LowerVectorAdd(Lowering& lw, int i) {
  LoweredGraph& g = lw.graph();
  const nn::Layer& l = lw.L(i);
  const int a = lw.TensorOf(l.inputs[0]), b = lw.TensorOf(l.inputs[1]);
  if (JoinReadsTheInput(lw, i, "add", "adds")) return;
  GraphOp op = lw.NewOp(OpKind::kVector, i);
  op.inputs = {a, b};
  op.relu = l.activation == nn::Activation::kRelu;
  constexpr int kOut = VectorStep::kOutput, kZeros = VectorStep::kZeros;
  if (op.relu) {
    op.steps = {{hw::VectorOp::kAdd, a, b}, {hw::VectorOp::kMax, kOut, kZeros}};
  } else {
    op.steps = {{hw::VectorOp::kAdd, a, kZeros}, {hw::VectorOp::kAdd, kOut, b}};
  }
  const GraphTensor in = g.tensors[static_cast<size_t>(a)];
  op.output = lw.NewTensor(in.h, in.w, in.c, op.relu);
  lw.Finish(std::move(op), i, -1, -1);
}

}  // namespace tpu::compiler::lower
