// Emitting a planned network's program (see graph_emitter.h): the schedule, segment by
// segment and group by group, over the emitter's parts in host/compiler/emit/.
#include "host/compiler/graph_emitter.h"

#include <algorithm>

#include "host/compiler/emit/acc_regions.h"
#include "host/compiler/emit/activates.h"
#include "host/compiler/emit/emit_state.h"
#include "host/compiler/emit/host_transfers.h"
#include "host/compiler/emit/param_sets.h"
#include "host/compiler/emit/pass_emitter.h"
#include "host/compiler/emit/pass_shapes.h"
#include "host/compiler/emit/unit_costs.h"
#include "host/compiler/emit/unit_spread.h"
#include "host/compiler/emit/vector_steps.h"
#include "host/compiler/emit/weight_staging.h"
#include "host/compiler/graph_bound.h"

namespace tpu::compiler {
namespace emit {
namespace {

// The program of one batch: the parts over one state, each holding what it alone changes.
class Emitter {
 public:
  Emitter(const LoweredGraph& g, const Plan& plan, const config::TpuConfig& c, int batch,
          int sharers, const CoreShare* share)
      : s_(g, plan, c, batch, share),
        shapes_(s_),
        costs_(s_, c.mxus_per_core > 1 ? BoundGraph(g, plan, c, batch) : std::vector<Bound>{}),
        acts_(s_),
        params_(s_, acts_, costs_),
        host_(s_, shapes_, costs_, acts_, params_, c.HostRowCycles() * std::max(1, sharers)),
        regions_(s_),
        pass_(s_, shapes_, costs_, acts_, params_, host_, regions_),
        spread_(s_, shapes_, costs_, acts_, params_, regions_, pass_) {}

  EmittedProgram Run();

 private:
  // Segment s: its groups in turn, each operation of the segment for the group's images.
  void Segment(int s);
  // Operation i for images [g0, g0 + count): its passes, on a core of several matrix units
  // spread over them (UnitSpread).
  void Op(int i, int64_t g0, int64_t count);
  // Segment s's one operation in bands of output rows, every tensor staged through the
  // unified buffer.
  void Banded(int s);
  // The passes of a band of `rows` accumulator rows of operation i for image `im`, through
  // the band's window w (its first pixel `first` in the staged map's walk).
  void BandPasses(int i, int64_t im, int64_t rows, const isa::WindowGeometry& w, int64_t first);

  EmitState s_;
  PassShapes shapes_;
  UnitCosts costs_;
  Activates acts_;
  ParamSets params_;
  HostTransfers host_;
  AccRegions regions_;
  PassEmitter pass_;
  UnitSpread spread_;
};

EmittedProgram Emitter::Run() {
  if (s_.c.dtype == hw::Dtype::kBf16) {
    s_.p.SetFormat(true);
    s_.Rec(-1);
    ZeroRow(s_);
  }
  params_.Begin();
  for (size_t s = 0; s < s_.plan.segments.size(); ++s) {
    s_.seg_end =
        s_.plan.segments[s].banded ? s_.plan.segments[s].first + 1 : s_.plan.segments[s].end;
    Segment(static_cast<int>(s));
  }
  acts_.Flush();
  s_.p.Halt();
  s_.Rec(-1);
  EmittedProgram out;
  out.program = s_.p.Take();
  out.op_of = std::move(s_.op_of);
  out.op_units = std::move(s_.op_units);
  return out;
}

void Emitter::Segment(int s) {
  const PlanSegment& seg = s_.plan.segments[static_cast<size_t>(s)];
  if (seg.banded) return Banded(s);
  const auto& staging = s_.plan.staging[static_cast<size_t>(s)];
  int buffer = 0;
  if (!staging.empty()) {
    params_.LoadNext(seg.first - 1);  // not behind the group's input
    host_.StageFirst(s);
  }
  for (int64_t g0 = 0; g0 < s_.b; g0 += seg.group, buffer ^= 1) {
    const int64_t count = std::min<int64_t>(seg.group, s_.b - g0);
    if (!staging.empty() && g0 + seg.group < s_.b)  // the next group's, between the matmuls
      host_.StageNext(s, g0 + seg.group, buffer ^ 1);
    s_.views.clear();
    host_.NewGroup();
    for (const Staging& st : staging)
      s_.views[st.tensor] = {st.ub[buffer], g0, s_.T(st.tensor).rows, s_.T(st.tensor).h, 0};
    for (int i = seg.first; i < seg.end; ++i) {
      Op(i, g0, count);
      host_.PiecesDone();  // what the first operation left
      const int out = s_.g.ops[static_cast<size_t>(i)].output;
      const bool sends = !s_.share || s_.share->core == 0 || out != s_.g.output;
      if (s_.plan.places[static_cast<size_t>(out)].host && sends) {  // spilled, or the output
        const View v = s_.ViewOf(out);
        if (v.by_tile > 0) {
          host_.SendTiles(i, g0, count, s_.Tiles(out));
        } else {
          host_.WriteHost(v.Row(g0), s_.HostRow(out, g0), count * s_.T(out).rows, i);
        }
      }
      if (s_.share && s_.share->split[static_cast<size_t>(i)]) host_.Exchange(i, g0, count);
    }
    host_.DrainBackground();
  }
}

void Emitter::Op(int i, int64_t g0, int64_t count) {
  s_.group0 = g0;
  const GraphOp& op = s_.g.ops[static_cast<size_t>(i)];
  if (op.kind == OpKind::kVector)
    return VectorSteps(s_, acts_, i, g0, count, 0, s_.T(op.output).rows);
  if (costs_.Spreads(i)) return spread_.Spread(i, pass_.Collect(i, g0, count));
  pass_.OpPasses(i, g0, count);
}

void Emitter::Banded(int s) {
  const PlanSegment& seg = s_.plan.segments[static_cast<size_t>(s)];
  const int i = seg.first;
  const GraphOp& op = s_.g.ops[static_cast<size_t>(i)];
  const GraphTensor& out = s_.T(op.output);
  const int64_t k = op.window.pooled ? 2 : 1;  // window rows (and columns) per output row
  int buffer = 0;
  for (int64_t im = 0; im < s_.b; ++im) {
    for (int64_t y0 = 0; y0 < out.h; y0 += seg.band, buffer ^= 1) {
      const int64_t y1 = std::min(out.h, y0 + seg.band);
      s_.views.clear();
      isa::WindowGeometry w = op.window;
      int64_t first = 0;  // the band's first window pixel in the staged map's walk
      for (const Staging& st : s_.plan.staging[static_cast<size_t>(s)]) {
        const GraphTensor& t = s_.T(st.tensor);
        s_.views[st.tensor] = {st.ub[buffer], im, 0, 0, 0};
        if (st.tensor == op.output) continue;
        int64_t row0 = y0 * t.w * s_.Tiles(st.tensor), rows = (y1 - y0) * t.w * s_.Tiles(st.tensor);
        if (st.tensor == op.inputs[0] && shapes_.Windowed(op)) {
          const int64_t sy = static_cast<int64_t>(op.window.stride_y);
          const int64_t pt = static_cast<int64_t>(op.window.pad_top);
          const int64_t kh = static_cast<int64_t>(op.window.kh);
          if (t.packed) {  // the model's packed input: the whole map (planned so)
            row0 = 0;
            rows = t.rows;
            w.in_h = static_cast<uint64_t>(t.h);
            first = y0 * out.w * k * k;
          } else {  // the lines the band's windows read, with the padding above them
            const int64_t l0 = std::max<int64_t>(0, k * y0 * sy - pt);
            const int64_t l1 = std::min<int64_t>(t.h, (k * y1 - 1) * sy - pt + kh);
            row0 = l0 * t.w * s_.Tiles(st.tensor);
            rows = (l1 - l0) * t.w * s_.Tiles(st.tensor);
            w.in_h = static_cast<uint64_t>(l1 - l0);
            w.pad_top = static_cast<uint64_t>(std::max<int64_t>(0, pt - k * y0 * sy));
            w.out_h = static_cast<uint64_t>(k * (y1 - y0));
          }
          w.in_w = static_cast<uint64_t>(t.w);
        }
        host_.ReadHost(s_.HostRow(st.tensor, im) + static_cast<uint64_t>(row0 * s_.row),
                       st.ub[buffer], rows, i);
      }
      if (op.kind == OpKind::kVector) {
        VectorSteps(s_, acts_, i, im, 1, 0, (y1 - y0) * out.w * s_.Tiles(op.output));
      } else {
        BandPasses(i, im, (y1 - y0) * out.w * k * k, w, first);
      }
      const int64_t out_rows = (y1 - y0) * out.w * s_.Tiles(op.output);
      host_.WriteHost(s_.views[op.output].ub,
                      s_.HostRow(op.output, im) +
                          static_cast<uint64_t>(y0 * out.w * s_.Tiles(op.output) * s_.row),
                      out_rows, i);
    }
  }
}

void Emitter::BandPasses(int i, int64_t im, int64_t rows, const isa::WindowGeometry& w,
                         int64_t first) {
  const GraphOp& op = s_.g.ops[static_cast<size_t>(i)];
  const int64_t most = shapes_.Most(op);
  const int64_t pieces = (rows + most - 1) / most;
  int64_t chunk = (rows + pieces - 1) / pieces;
  if (op.window.pooled) chunk = (chunk + 3) / 4 * 4;
  for (int64_t j = 0; j < op.nt; ++j)
    for (int64_t r0 = 0; r0 < rows; r0 += chunk)
      pass_.Pass(i, j, im, 1, r0, std::min(chunk, rows - r0), r0 + chunk >= rows,
                 shapes_.Windowed(op) ? &w : nullptr, first);
}

}  // namespace
}  // namespace emit

EmittedProgram EmitGraph(const LoweredGraph& graph, const Plan& plan,
                         const config::TpuConfig& config, int batch, int sharers,
                         const CoreShare* share) {
  EmittedProgram e = emit::Emitter(graph, plan, config, batch, sharers, share).Run();
  if (plan.weight_stage >= 0)
    emit::StageWeights(&e, {plan.weight_stage, config.weight_fifo_tiles, kWeightSlots},
                       config.array_dim, hw::RowBytes(config));
  return e;
}

}  // namespace tpu::compiler
