// See emit_state.h.
#include "host/compiler/emit/emit_state.h"

namespace tpu::compiler::emit {

EmitState::EmitState(const LoweredGraph& graph, const Plan& plan, const config::TpuConfig& config,
                     int batch, const CoreShare* share)
    : g(graph),
      plan(plan),
      c(config),
      n(config.array_dim),
      row(hw::RowBytes(config)),
      set_bytes(int64_t{hw::ParamRows(hw::ElementBytes(config.dtype))} * row),
      b(batch),
      half(config.acc_depth_rows / 2),
      share(share) {}

void EmitState::Rec(int op) { op_of.resize(p.program().words.size(), op); }

const GraphTensor& EmitState::T(int t) const { return g.tensors[static_cast<size_t>(t)]; }

int64_t EmitState::Tiles(int t) const { return T(t).T(n); }

int64_t EmitState::AccBase() const { return int64_t{unit} * c.acc_depth_rows; }

uint64_t EmitState::HostRow(int t, int64_t image) const {
  return plan.places[static_cast<size_t>(t)].host_addr +
         static_cast<uint64_t>(image * T(t).rows * row);
}

View EmitState::ViewOf(int t) const {
  const auto it = views.find(t);
  if (it != views.end()) return it->second;
  const TensorPlace& place = plan.places[static_cast<size_t>(t)];
  const int64_t first = place.images >= b ? 0 : group0;
  const bool by_tile = t == g.output && plan.output_by_tile;
  return {place.ub, first, T(t).rows, T(t).h, 0, by_tile ? place.images : 0};
}

void EmitState::Unit(size_t u) {
  unit = static_cast<int>(u);
  p.SetUnit(u);
}

}  // namespace tpu::compiler::emit
