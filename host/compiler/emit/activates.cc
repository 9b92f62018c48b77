// See activates.h.
#include "host/compiler/emit/activates.h"

#include <algorithm>

namespace tpu::compiler::emit {

void Activates::Touch(const Range& reads, const Range& writes, const Range& acc, int64_t set) {
  Flush(Touched(reads, writes, acc, set));
}

size_t Activates::Touched(const Range& reads, const Range& writes, const Range& acc,
                          int64_t set) const {
  size_t upto = 0;
  for (size_t k = 0; k < pending_.size(); ++k) {
    const Act& a = pending_[k];
    if (a.writes.Overlaps(reads) || a.writes.Overlaps(writes) || a.reads.Overlaps(writes) ||
        a.acc_rows.Overlaps(acc) || static_cast<int64_t>(a.set) == set)
      upto = k + 1;
  }
  return upto;
}

void Activates::Flush(size_t upto) {
  upto = std::min(upto, pending_.size());
  for (size_t k = 0; k < upto; ++k) {
    const Act& a = pending_[k];
    if (a.residual) s_.p.SetResidual(*a.residual);
    s_.p.SetUnit(static_cast<uint64_t>(a.mxu));
    s_.p.Activate(a.acc, a.ub, a.rows, a.set, a.relu, a.pool, a.stride, a.residual.has_value(),
                  a.fn);
    s_.Rec(a.op);
    vpu_due_ = static_cast<int64_t>(a.rows) + (k > 0 ? vpu_due_ : 0);
    vpu_since_ = 0;
    after_acts_ = 0;
  }
  s_.p.SetUnit(static_cast<uint64_t>(s_.unit));
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(upto));
}

void Activates::QueueActivate(int i, int64_t j, int64_t i0, int64_t count, int64_t r0, int64_t rows,
                              uint64_t acc, uint64_t slot) {
  const GraphOp& op = s_.g.ops[static_cast<size_t>(i)];
  const int64_t tiles = s_.Tiles(op.output), pooled = op.window.pooled ? 4 : 1;
  const int64_t outs = count * rows / pooled, o0 = r0 / pooled;
  const View out = s_.ViewOf(op.output);
  Act a;
  a.op = i;
  a.acc = acc;
  a.ub = static_cast<uint64_t>(out.At(i0, op.tile0 + j) + o0 * tiles);
  a.rows = static_cast<uint64_t>(count * rows);
  a.set = slot;
  a.stride = static_cast<uint64_t>(out.by_tile > 0 ? 1 : tiles);
  a.relu = op.relu;
  a.fn = op.fn;
  a.pool = op.pool;
  a.acc_rows = {s_.AccBase() + static_cast<int64_t>(acc),
                s_.AccBase() + static_cast<int64_t>(acc) + count * rows};
  a.mxu = s_.unit;
  a.writes = {static_cast<int64_t>(a.ub),
              static_cast<int64_t>(a.ub) + (outs - 1) * static_cast<int64_t>(a.stride) + 1};
  if (op.residual >= 0) {
    isa::Residual r = op.residual_mul;
    r.ub = static_cast<uint64_t>(s_.ViewOf(op.residual).Row(i0) + o0 * tiles + op.tile0 + j);
    a.residual = r;
    a.reads = {static_cast<int64_t>(r.ub), static_cast<int64_t>(r.ub) + (outs - 1) * tiles + 1};
  }
  pending_.push_back(a);
}

void Activates::FlushUnsplit() {
  size_t upto = 0;
  while (upto < pending_.size() && !pending_[upto].split) ++upto;
  Flush(std::max<size_t>(upto, 1));
}

}  // namespace tpu::compiler::emit
