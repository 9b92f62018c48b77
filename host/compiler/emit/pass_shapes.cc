// See pass_shapes.h.
#include "host/compiler/emit/pass_shapes.h"

#include <algorithm>

namespace tpu::compiler::emit {

namespace {

constexpr int64_t kWindowSize = hw::kOpdSetWindowInH.Max();  // map lines a window holds

}  // namespace

int PassShapes::Regions(const GraphOp& op) const {
  for (const auto& ts : op.terms)
    for (const OpTerm& t : ts)
      if (t.tile != ts.front().tile) return 2;
  return 3;
}

bool PassShapes::ShortPass(const GraphOp& op, int64_t rows) const {
  return Regions(op) == 3 && rows < 2 * s_.n;
}

NextRead PassShapes::NextReads(int i) const {
  if (i + 1 >= s_.seg_end) return NextRead::kNot;
  const GraphOp& next = s_.g.ops[static_cast<size_t>(i + 1)];
  if (next.kind == OpKind::kVector) return NextRead::kNot;  // the vector unit's, not a pass
  const OpTerm& t = next.terms.front().front();
  if (next.stacked ||
      next.inputs[static_cast<size_t>(t.input)] != s_.g.ops[static_cast<size_t>(i)].output)
    return NextRead::kNot;
  if (!t.window) return NextRead::kInPlace;
  return next.tall ? NextRead::kNot : NextRead::kImageByImage;
}

std::vector<int64_t> PassShapes::Runs(int64_t count, int64_t rows, bool alone) const {
  const int64_t need = (2 * s_.n + rows - 1) / rows, after = count - (alone ? 1 : 0);
  if (after < (alone ? need : 2 * need)) return {count};  // no second run of 2N rows
  std::vector<int64_t> runs;
  if (alone) runs.push_back(1);
  for (int64_t rest = after; rest > 0;) {
    const int64_t run = rest - need < need ? rest : need;
    runs.push_back(run);
    rest -= run;
  }
  return runs;
}

int64_t PassShapes::Most(const GraphOp& op) const {
  const int64_t size = 2 * s_.half / Regions(op);
  return op.window.pooled ? size - size % 4 : size;
}

isa::WindowGeometry PassShapes::Window(const GraphOp& op, const View& v, int64_t stack,
                                       int64_t pad_top, int64_t out_h) const {
  const GraphTensor& in = s_.T(op.inputs[0]);
  isa::WindowGeometry w = op.window;
  w.in_h = static_cast<uint64_t>(stack * v.lines);
  w.in_w = static_cast<uint64_t>(in.w);
  w.pad_top = static_cast<uint64_t>(pad_top);
  if (op.stacked) {  // one window per image: the images' maps on top of each other
    w.stride_y = static_cast<uint64_t>(in.h);
    w.out_h = static_cast<uint64_t>(stack);
  } else {
    w.out_h = static_cast<uint64_t>(stack * out_h);
  }
  return w;
}

int64_t PassShapes::Stack(const GraphOp& op, int64_t count) const {
  if (op.stacked) return count;
  const int64_t lines = s_.T(op.inputs[0]).h;
  return op.tall && count * lines <= kWindowSize ? count : 1;
}

isa::WindowGeometry PassShapes::CutWindow(const isa::WindowGeometry& w, int64_t last) const {
  isa::WindowGeometry cut = w;
  const auto y = static_cast<uint64_t>(last) / w.out_w;
  cut.out_h = y + 1;
  cut.in_h = std::min<uint64_t>(w.in_h, y * w.stride_y + w.kh - w.pad_top);
  return cut;
}

bool PassShapes::Windowed(const GraphOp& op) const {
  return op.kind == OpKind::kConv || op.kind == OpKind::kMaxPool;
}

NextRead PassShapes::HandsOn(int i, const std::vector<PassSpec>& g) const {
  if (s_.g.ops[static_cast<size_t>(i)].stacked) return NextRead::kNot;
  for (const PassSpec& ps : g)
    if (ps.r0 != 0 || ps.count < 2) return NextRead::kNot;
  return NextReads(i);
}

bool PassShapes::Aligned(const std::vector<OpTerm>& a, const std::vector<OpTerm>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (a[k].window != b[k].window || a[k].input != b[k].input) return false;
  return true;
}

bool PassShapes::LineUp(const GraphOp& op) {
  return std::all_of(op.terms.begin(), op.terms.end(),
                     [&](const std::vector<OpTerm>& t) { return Aligned(t, op.terms[0]); });
}

std::vector<int> PassShapes::Switches(const GraphOp& op, const PassSpec& ps, int active) const {
  std::vector<int> tiles;
  for (const OpTerm& t : op.terms[static_cast<size_t>(ps.j)]) {
    if (t.tile != active) tiles.push_back(t.tile);
    active = t.tile;
  }
  return tiles;
}

}  // namespace tpu::compiler::emit
