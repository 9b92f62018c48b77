// The attainable bound of a planned network (see graph_bound.h).
#include "host/compiler/graph_bound.h"

#include <algorithm>

#include "contract/tpu_contract.h"

namespace tpu::compiler {

double Bound::Host() const { return host + hbm_dma + (network ? staged_host : 0.0); }

double Bound::Cycles() const {
  return std::max({array, weights, Host(), activation, vector_unit, network ? pipeline : 0.0});
}

std::string Bound::Binds() const {
  const double c = Cycles();
  if (c == array) return "array";
  if (c == weights) return "weights";
  if (network && c == pipeline) return "array+weights";
  if (c == Host()) return hbm_dma > 0 ? "host DMA" : "host link";
  if (c == activation) return "activation unit";
  return "vector unit";
}

Bound& Bound::operator+=(const Bound& o) {
  array += o.array;
  weights += o.weights;
  host += o.host;
  staged_host += o.staged_host;
  hbm_dma += o.hbm_dma;
  activation += o.activation;
  vector_unit += o.vector_unit;
  pipeline += o.pipeline;
  return *this;
}

std::vector<double> WeightPipeline(const std::vector<TileRun>& runs, size_t ops, double load,
                                   double n, int fifo) {
  std::vector<double> share(ops, 0.0);
  std::vector<double> start(runs.size(), 0.0);  // S_i
  double arrived = 0, end = 0;                  // D_{i-1}, S_{i-1} + R_{i-1}
  for (size_t i = 0; i < runs.size(); ++i) {
    arrived += load;
    if (i > static_cast<size_t>(fifo)) arrived = std::max(arrived, start[i - fifo - 1]);
    start[i] = arrived;
    if (i > 0) start[i] = std::max(start[i], start[i - 1] + std::max(runs[i - 1].rows, n));
    const double now = start[i] + runs[i].rows;
    share[static_cast<size_t>(runs[i].op)] += now - end;
    end = now;
  }
  return share;
}

namespace {

// Every run of the batch's program in the order the emitter makes them: segment by
// segment, group by group, operation by operation (an operation outside every segment
// takes the whole batch at once).
std::vector<TileRun> ProgramRuns(const LoweredGraph& g, const Plan& plan, int batch) {
  std::vector<std::vector<int64_t>> op_runs;  // each operation's, computed once
  for (const GraphOp& op : g.ops) op_runs.push_back(TileRuns(op.terms));
  std::vector<TileRun> out;
  const auto add = [&](int first, int end, int64_t group) {
    for (int64_t i0 = 0; i0 < batch; i0 += group) {
      const int64_t images = std::min<int64_t>(group, batch - i0);
      for (int i = first; i < end; ++i) {
        const GraphOp& op = g.ops[static_cast<size_t>(i)];
        const int64_t rows = op.stacked ? 1 : op.rows;
        for (const int64_t terms : op_runs[static_cast<size_t>(i)])
          out.push_back({static_cast<double>(terms * images * rows), i});
      }
    }
  };
  int next = 0;
  for (const PlanSegment& s : plan.segments) {
    for (; next < s.first; ++next) add(next, next + 1, batch);
    add(s.first, s.end, s.banded ? 1 : s.group);
    next = s.end;
  }
  for (; next < static_cast<int>(g.ops.size()); ++next) add(next, next + 1, batch);
  return out;
}

// The images of the model's input operation i reads while the group before computes
// (graph_emitter.cc stages each next group's input between the group's matmuls): every
// group's but the first, where its segment runs in several.
int64_t StagedImages(const Plan& plan, int i, int batch) {
  for (const PlanSegment& seg : plan.segments)
    if (i >= seg.first && i < seg.end && !seg.banded && seg.group < batch) return batch - seg.group;
  return 0;
}

}  // namespace

std::vector<Bound> BoundGraph(const LoweredGraph& g, const Plan& plan, const config::TpuConfig& c,
                              int batch) {
  const auto n = static_cast<double>(c.array_dim);
  const auto units = static_cast<double>(c.mxus_per_core);
  const double tile_cycles = n * c.CoreWeightRowCycles();
  // read_hbm: the core's one host DMA, a row a cycle at most, whatever its units
  const double hbm_tile_cycles = n * std::max(1.0, c.CoreWeightRowCycles());
  const double row_cycles = c.HostRowCycles();
  const std::vector<TileRun> runs = ProgramRuns(g, plan, batch);
  std::vector<Bound> out(g.ops.size());
  for (const TileRun& run : runs) {
    Bound& b = out[static_cast<size_t>(run.op)];
    b.array += std::max(run.rows, n) / units;  // M matrix units stream M rows a cycle
    b.weights += tile_cycles;
    if (plan.weight_stage >= 0) b.hbm_dma += hbm_tile_cycles;
  }
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const GraphOp& op = g.ops[i];
    Bound& b = out[i];
    const int64_t rows = op.stacked ? 1 : op.rows;
    b.activation = static_cast<double>(batch * rows * op.nt);
    if (op.kind == OpKind::kVector) {  // each step: every row of the batch, S a cycle
      const int64_t all = batch * g.tensors[static_cast<size_t>(op.output)].rows;
      b.vector_unit =
          static_cast<double>(static_cast<int64_t>(op.steps.size()) * c.VectorGroups(all));
    }
    int64_t host_rows = op.nt * hw::ParamRows(hw::ElementBytes(c.dtype));  // its sets
    const int64_t staged = StagedImages(plan, static_cast<int>(i), batch);
    for (int t : op.inputs) {
      if (t != 0 || plan.maps.input) continue;
      host_rows += (batch - staged) * g.tensors[0].rows;
      b.staged_host += static_cast<double>(staged * g.tensors[0].rows) * row_cycles;
    }
    if (op.output == g.output && !plan.maps.output) {
      host_rows += batch * g.tensors[static_cast<size_t>(op.output)].rows;
    }
    b.host = static_cast<double>(host_rows) * row_cycles;
  }
  // The weight pipeline's recurrence is one array's; a core of several matrix units is held
  // to the other terms (each a bound for it too).
  if (c.mxus_per_core > 1) return out;
  const std::vector<double> share =
      WeightPipeline(runs, g.ops.size(), tile_cycles, n, c.weight_fifo_tiles);
  for (size_t i = 0; i < out.size(); ++i) out[i].pipeline = share[i];
  return out;
}

}  // namespace tpu::compiler
