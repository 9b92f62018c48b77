// Simulation speed of the whole chip: simulated cycles (and PE-cycles, cycles x N^2) per
// second of wall time while it runs a tiled GEMM program whose matrix unit streams almost
// every cycle, on each engine behind the ChipEngine seam:
//   BM_ChipGemm/rtl/16         the Verilated RTL in the SystemC system (small-16)
//   BM_ChipGemm/fast/16        the fast engine on the same job (same cycles)
//   BM_ChipGemm/fast/256       the fast engine at TPU v1's size, values on
//   BM_ChipGemm/timing/256     the same, timing only
//   BM_ChipGemmBf16/fast/128   the fast engine on tpu-v2 (bfloat16, 128 x 128), values on
//   BM_ChipGemmCores/timing/256/cores:C/by_columns:0|1  the timing/256 GEMM split over C
//                              cores by rows or by columns (their scaling)
// Every run's int8 result is checked against Eigen (outside the timed region for the
// first run only). The RTL benchmark is the only SystemC system of the process. Each program
// is compiled and loaded once (B's tiles and the parameters stay in the chip's memories); an
// iteration writes A and runs. Rates are per second of wall time (UseRealTime): the fast
// engine computes the values on a second thread (fast/value_worker.h), which the main
// thread's CPU time would leave out.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>

#include "arith/bf16.h"
#include "host/compiler/gemm_program.h"
#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"
#include "host/engine/engine_factory.h"
#include "host/gemm/gemm_runner.h"

namespace tpu {
namespace {

struct Setup {
  config::TpuConfig config;
  Matrix<int8_t> a, b;
  compiler::GemmProgram g;
};

// small-16 runs a 512 x 256 by 256 x 256 product (256 tiles); tpu-v1 a 2048 x 1024 by
// 1024 x 1024 one (16 tiles of 2048 rows), with a host link of 256 B/cycle so that the
// matrix unit, not the input DMA, sets the pace.
Setup MakeSetup(int dim) {
  Setup s;
  if (dim == 16) {
    s.config = config::LoadConfig("small-16");
    s.a = gemm::RandomInt8(512, 256, 1);
    s.b = gemm::RandomInt8(256, 256, 2);
  } else {
    s.config = config::LoadConfig("tpu-v1");
    config::ApplyOverride(&s.config, "host_mem_bytes_per_cycle=256");
    s.a = gemm::RandomInt8(2048, 1024, 1);
    s.b = gemm::RandomInt8(1024, 1024, 2);
  }
  s.g = compiler::MakeGemmProgram(s.a.rows, s.b, s.config);
  return s;
}

void BM_ChipGemm(benchmark::State& state, engine::EngineKind kind, int dim, bool timing_only) {
  const Setup s = MakeSetup(dim);
  engine::EngineOptions o;
  o.timing_only = timing_only;
  // The rtl engine: one SystemC system per process, kept for every repetition and never
  // destroyed (the SystemC kernel outlives main).
  static engine::ChipEngine* rtl = nullptr;
  std::unique_ptr<engine::ChipEngine> fast;
  engine::ChipEngine* chip;
  if (kind == engine::EngineKind::kRtl) {
    if (!rtl) rtl = engine::MakeChipEngine(kind, s.config, o).release();
    chip = rtl;
  } else {
    fast = engine::MakeChipEngine(kind, s.config, o);
    chip = fast.get();
  }
  const std::vector<int8_t> want = s.g.Expected(gemm::ReferenceGemm(s.a, s.b)).data;
  uint64_t cycles = 0;
  double utilization = 0;
  chip->Load(s.g.exe);  // compiled and loaded once; each run writes A (packed once) and runs
  const std::vector<uint8_t> a = s.g.PackA(s.a);
  for (auto _ : state) {
    chip->Write("inputs", a);
    const engine::ExecResult r = chip->Run();
    if (!r.ok) {
      state.SkipWithError(r.message.c_str());
      return;
    }
    state.PauseTiming();
    if (!timing_only && s.g.Unpack(chip->Read("outputs")).data != want) {
      state.SkipWithError("result differs from Eigen");
      return;
    }
    state.ResumeTiming();
    cycles += r.cycles;
    utilization =
        static_cast<double>(r.counters.macs) / (static_cast<double>(r.cycles) * dim * dim);
  }
  state.counters["cycles_per_s"] =
      benchmark::Counter(static_cast<double>(cycles), benchmark::Counter::kIsRate);
  state.counters["pe_cycles_per_s"] =
      benchmark::Counter(static_cast<double>(cycles) * dim * dim, benchmark::Counter::kIsRate);
  state.counters["utilization"] = utilization;
  state.counters["chip_cycles"] =
      static_cast<double>(cycles) / static_cast<double>(state.iterations());
}

// tpu-v2 runs a 1024 x 1024 by 1024 x 1024 bf16 product (64 tiles of 1024 rows), with a
// host link of 512 B/cycle so that the matrix unit, not the input DMA, sets the pace; the
// result is checked against arith::Bf16Gemm and the vector unit's rounding (first run only).
void BM_ChipGemmBf16(benchmark::State& state) {
  config::TpuConfig c = config::LoadConfig("tpu-v2");
  config::ApplyOverride(&c, "host_mem_bytes_per_cycle=512");
  const int dim = c.array_dim;
  const Matrix<uint16_t> a = gemm::RandomBf16(1024, 1024, 1), b = gemm::RandomBf16(1024, 1024, 2);
  const auto g = compiler::MakeGemmProgram(a.rows, b, c);
  const auto chip = engine::MakeChipEngine(engine::EngineKind::kFast, c, {});
  const Matrix<uint16_t> want = g.Expected(gemm::ReferenceGemm(a, b, dim));
  uint64_t cycles = 0;
  bool checked = false;
  chip->Load(g.exe);
  for (auto _ : state) {
    const compiler::GemmRun<uint16_t> run = g.Run(*chip, a);
    const engine::ExecResult& r = run.result;
    if (!r.ok) {
      state.SkipWithError(r.message.c_str());
      return;
    }
    cycles += r.cycles;
    if (!checked) {
      state.PauseTiming();
      checked = true;
      if (run.c.data != want.data) {
        state.SkipWithError("result differs from the bf16 reference");
        return;
      }
      state.ResumeTiming();
    }
  }
  state.counters["cycles_per_s"] =
      benchmark::Counter(static_cast<double>(cycles), benchmark::Counter::kIsRate);
  state.counters["pe_cycles_per_s"] =
      benchmark::Counter(static_cast<double>(cycles) * dim * dim, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ChipGemmBf16)
    ->Name("BM_ChipGemmBf16/fast/128")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The tpu-v1 GEMM of BM_ChipGemm/timing/256 split by rows or by columns over C cores (config
// `cores`, compiler::MakeGemmOnCores), timing only: the chip's cycles, its utilization of C x N^2
// and the cycles its cores waited for weight memory show how the cores scale and why
// (docs/performance.md, "Several cores").
void BM_ChipGemmCores(benchmark::State& state) {
  const int cores = static_cast<int>(state.range(0));
  const auto split = state.range(1) ? compiler::CoreSplit::kColumns : compiler::CoreSplit::kRows;
  Setup s = MakeSetup(256);
  s.config.cores = cores;
  const compiler::GemmOnCores g = compiler::MakeGemmOnCores(s.a.rows, s.b, s.config, split);
  engine::EngineOptions o;
  o.timing_only = true;
  const auto chip = engine::MakeChipEngine(engine::EngineKind::kFast, s.config, o);
  engine::ExecResult r;
  chip->Load(g.exe);
  for (auto _ : state) {
    r = g.Run(*chip, s.a).result;
    if (!r.ok) {
      state.SkipWithError(r.message.c_str());
      return;
    }
  }
  const double c = static_cast<double>(r.cycles);
  state.counters["chip_cycles"] = c;
  state.counters["utilization"] = static_cast<double>(r.counters.macs) / (c * 256 * 256 * cores);
  state.counters["weight_mem_stall_per_core"] =
      static_cast<double>(r.counters.weight_mem_stall) / cores / c;
}
BENCHMARK(BM_ChipGemmCores)
    ->Name("BM_ChipGemmCores/timing/256")
    ->ArgNames({"cores", "by_columns"})
    ->ArgsProduct({{1, 2, 4}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK_CAPTURE(BM_ChipGemm, rtl / 16, engine::EngineKind::kRtl, 16, false)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ChipGemm, fast / 16, engine::EngineKind::kFast, 16, false)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ChipGemm, fast / 256, engine::EngineKind::kFast, 256, false)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ChipGemm, timing / 256, engine::EngineKind::kFast, 256, true)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tpu

// The SystemC library wants sc_main; the benchmark has its own main.
extern "C" int sc_main(int, char**) { return 0; }

BENCHMARK_MAIN();
