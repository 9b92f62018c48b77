// See vector_steps.h.
#include "host/compiler/emit/vector_steps.h"

#include <algorithm>

namespace tpu::compiler::emit {

namespace {

constexpr int64_t kMaxLength = static_cast<int64_t>(isa::ProgramBuilder::kMaxLength);

// One step's `vector` over `rows` rows from row `r` of image `image` (rows of an image one
// after another, the output's too unless it lies tile by tile: then `rows` is 1).
void Step(EmitState& s, Activates& acts, int i, const VectorStep& st, int64_t image, int64_t r,
          int64_t rows) {
  const GraphOp& op = s.g.ops[static_cast<size_t>(i)];
  const auto row = [&](int t) {
    if (t == VectorStep::kZeros) return s.plan.zero_row;
    const int tensor = t == VectorStep::kOutput ? op.output : t;
    const View v = s.ViewOf(tensor);
    return v.by_tile > 0 ? v.At(image, r) : v.Row(image) + r;
  };
  const bool bcast = st.b == VectorStep::kZeros;
  isa::VectorOperands v;
  v.op = st.op;
  v.a = static_cast<uint64_t>(row(st.a));
  v.b = static_cast<uint64_t>(row(st.b));
  v.out = static_cast<uint64_t>(row(VectorStep::kOutput));
  v.rows = static_cast<uint64_t>(rows);
  v.bcast = bcast;
  const auto span = [&](uint64_t from, int64_t n) {
    return Range{static_cast<int64_t>(from), static_cast<int64_t>(from) + n};
  };
  acts.Touch(span(v.a, rows), span(v.out, rows));
  acts.Touch(span(v.b, bcast ? 1 : rows), span(v.out, rows));
  s.p.Vector(v);
  s.Rec(i);
}

// Whether the rows of consecutive images lie one after another in tensor t's view.
bool Contiguous(const EmitState& s, int t) {
  const View v = s.ViewOf(t);
  return v.by_tile == 0 && v.pitch == s.T(t).rows;
}

}  // namespace

void ZeroRow(EmitState& s) {
  if (s.plan.zero_row < 0) return;
  isa::VectorOperands v;
  v.op = hw::VectorOp::kLess;
  v.a = v.b = v.out = static_cast<uint64_t>(s.plan.zero_row);
  v.rows = 1;
  s.p.Vector(v);
  s.Rec(-1);
}

void VectorSteps(EmitState& s, Activates& acts, int i, int64_t i0, int64_t count, int64_t row0,
                 int64_t rows) {
  const GraphOp& op = s.g.ops[static_cast<size_t>(i)];
  const bool by_tile = s.ViewOf(op.output).by_tile > 0;
  bool whole = row0 == 0 && rows == s.T(op.output).rows && Contiguous(s, op.output);
  for (int t : op.inputs) whole = whole && Contiguous(s, t);
  const bool together = !by_tile && (count == 1 || whole);
  for (const VectorStep& st : op.steps) {
    if (together) {
      const int64_t all = count * rows;
      for (int64_t r = 0; r < all; r += kMaxLength)
        Step(s, acts, i, st, i0, row0 + r, std::min(kMaxLength, all - r));
      continue;
    }
    for (int64_t im = i0; im < i0 + count; ++im) {
      const int64_t piece = by_tile ? 1 : kMaxLength;
      for (int64_t r = 0; r < rows; r += piece)
        Step(s, acts, i, st, im, row0 + r, std::min(piece, rows - r));
    }
  }
}

}  // namespace tpu::compiler::emit
