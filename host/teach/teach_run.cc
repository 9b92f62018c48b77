// Recording a GEMM on a teaching model (see teach.h).
#include <memory>
#include <optional>
#include <stdexcept>

#include "host/common/errors.h"
#include "host/gemm/gemm_runner.h"
#include "host/teach/teach.h"
#include "sim/teach_registry.h"

namespace tpu::teach {

TeachRun RecordTeachRun(const Matrix<int8_t>& a, const Matrix<int8_t>& b, int dim) {
  std::unique_ptr<sim::MxuEngine> engine;
  try {
    engine = sim::MakeTeachEngine(dim);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  TeachRun run;
  run.dim = dim;
  run.a = a;
  run.b = b;
  const int acc_depth = engine->Params().acc_depth;
  run.plan = gemm::PlanGemm({a.rows, a.cols, b.cols}, dim, acc_depth);

  std::optional<sim::MxuProbe> probe;  // the model exists only while it runs
  uint64_t rows_in = 0, tiles = 0, results = 0;
  sim::RunOptions options;
  options.on_cycle = [&](uint64_t cycle) {
    if (!probe) probe.emplace(dim);
    TeachCycle t;
    t.cycle = cycle;
    t.state = probe->Sample();
    rows_in += t.state.a_fire;
    // The switch bit enters with the first row of a tile.
    tiles += t.state.a_fire && !t.state.switch_in.empty() && t.state.switch_in[0];
    results += t.state.out_valid;
    t.rows_in = rows_in;
    t.tiles = tiles;
    t.results_out = results;
    run.cycles.push_back(std::move(t));
  };
  const gemm::GemmRunResult r = gemm::RunGemm(run.plan, a, b, *engine, options);
  run.c = r.c;
  run.matches_reference = r.matches_reference;
  run.predicted = r.predicted;
  run.counters = r.counters;
  return run;
}

}  // namespace tpu::teach
