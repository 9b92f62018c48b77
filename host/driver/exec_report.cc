// Reports of `tpusim exec` (see exec_report.h).
#include "host/driver/exec_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "host/common/revision.h"
#include "host/common/text.h"

namespace tpu::host {
namespace {

double Pct(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

std::string FormatExecReport(const ExecResult& r, const TpuConfig& config,
                             const std::string& program_name, size_t instructions) {
  const uint64_t cycles = r.cycles;
  const uint64_t macs = r.Counter("macs");
  const double peak = 2.0 * config.array_dim * config.array_dim;
  const double ops = cycles ? 2.0 * static_cast<double>(macs) / static_cast<double>(cycles) : 0;
  std::string s;
  s += fmt::format("program   {} ({} instructions) on {} ({} x {}, {} MHz)\n", program_name,
                   instructions, config.name, config.array_dim, config.array_dim,
                   config.clock_mhz);
  s += fmt::format("status    {} (chip status: {}), {} instructions issued\n", r.state,
                   r.chip_status, Grouped(static_cast<int64_t>(r.Counter("instructions"))));
  if (!r.message.empty()) s += fmt::format("          {}\n", r.message);
  s += fmt::format("cycles    {} = {:.2f} us at {} MHz\n", Grouped(static_cast<int64_t>(cycles)),
                   static_cast<double>(cycles) / config.clock_mhz, config.clock_mhz);
  s += fmt::format("matrix    {} MACs, {:.1f} ops/cycle of {:.0f} peak ({:.1f}% utilization)\n",
                   Grouped(static_cast<int64_t>(macs)), ops, peak, 100.0 * ops / peak);
  auto line = [&](const char* title, std::initializer_list<const char*> names, bool pct) {
    std::string l = fmt::format("{:<10}", title);
    for (const char* n : names) {
      const uint64_t v = r.Counter(n);
      l += pct ? fmt::format("{} {} ({:.0f}%)  ", n, Grouped(static_cast<int64_t>(v)),
                             Pct(v, cycles))
               : fmt::format("{} {}  ", n, Grouped(static_cast<int64_t>(v)));
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    s += l + "\n";
  };
  line("busy", {"busy_host_dma", "busy_weight_dma", "busy_matrix", "busy_activate"}, true);
  line("mxu", {"mxu_stream_cycles", "mxu_load_cycles", "mxu_stall_weights", "mxu_drain_cycles",
               "mxu_idle_cycles"},
       true);
  line("issue", {"issue_wait_instruction", "issue_stall_unit_busy", "issue_stall_ub_hazard",
                 "issue_stall_acc_hazard", "issue_stall_param_hazard", "issue_stall_drain"},
       false);
  line("stalls", {"weight_dma_stall_fifo_full", "host_mem_stall", "weight_mem_stall"}, false);
  line("on-chip", {"ub_reads", "ub_writes", "acc_reads", "acc_writes", "weight_fifo_pushes",
                   "weight_fifo_pops", "weight_tiles", "param_writes", "vpu_rows_in",
                   "vpu_rows_out"},
       false);
  line("off-chip", {"host_bytes_read", "host_bytes_written", "weight_bytes_read"}, false);
  return s;
}

nlohmann::json ExecReportJson(const ExecResult& r, const TpuConfig& config,
                              const std::string& program_name, size_t instructions) {
  nlohmann::json counters = nlohmann::json::object();
  for (const auto& [k, v] : r.counters) counters[k] = v;
  const double peak = 2.0 * config.array_dim * config.array_dim;
  const double ops = r.cycles ? 2.0 * static_cast<double>(r.Counter("macs")) /
                                    static_cast<double>(r.cycles)
                              : 0.0;
  nlohmann::json j = {{"program", program_name},
                      {"instructions", instructions},
                      {"status", r.state},
                      {"ok", r.ok},
                      {"chip_status", r.chip_status},
                      {"message", r.message},
                      {"cycles", r.cycles},
                      {"time_us", static_cast<double>(r.cycles) / config.clock_mhz},
                      {"macs", r.Counter("macs")},
                      {"ops_per_cycle", ops},
                      {"peak_ops_per_cycle", peak},
                      {"utilization", ops / peak},
                      {"counters", counters},
                      {"config", config.ToJson()},
                      {"revision", kGitRevision}};
  if (r.chip_status != "ok") j["error_pc"] = r.error_pc;
  return j;
}

}  // namespace tpu::host
