// Simulation speed of the whole chip (tpu_top in the SystemC system, small-16): simulated
// cycles per second while it runs a tiled GEMM program whose matrix unit streams almost
// every cycle. One SystemC system per process, so one preset per binary.
#include <benchmark/benchmark.h>

#include "host/config/tpu_config.h"
#include "host/driver/gemm_program.h"
#include "host/driver/tpu_driver.h"
#include "host/gemm/gemm_runner.h"
#include "host/isa/assembler.h"

namespace tpu {

void BM_ChipGemm(benchmark::State& state) {
  static host::TpuDriver driver(host::LoadConfig("small-16"), {});
  const int dim = 16;
  const auto a = host::RandomInt8(512, 256, 1);
  const auto b = host::RandomInt8(256, 256, 2);
  const host::GemmProgram g = host::MakeGemmProgram(a, b, dim, /*overlap=*/true);
  host::ExecJob job;
  job.program = isa::Assemble(g.text, "gemm.asm");
  job.host_image = g.host;
  job.weight_image = g.weights;
  job.host_out_addr = g.out_addr;
  job.host_out_bytes = g.out_bytes;
  uint64_t cycles = 0;
  double utilization = 0;
  for (auto _ : state) {
    const host::ExecResult r = driver.Run(job);
    if (!r.ok) {
      state.SkipWithError(r.message.c_str());
      return;
    }
    if (g.Unpack(r.host_out).data != g.Expected(host::ReferenceGemm(a, b)).data) {
      state.SkipWithError("result differs from Eigen");
      return;
    }
    cycles += r.cycles;
    utilization = static_cast<double>(r.counters.macs) / (static_cast<double>(r.cycles) * dim * dim);
  }
  state.counters["cycles_per_s"] =
      benchmark::Counter(static_cast<double>(cycles), benchmark::Counter::kIsRate);
  state.counters["pe_cycles_per_s"] =
      benchmark::Counter(static_cast<double>(cycles) * dim * dim, benchmark::Counter::kIsRate);
  state.counters["utilization"] = utilization;
}
BENCHMARK(BM_ChipGemm)->Unit(benchmark::kMillisecond);

}  // namespace tpu

// The SystemC library wants sc_main; the benchmark has its own main.
extern "C" int sc_main(int, char**) { return 0; }

BENCHMARK_MAIN();
