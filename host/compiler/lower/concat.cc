// See lower_ops.h: concatenations.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "host/compiler/lower/lower_ops.h"
#include "host/compiler/lower/lowering.h"

namespace tpu::compiler::lower {

void LowerConcat(Lowering& lw, int i) {
  LoweredGraph& g = lw.graph();
  const int n = lw.n();
  const nn::Layer& l = lw.L(i);
  GraphOp op = lw.NewOp(OpKind::kConcat, i);
  const GraphTensor& first = g.tensors[static_cast<size_t>(lw.TensorOf(l.inputs[0]))];
  op.rows = first.Pixels();
  op.nt = (l.out.c + n - 1) / n;
  op.terms.resize(static_cast<size_t>(op.nt));
  std::vector<arith::Int8Format::Channel> channels(static_cast<size_t>(l.out.c));
  bool nonneg = true;
  int64_t c0 = 0;
  for (size_t k = 0; k < l.inputs.size(); ++k) {
    const int t = lw.TensorOf(l.inputs[k]);
    const GraphTensor in = g.tensors[static_cast<size_t>(t)];
    if (in.packed) {
      lw.No("concat '" + l.name + "' reads the model's input directly");
      return;
    }
    nonneg = nonneg && in.nonnegative;
    op.inputs.push_back(t);
    for (int64_t ch = 0; ch < in.c && !lw.bf16(); ++ch)  // (bf16: IdentityParams)
      channels[static_cast<size_t>(c0 + ch)] = {0, l.q.multiplier[k], l.q.shift[k]};
    // Input tile s holds channels c0 + s*N .. of the output; it lands in output tiles
    // (c0 + s*N) / N and the next.
    for (int64_t s = 0; s < in.T(n); ++s) {
      const int64_t lo = c0 + s * n, hi = c0 + std::min<int64_t>((s + 1) * n, in.c);
      for (int64_t j = lo / n; j <= (hi - 1) / n; ++j) {
        const int64_t a = std::max(lo, j * n) - lo, b = std::min(hi, (j + 1) * n) - lo;
        // Lane r of input tile s is output channel lo + r, lane lo + r - j*N of tile j.
        op.terms[static_cast<size_t>(j)].push_back(
            {static_cast<int>(k), false, s, lw.ShiftTile(a, b, j * n - lo)});
      }
    }
    c0 += in.c;
  }
  op.macs = op.rows * l.out.c;
  if (lw.bf16())
    lw.IdentityParams(op, l.out.c);
  else
    lw.Params<arith::Int8Format>(op, channels);
  op.output = lw.NewTensor(first.h, first.w, l.out.c, nonneg);
  lw.Finish(std::move(op), i, -1, -1);
}

}  // namespace tpu::compiler::lower
