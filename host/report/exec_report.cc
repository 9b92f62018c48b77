// Reports of `tpusim exec` (see exec_report.h).
#include "host/report/exec_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "host/common/revision.h"
#include "host/common/text.h"

namespace tpu::report {
namespace {

double Pct(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

nlohmann::json CountersJson(const hw::ChipCounters& c) {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < hw::kNumCounters; ++i) j[hw::kCounterNames[static_cast<size_t>(i)]] = c[i];
  return j;
}

std::string FormatExecReport(const engine::ExecResult& r, const config::TpuConfig& config,
                             const std::string& program_name, size_t instructions,
                             const ProgramBound* bound) {
  const uint64_t cycles = r.cycles;
  const uint64_t macs = r.counters.macs;
  const double peak =
      2.0 * config.array_dim * config.array_dim * config.mxus_per_core * config.cores;
  const double ops = cycles ? 2.0 * static_cast<double>(macs) / static_cast<double>(cycles) : 0;
  std::string s;
  s +=
      fmt::format("program   {} ({} instructions) on {} ({}, {} MHz), {} engine\n", program_name,
                  instructions, config.name, config::ShapeText(config), config.clock_mhz, r.engine);
  s += fmt::format("status    {} (chip status: {}), {} instructions issued\n", Name(r.state),
                   hw::Name(r.chip_status), Grouped(static_cast<int64_t>(r.counters.instructions)));
  if (!r.message.empty()) s += fmt::format("          {}\n", r.message);
  s += fmt::format("cycles    {} = {:.2f} us at {} MHz\n", Grouped(static_cast<int64_t>(cycles)),
                   static_cast<double>(cycles) / config.clock_mhz, config.clock_mhz);
  s += fmt::format("matrix    {} MACs, {:.1f} ops/cycle of {:.0f} peak ({:.1f}% utilization)\n",
                   Grouped(static_cast<int64_t>(macs)), ops, peak, 100.0 * ops / peak);
  if (bound != nullptr && r.ok && bound->Cycles() > 0) {
    s += fmt::format("bound     {}; the run {:.2f} x it\n", bound->Text(),
                     static_cast<double>(cycles) / bound->Cycles());
  }
  // Each core's end, on a chip of several cores (the counters below are their sums).
  for (size_t c = 0; c < r.cores.size(); ++c) {
    const engine::CoreResult& k = r.cores[c];
    s += fmt::format(
        "core {:<5}{} (chip status: {}), ended in cycle {}; instructions {}, MACs {}\n", c,
        Name(k.state), hw::Name(k.chip_status), Grouped(static_cast<int64_t>(k.cycles)),
        Grouped(static_cast<int64_t>(k.counters.instructions)),
        Grouped(static_cast<int64_t>(k.counters.macs)));
  }
  // One line per counter group of the contract; cycle counts also as a share of cycles (of
  // all cores' cycles on a chip of several cores).
  const uint64_t core_cycles = cycles * static_cast<uint64_t>(std::max<size_t>(1, r.cores.size()));
  for (const char* group : {"busy", "mxu", "issue", "stalls", "on-chip", "off-chip"}) {
    const bool pct = std::string(group) == "busy" || std::string(group) == "mxu";
    std::string l = fmt::format("{:<10}", group);
    for (int i = 0; i < hw::kNumCounters; ++i) {
      if (std::string(hw::kCounterGroups[static_cast<size_t>(i)]) != group) continue;
      const uint64_t v = r.counters[i];
      const char* name = hw::kCounterNames[static_cast<size_t>(i)];
      l += pct ? fmt::format("{} {} ({:.0f}%)  ", name, Grouped(static_cast<int64_t>(v)),
                             Pct(v, core_cycles))
               : fmt::format("{} {}  ", name, Grouped(static_cast<int64_t>(v)));
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    s += l + "\n";
  }
  return s;
}

nlohmann::json ExecReportJson(const engine::ExecResult& r, const config::TpuConfig& config,
                              const std::string& program_name, size_t instructions,
                              const ProgramBound* bound) {
  const double peak =
      2.0 * config.array_dim * config.array_dim * config.mxus_per_core * config.cores;
  const double ops =
      r.cycles ? 2.0 * static_cast<double>(r.counters.macs) / static_cast<double>(r.cycles) : 0.0;
  nlohmann::json j = {{"program", program_name},
                      {"engine", r.engine},
                      {"instructions", instructions},
                      {"status", Name(r.state)},
                      {"ok", r.ok},
                      {"chip_status", hw::Name(r.chip_status)},
                      {"message", r.message},
                      {"cycles", r.cycles},
                      {"time_us", static_cast<double>(r.cycles) / config.clock_mhz},
                      {"macs", r.counters.macs},
                      {"ops_per_cycle", ops},
                      {"peak_ops_per_cycle", peak},
                      {"utilization", ops / peak},
                      {"counters", CountersJson(r.counters)},
                      {"config", config.ToJson()},
                      {"revision", kGitRevision}};
  if (r.chip_status != hw::Status::kOk) j["error_pc"] = r.error_pc;
  if (bound != nullptr && r.ok) j["bound"] = bound->ToJson();
  for (const engine::CoreResult& c : r.cores) {
    nlohmann::json core = {{"status", Name(c.state)},
                           {"chip_status", hw::Name(c.chip_status)},
                           {"cycles", c.cycles},
                           {"counters", CountersJson(c.counters)}};
    if (c.chip_status != hw::Status::kOk) core["error_pc"] = c.error_pc;
    j["cores"].push_back(std::move(core));
  }
  return j;
}

}  // namespace tpu::report
