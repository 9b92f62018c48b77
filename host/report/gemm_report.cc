// Text and JSON reports of a GEMM run (see gemm_report.h).
#include "host/report/gemm_report.h"

#include <fmt/format.h>

#include "arith/bf16.h"
#include "host/common/revision.h"
#include "host/common/text.h"

namespace tpu::report {
namespace {

double Percent(uint64_t part, uint64_t total) {
  return total == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(total);
}

}  // namespace

GemmFigures ComputeFigures(const gemm::GemmRunResult& r, const config::TpuConfig& config) {
  GemmFigures f;
  const double cycles = static_cast<double>(r.counters.cycles);
  const double dim = r.plan.array_dim;
  f.ops_per_cycle = cycles > 0 ? 2.0 * static_cast<double>(r.plan.UsefulMacs()) / cycles : 0;
  f.peak_ops_per_cycle = 2.0 * dim * dim;
  f.utilization = f.ops_per_cycle / f.peak_ops_per_cycle;
  f.mapping_efficiency =
      static_cast<double>(r.plan.UsefulMacs()) / static_cast<double>(r.plan.IssuedMacs());
  f.time_us = cycles / config.clock_mhz;
  f.sim_cycles_per_second = r.wall_seconds > 0 ? cycles / r.wall_seconds : 0;
  return f;
}

std::string FormatGemmReport(const gemm::GemmRunResult& r, const config::TpuConfig& config) {
  const GemmFigures f = ComputeFigures(r, config);
  const auto& s = r.plan.shape;
  const auto& c = r.counters;
  const int n = r.plan.array_dim;
  std::string out;
  out +=
      fmt::format("tpusim gemm: C[{} x {}] = A[{} x {}] x B[{} x {}] on a {} x {} array ({}, {})\n",
                  s.m, s.n, s.m, s.k, s.k, s.n, n, n, config.name,
                  r.bf16 ? "bf16 x bf16 -> float32" : "int8 x int8 -> int32");
  const char* reference = r.bf16 ? "the bf16 reference in the array's order (docs/bf16.md)"
                                 : "the Eigen int32 reference";
  if (r.matches_reference) {
    out += fmt::format("  result        bit-exact with {}\n", reference);
  } else {
    const auto& m = r.first_mismatch;
    const auto value = [&](int32_t v) {
      return r.bf16 ? fmt::format("{} (0x{:08x})", arith::FloatOfBits(static_cast<uint32_t>(v)),
                                  static_cast<uint32_t>(v))
                    : std::to_string(v);
    };
    out += fmt::format(
        "  result        MISMATCH: {} of {} values differ from {}; first at C[{}][{}]: "
        "{} {} vs reference {}\n",
        r.mismatches, s.m * s.n, reference, m.row, m.col, r.engine, value(m.got), value(m.want));
  }
  out += fmt::format(
      "  tiles         {} = {} M-chunk(s) x {} N-tile(s) x {} K-fold(s), {} row(s) per tile\n",
      r.plan.tiles, r.plan.m_chunks, r.plan.n_tiles, r.plan.k_tiles, r.plan.m_chunk);
  out += fmt::format("  cycles        {:>12}   counted by the RTL; docs/mxu.md formula: {}\n",
                     Grouped(c.cycles), Grouped(r.predicted.total));
  const auto row = [&](const char* name, uint64_t v, const char* what) {
    out += fmt::format("    {:<11} {:>12} {:>6.1f} %  {}\n", name, Grouped(v), Percent(v, c.cycles),
                       what);
  };
  row("stream", c.stream_cycles, "an activation row entered the array");
  row("weight load", c.load_cycles,
      "only weights moved (first tile, or tiles shorter than N rows)");
  row("stall", c.stall_cycles, "a row waited for weights");
  row("drain", c.drain_cycles, "last results crossing the array and read out");
  if (c.idle_cycles) row("idle", c.idle_cycles, "nothing to do");
  out += fmt::format(
      "  MACs          {:>12}   useful (M*K*N); {} issued, mapping efficiency {:.1f} %\n",
      Grouped(r.plan.UsefulMacs()), Grouped(r.plan.IssuedMacs()), 100.0 * f.mapping_efficiency);
  out +=
      fmt::format("  ops/cycle     {:>12.2f}   peak {:.0f} (2 x {} x {}), utilization {:.1f} %\n",
                  f.ops_per_cycle, f.peak_ops_per_cycle, n, n, 100.0 * f.utilization);
  out += fmt::format("  traffic       {} weight rows, {} accumulator writes, {} reads\n",
                     Grouped(c.weight_rows), Grouped(c.acc_writes), Grouped(c.acc_reads));
  out += fmt::format("  time          {:.3f} us at {:.0f} MHz\n", f.time_us, config.clock_mhz);
  out += fmt::format("  simulation    {:.3f} s wall, {:.3g} cycles/s ({} engine), revision {}\n",
                     r.wall_seconds, f.sim_cycles_per_second, r.engine, kGitRevision);
  return out;
}

nlohmann::json GemmReportJson(const gemm::GemmRunResult& r, const config::TpuConfig& config) {
  const GemmFigures f = ComputeFigures(r, config);
  const auto& c = r.counters;
  nlohmann::json j;
  j["tool"] = "tpusim gemm";
  j["revision"] = kGitRevision;
  j["config"] = config.ToJson();
  j["engine"] = r.engine;
  j["m"] = r.plan.shape.m;
  j["k"] = r.plan.shape.k;
  j["n"] = r.plan.shape.n;
  j["array_dim"] = r.plan.array_dim;
  j["dtype"] = r.bf16 ? "bf16" : "int8";
  j["matches_reference"] = r.matches_reference;
  j["mismatches"] = r.mismatches;
  j["cycles"] = c.cycles;
  j["predicted_cycles"] = r.predicted.total;
  j["cycle_breakdown"] = {{"stream", c.stream_cycles},
                          {"load", c.load_cycles},
                          {"stall", c.stall_cycles},
                          {"drain", c.drain_cycles},
                          {"idle", c.idle_cycles}};
  j["tiles"] = {{"total", r.plan.tiles},
                {"m_chunks", r.plan.m_chunks},
                {"n_tiles", r.plan.n_tiles},
                {"k_tiles", r.plan.k_tiles},
                {"rows_per_tile", r.plan.m_chunk}};
  j["macs"] = r.plan.UsefulMacs();
  j["macs_issued"] = r.plan.IssuedMacs();
  j["ops_per_cycle"] = f.ops_per_cycle;
  j["peak_ops_per_cycle"] = f.peak_ops_per_cycle;
  j["utilization"] = f.utilization;
  j["mapping_efficiency"] = f.mapping_efficiency;
  j["time_us"] = f.time_us;
  j["counters"] = {{"weight_rows", c.weight_rows},
                   {"tiles", c.tiles},
                   {"acc_writes", c.acc_writes},
                   {"acc_reads", c.acc_reads}};
  j["wall_seconds"] = r.wall_seconds;
  j["sim_cycles_per_second"] = f.sim_cycles_per_second;
  return j;
}

}  // namespace tpu::report
