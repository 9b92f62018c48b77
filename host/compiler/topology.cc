// Running topology files' layers on the chip (see topology.h).
#include "host/compiler/topology.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "host/common/errors.h"
#include "host/compiler/gemm_program.h"
#include "host/gemm/gemm_runner.h"

namespace tpu::compiler {

TpuRunResult RunTopologyOnTpu(const std::vector<TopologyLayer>& layers, engine::ChipEngine& engine,
                              uint64_t seed, const std::function<void(double)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  const config::TpuConfig& c = engine.Config();
  const int64_t n = c.array_dim;
  const bool values = engine.ComputesValues();
  TpuRunResult result;
  result.images = 1;
  result.checked = values;
  std::mt19937_64 rng(seed);
  double total_macs = 0, done_macs = 0;
  for (const auto& l : layers) {
    const gemm::GemmShape g = l.Gemm();
    total_macs += static_cast<double>(g.m) * static_cast<double>(g.k) * static_cast<double>(g.n);
  }
  for (const TopologyLayer& l : layers) {
    const gemm::GemmShape g = l.Gemm();
    const int64_t kt = (g.k + n - 1) / n, nt_all = (g.n + n - 1) / n;
    // Output columns in groups of at most param_sets tiles (one VPU parameter set each).
    const int64_t ntg = std::min<int64_t>(nt_all, c.param_sets);
    // Rows in chunks: two accumulator buffers of mc rows; A's kt blocks and the outputs'
    // ntg blocks of mc rows in the unified buffer.
    const int64_t mc = std::min({g.m, static_cast<int64_t>(c.acc_depth_rows) / 2,
                                 static_cast<int64_t>(c.ub_depth_rows) / (kt + ntg)});
    if (mc < 1) {
      throw UsageError(fmt::format(
          "layer '{}' (K = {}, {} column tiles) does not fit the chip: one row needs {} "
          "unified-buffer rows and 2 accumulator rows; raise ub_depth_rows (now {}) or "
          "acc_depth_rows (now {})",
          l.name, g.k, nt_all, kt + ntg, c.ub_depth_rows, c.acc_depth_rows));
    }
    LayerStats stats;
    stats.name = l.name;
    stats.macs = g.m * g.k * g.n;
    bool exact = true;
    const Matrix<int8_t> a = gemm::RandomInt8(g.m, g.k, rng());
    const Matrix<int8_t> b = gemm::RandomInt8(g.k, g.n, rng());
    for (int64_t col0 = 0; col0 < g.n; col0 += ntg * n) {
      const int64_t cols = std::min(ntg * n, g.n - col0);
      Matrix<int8_t> bg{g.k, cols, std::vector<int8_t>(static_cast<size_t>(g.k * cols))};
      for (int64_t p = 0; p < g.k; ++p) {
        std::copy_n(b.data.begin() + p * g.n + col0, cols, bg.data.begin() + p * cols);
      }
      for (int64_t row0 = 0; row0 < g.m; row0 += mc) {
        const int64_t rows = std::min(mc, g.m - row0);
        Matrix<int8_t> ac{
            rows, g.k,
            std::vector<int8_t>(a.data.begin() + row0 * g.k, a.data.begin() + (row0 + rows) * g.k)};
        GemmProgram prog = MakeGemmProgram(ac, bg, static_cast<int>(n), /*overlap=*/true, rng());
        prog.job.name = l.name;
        const engine::ExecResult r = engine.Run(prog.job);
        if (!r.ok) {
          throw RuntimeError(fmt::format("layer '{}' stopped on the chip: {}", l.name, r.message));
        }
        stats.counters += r.counters;
        ++stats.jobs;
        if (values &&
            prog.Unpack(r.host_out).data != prog.Expected(gemm::ReferenceGemm(ac, bg)).data) {
          exact = false;
        }
        done_macs += static_cast<double>(rows * g.k * cols);
        if (progress) progress(total_macs > 0 ? done_macs / total_macs : 1.0);
      }
    }
    result.mismatches += !exact;
    result.layers.push_back(std::move(stats));
  }
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace tpu::compiler
