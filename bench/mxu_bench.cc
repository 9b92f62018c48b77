// Simulation speed of the matrix subsystem: simulated cycles per second and PE-cycles per
// second (cycles x N x N) on one core, for several array sizes, while the array streams a
// large GEMM (every cycle a row enters; the steady state). BM_MxuStream runs the Verilated
// RTL in both array forms (Vtpu_mxu_bench_nN: per-PE; Vtpu_mxu_bench_compact_nN: compact),
// BM_MxuStreamFast the fast engine's matrix subsystem on the same work; the Bf16 ones the
// same in bfloat16 (docs/bf16.md): the rtl engine's bf16 models (TPUSIM_BF16_ARRAY_DIMS) and
// the fast engine.
#include <benchmark/benchmark.h>

#include "fast/fast_mxu_engine.h"
#include "host/gemm/gemm_runner.h"
#include "host/gemm/gemm_workload.h"
#include "sim/mxu/mxu_registry.h"
#include "sim/mxu/verilated_mxu_engine.h"

namespace tpu {

// T: int8_t, or uint16_t for bfloat16.
template <class T = int8_t>
void Stream(benchmark::State& state, sim::MxuEngine& engine) {
  const int dim = static_cast<int>(state.range(0));
  // 1024 rows per tile, 4 x 4 tiles: weight loads hide behind streaming and the run
  // (about 16,000 cycles) dwarfs building and resetting the model.
  const gemm::GemmPlan plan = gemm::PlanGemm({1024, 4 * dim, 4 * dim}, dim, 1024);
  const auto a = gemm::RandomOperand<T>(plan.shape.m, plan.shape.k, 1);
  const auto b = gemm::RandomOperand<T>(plan.shape.k, plan.shape.n, 2);
  Matrix<int32_t> c;
  gemm::GemmWorkloadOf<T> workload(plan, a, b, &c);
  uint64_t cycles = 0;
  for (auto _ : state) {
    cycles += engine.Run(workload, {}).counters.cycles;
  }
  const Matrix<int32_t> want = gemm::ReferenceGemm(a, b, dim);
  if (c.data != want.data) {
    state.SkipWithError("result differs from the reference");
  }
  state.counters["cycles_per_s"] =
      benchmark::Counter(static_cast<double>(cycles), benchmark::Counter::kIsRate);
  state.counters["pe_cycles_per_s"] =
      benchmark::Counter(static_cast<double>(cycles) * dim * dim, benchmark::Counter::kIsRate);
}

void BM_MxuStreamBf16(benchmark::State& state) {
  auto engine =
      sim::MakeMxuEngine(static_cast<int>(state.range(0)), sim::EngineKind::kVerilator, 16);
  Stream<uint16_t>(state, *engine);
}
BENCHMARK(BM_MxuStreamBf16)->Arg(16)->Arg(128)->Unit(benchmark::kMillisecond);

void BM_MxuStreamFastBf16(benchmark::State& state) {
  fast::FastMxuEngine engine(static_cast<int>(state.range(0)), 1024, 16);
  Stream<uint16_t>(state, engine);
}
BENCHMARK(BM_MxuStreamFastBf16)->Arg(16)->Arg(128)->Unit(benchmark::kMillisecond);

template <class Model>
void BM_MxuStream(benchmark::State& state) {
  sim::VerilatedMxuEngine<Model> engine;
  Stream(state, engine);
}

void BM_MxuStreamFast(benchmark::State& state) {
  fast::FastMxuEngine engine(static_cast<int>(state.range(0)), 1024);
  Stream(state, engine);
}
BENCHMARK(BM_MxuStreamFast)->Arg(4)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);

}  // namespace tpu

#include "bench/mxu_bench_models.h"

#define TPUSIM_REGISTER(n, Model) \
  BENCHMARK_TEMPLATE(BM_MxuStream, Model)->Arg(n)->Unit(benchmark::kMillisecond);
using tpu::BM_MxuStream;
TPUSIM_BENCH_MODELS(TPUSIM_REGISTER)

BENCHMARK_MAIN();
