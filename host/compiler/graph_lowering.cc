// Lowering a model graph to chip operations (see graph_lowering.h; the lowering itself is
// in host/compiler/lower/).
#include "host/compiler/graph_lowering.h"

#include "host/compiler/lower/lowering.h"

namespace tpu::compiler {

std::vector<int64_t> TileRuns(const std::vector<std::vector<OpTerm>>& columns) {
  std::vector<int64_t> runs;
  int prev = -1;
  for (const std::vector<OpTerm>& column : columns) {
    for (const OpTerm& t : column) {
      if (t.tile != prev || runs.empty()) runs.push_back(0);
      ++runs.back();
      prev = t.tile;
    }
  }
  return runs;
}

LoweredGraph LowerGraph(const nn::Model& model, int n, hw::Dtype dtype) {
  LoweredGraph g = lower::Lowering(model, n, dtype).Run();
  g.n = n;
  return g;
}

bool UsesVectorUnit(const LoweredGraph& graph) {
  for (const GraphOp& op : graph.ops)
    if (op.kind == OpKind::kVector) return true;
  return false;
}

}  // namespace tpu::compiler
