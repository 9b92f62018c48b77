// See lower_ops.h: max pooling.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "host/compiler/lower/lower_ops.h"
#include "host/compiler/lower/lowering.h"

namespace tpu::compiler::lower {

void LowerMaxPool2d(Lowering& lw, int i) {
  if (lw.Fused(i)) return;
  LoweredGraph& g = lw.graph();
  const int n = lw.n();
  const nn::Layer& l = lw.L(i);
  const int in_t = lw.TensorOf(l.inputs[0]);
  const GraphTensor in = g.tensors[static_cast<size_t>(in_t)];
  GraphOp op = lw.NewOp(OpKind::kMaxPool, i);
  op.inputs = {in_t};
  op.acc = isa::Acc::kMax;
  if (in.packed) {
    lw.No("max pooling '" + l.name +
          "' reads the model's input directly; the chip pools maps "
          "that an operation wrote");
    return;
  }
  const int64_t t = in.T(n);
  op.rows = int64_t{l.out.h} * l.out.w;
  op.nt = t;
  lw.SetWindow(&op, in, l.pool_h, l.pool_w, l.pool_stride, l.pad_top, l.pad_left, l.out.h, l.out.w,
               in.pixel_bytes);
  op.window.pad_min = l.Padded() && !in.nonnegative;
  const int id = lw.ShiftTile(0, n, 0);
  op.terms.resize(static_cast<size_t>(t));
  for (int64_t j = 0; j < t; ++j)
    for (int64_t tap = 0; tap < int64_t{l.pool_h} * l.pool_w; ++tap)
      op.terms[static_cast<size_t>(j)].push_back({0, true, tap * t + j, id});
  op.macs = op.rows * l.out.c * l.pool_h * l.pool_w;
  lw.IdentityParams(op, l.out.c);
  op.output = lw.NewTensor(l.out.h, l.out.w, l.out.c, in.nonnegative);
  lw.Finish(std::move(op), i, -1, -1);
}

}  // namespace tpu::compiler::lower
