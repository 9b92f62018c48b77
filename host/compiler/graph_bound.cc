// The attainable bound of a planned network (see graph_bound.h).
#include "host/compiler/graph_bound.h"

#include <algorithm>

#include "contract/tpu_contract.h"

namespace tpu::compiler {

double Bound::Cycles() const { return std::max({array, weights, host, vector}); }

std::string Bound::Binds() const {
  const double c = Cycles();
  if (c == array) return "array";
  if (c == weights) return "weights";
  if (c == host) return "host link";
  return "vector unit";
}

Bound& Bound::operator+=(const Bound& o) {
  array += o.array;
  weights += o.weights;
  host += o.host;
  vector += o.vector;
  return *this;
}

std::vector<Bound> BoundGraph(const LoweredGraph& g, const Plan& plan, const config::TpuConfig& c,
                              int batch) {
  const auto n = static_cast<double>(c.array_dim);
  const double tile_cycles =
      n * static_cast<double>((c.array_dim + c.weight_mem_bytes_per_cycle - 1) /
                              c.weight_mem_bytes_per_cycle);
  const double row_cycles = static_cast<double>((c.array_dim + c.host_mem_bytes_per_cycle - 1) /
                                                c.host_mem_bytes_per_cycle);
  std::vector<int64_t> group(g.ops.size(), batch);
  for (const PlanSegment& s : plan.segments)
    for (int i = s.first; i < s.end; ++i) group[static_cast<size_t>(i)] = s.banded ? 1 : s.group;
  std::vector<Bound> out;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const GraphOp& op = g.ops[i];
    // Runs of terms through one tile: a tile loads once per run (consecutive terms of one
    // tile, as an average pooling's or an identity's, keep it in the array).
    std::vector<int64_t> runs;
    int prev = -1;
    for (const auto& ts : op.terms) {
      for (const OpTerm& t : ts) {
        if (t.tile != prev || runs.empty()) runs.push_back(0);
        ++runs.back();
        prev = t.tile;
      }
    }
    Bound b;
    const int64_t rows = op.stacked ? 1 : op.rows;
    for (int64_t i0 = 0; i0 < batch; i0 += group[i]) {
      const int64_t images = std::min<int64_t>(group[i], batch - i0);
      for (const int64_t terms : runs)
        b.array += std::max(static_cast<double>(terms * images * rows), n);
      b.weights += static_cast<double>(runs.size()) * tile_cycles;
    }
    b.vector = static_cast<double>(batch * rows * op.nt);
    int64_t host_rows = op.nt * hw::kParamRows;  // its parameter sets
    for (int t : op.inputs)
      if (t == 0 && !plan.maps.input) host_rows += batch * g.tensors[0].rows;
    if (op.output == g.output && !plan.maps.output) {
      host_rows += batch * g.tensors[static_cast<size_t>(op.output)].rows;
    }
    b.host = static_cast<double>(host_rows) * row_cycles;
    out.push_back(b);
  }
  return out;
}

}  // namespace tpu::compiler
