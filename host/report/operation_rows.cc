// The report's rows of a model or topology run (see operation_rows.h).
#include "host/report/operation_rows.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "host/compiler/model_parallel.h"

namespace tpu::report {

using compiler::Bound;
using compiler::GraphOp;
using compiler::NetworkCompiler;

std::vector<LayerStats> OperationRows(const NetworkCompiler& network, int cores, bool split) {
  std::vector<LayerStats> rows;
  for (size_t i = 0; i < network.Graph().ops.size(); ++i) {
    LayerStats st;
    st.name = network.Graph().ops[i].name;
    if (split && network.SplitOfOne().split[i])
      st.name += fmt::format(" ({} {} cores)", kOutputChannelsSplit, cores);
    rows.push_back(st);
  }
  return rows;
}

void AddShare(const NetworkCompiler& network, int images, int core, int cores,
              const std::vector<Bound>& bounds, std::vector<LayerStats>* rows) {
  for (size_t i = 0; i < rows->size(); ++i) {
    LayerStats& l = (*rows)[i];
    const GraphOp& op = network.Graph().ops[i];
    l.macs += op.macs * images;
    if (cores > 1) {
      l.cores.resize(static_cast<size_t>(cores));
      l.cores[static_cast<size_t>(core)].macs += op.macs * images;
    }
    ++l.jobs;
    l.bound += bounds[i];
    l.m += images * (op.stacked ? 1 : op.LayerRows());
    std::tie(l.k, l.n) = network.KN(static_cast<int>(i));
  }
}

void AddSplitShare(const NetworkCompiler& network, int core, int cores,
                   const std::vector<Bound>& bounds, std::vector<LayerStats>* rows) {
  const compiler::ModelSplit& s = network.SplitOfOne();
  const compiler::LoweredGraph g = compiler::CoreGraph(network.Graph(), s.split, core, cores);
  for (size_t i = 0; i < rows->size(); ++i) {
    LayerStats& l = (*rows)[i];
    const GraphOp& op = network.Graph().ops[i];
    const int64_t macs = s.split[i] ? g.ops[i].macs : core == 0 ? op.macs : 0;
    l.macs += macs;
    l.cores.resize(static_cast<size_t>(cores));
    l.cores[static_cast<size_t>(core)].macs += macs;
    ++l.jobs;
    l.bound += bounds[i];
    if (core == 0) l.m += op.stacked ? 1 : op.LayerRows();
    std::tie(l.k, l.n) = network.KN(static_cast<int>(i));
  }
}

void CollectRows(const std::vector<compiler::LayerJob>& jobs, const config::TpuConfig& config,
                 const std::vector<engine::CycleAttribution>& attributions,
                 std::vector<LayerStats>* rows) {
  for (size_t i = 0; i < rows->size(); ++i) {
    LayerStats& l = (*rows)[i];
    l.counters = hw::ChipCounters();
    const int units = config.mxus_per_core;
    l.mxu_busy.assign(units > 1 ? static_cast<size_t>(units) : 0, 0);
    if (units > 1)
      for (const compiler::LayerJob& j : jobs)
        l.mxus = std::max(l.mxus, i < j.op_units.size() ? j.op_units[i] : 1);
    for (size_t c = 0; c < attributions.size(); ++c) {
      l.counters += attributions[c].Rows()[i];
      if (config.cores > 1) l.cores[c].counters = attributions[c].Rows()[i];
      for (size_t m = 0; m < l.mxu_busy.size(); ++m)
        l.mxu_busy[m] += attributions[c].MxuBusy()[i][m];
    }
  }
}

void AddJob(const hw::ChipCounters& counters, int64_t macs, int core, int sharers,
            LayerStats* row) {
  row->macs += macs;
  row->counters += counters;
  ++row->jobs;
  if (sharers > 1) {
    row->cores.resize(static_cast<size_t>(sharers));
    row->cores[static_cast<size_t>(core)].macs += macs;
    row->cores[static_cast<size_t>(core)].counters += counters;
  }
}

}  // namespace tpu::report
