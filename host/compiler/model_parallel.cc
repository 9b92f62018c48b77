// Model parallel: one image on several cores (see model_parallel.h).
#include "host/compiler/model_parallel.h"

#include <algorithm>

#include "contract/tpu_contract.h"

namespace tpu::compiler {
namespace {

// The host DMA's cycles per write_host beyond a cycle per row: `tpusim exec` of 196 one-row
// write_host instructions on tpu-v3 with a link of 957 B/cycle takes 787 cycles (4 each).
constexpr double kWriteStart = 3;

// Whether operation i can split: a convolution or dense layer of at least a tile per core,
// whose output map stays in the unified buffer and is not the model's output, outside a
// banded segment.
bool Splittable(const LoweredGraph& g, const Plan& plan, int i, int cores) {
  const GraphOp& op = g.ops[static_cast<size_t>(i)];
  if ((op.kind != OpKind::kConv && op.kind != OpKind::kDense) || op.nt < cores ||
      op.output == g.output || plan.places[static_cast<size_t>(op.output)].host)
    return false;
  for (const PlanSegment& s : plan.segments)
    if (s.banded && i >= s.first && i < s.end) return false;
  return true;
}

}  // namespace

bool ModelSplit::Any() const { return std::find(split.begin(), split.end(), true) != split.end(); }

std::pair<int64_t, int64_t> CoreTiles(int64_t nt, int core, int cores) {
  const int64_t first = nt * core / cores;
  return {first, nt * (core + 1) / cores - first};
}

LoweredGraph CoreGraph(const LoweredGraph& g, const std::vector<bool>& split, int core, int cores) {
  LoweredGraph out = g;
  for (size_t i = 0; i < out.ops.size(); ++i) {
    if (i >= split.size() || !split[i]) continue;
    GraphOp& op = out.ops[i];
    const auto [first, count] = CoreTiles(op.nt, core, cores);
    const int64_t channels = g.tensors[static_cast<size_t>(op.output)].c;
    const int64_t mine = std::min<int64_t>(channels, (first + count) * g.n) - first * g.n;
    op.terms.assign(op.terms.begin() + first, op.terms.begin() + first + count);
    op.first_param += static_cast<int>(first);
    op.tile0 = first;
    op.nt = count;
    op.macs = op.macs / channels * mine;
  }
  return out;
}

double ExchangeCycles(const LoweredGraph& g, int op, const config::TpuConfig& c) {
  const GraphOp& o = g.ops[static_cast<size_t>(op)];
  const GraphTensor& t = g.tensors[static_cast<size_t>(o.output)];
  const double rows = static_cast<double>(t.rows), link = c.HostRowCycles();
  const double share = static_cast<double>(CoreTiles(o.nt, c.cores - 1, c.cores).second);
  const double drain =
      static_cast<double>(std::min<int64_t>(o.rows, c.acc_depth_rows / 2) + c.array_dim);
  const double writes =
      std::max(static_cast<double>(t.Pixels()) * (share + kWriteStart), rows * link);
  const double reads = c.cores * rows * link + static_cast<double>(c.host_mem_latency_cycles);
  return drain + writes + reads;
}

ModelSplit ChooseModelSplit(const LoweredGraph& g, const Plan& plan, const config::TpuConfig& c) {
  ModelSplit s;
  s.cores = c.cores;
  s.split.assign(g.ops.size(), false);
  if (c.cores < 2 || !plan.why_not.empty()) return s;
  std::vector<bool> can(g.ops.size(), false);
  for (size_t i = 0; i < g.ops.size(); ++i)
    can[i] = Splittable(g, plan, static_cast<int>(i), c.cores);
  const std::vector<Bound> one = BoundGraph(g, plan, c, 1);
  std::vector<double> shared(g.ops.size(), 0);
  for (int core = 0; core < c.cores; ++core) {
    const std::vector<Bound> b = BoundGraph(CoreGraph(g, can, core, c.cores), plan, c, 1);
    for (size_t i = 0; i < b.size(); ++i) shared[i] = std::max(shared[i], b[i].Cycles());
  }
  double host = 0;  // the one-core program's host-link cycles, which each core repeats
  for (size_t i = 0; i < g.ops.size(); ++i) {
    host += one[i].Host();
    if (!can[i]) continue;
    const double split = shared[i] + ExchangeCycles(g, static_cast<int>(i), c);
    if (split >= one[i].Cycles()) continue;
    s.split[i] = true;
    s.one_core += one[i].Cycles();
    s.shared += split;
  }
  if (s.one_core - s.shared <= (c.cores - 1) * host) {
    s.split.assign(g.ops.size(), false);
    s.one_core = s.shared = 0;
  }
  return s;
}

}  // namespace tpu::compiler
