// See lower_ops.h: adds.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "host/compiler/lower/lower_ops.h"
#include "host/compiler/lower/lowering.h"

namespace tpu::compiler::lower {

void LowerAdd(Lowering& lw, int i) {
  LoweredGraph& g = lw.graph();
  const int n = lw.n();
  const nn::Layer& l = lw.L(i);
  if (lw.bf16() && l.activation == nn::Activation::kRelu6) {
    lw.No("add '" + l.name +
          "' ends in ReLU6, which a bf16 chip's residual add does not apply (it applies ReLU "
          "or nothing; docs/bf16.md)");
    return;
  }
  if (lw.Fused(i)) return;
  GraphOp op = lw.NewOp(OpKind::kAdd, i);
  const int a = lw.TensorOf(l.inputs[0]), b = lw.TensorOf(l.inputs[1]);
  if (g.tensors[static_cast<size_t>(a)].packed || g.tensors[static_cast<size_t>(b)].packed) {
    lw.No("add '" + l.name +
          "' reads the model's input directly; the chip adds maps that an "
          "operation wrote");
    return;
  }
  const GraphTensor in = g.tensors[static_cast<size_t>(a)];
  op.inputs = {a};
  op.residual = b;
  op.residual_mul = lw.ResidualOf(l, 0);
  op.rows = in.Pixels();
  op.nt = in.T(n);
  const int id = lw.ShiftTile(0, n, 0);
  op.terms.resize(static_cast<size_t>(op.nt));
  for (int64_t j = 0; j < op.nt; ++j) op.terms[static_cast<size_t>(j)].push_back({0, false, j, id});
  op.macs = in.Pixels() * in.c;
  lw.IdentityParams(op, in.c);
  op.output = lw.NewTensor(in.h, in.w, in.c, op.residual_mul.relu);
  lw.Finish(std::move(op), i, -1, -1);
}

}  // namespace tpu::compiler::lower
