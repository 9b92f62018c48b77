// Reports of a model run on the chip (see run_report.h).
#include "host/report/run_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "host/common/revision.h"
#include "host/common/text.h"

namespace tpu::report {
namespace {

nlohmann::json StallsJson(const hw::ChipCounters& c) {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < hw::kNumCounters; ++i) {
    if (hw::kCounterIsStall[static_cast<size_t>(i)])
      j[hw::kCounterNames[static_cast<size_t>(i)]] = c[i];
  }
  return j;
}

nlohmann::json ComponentsJson(const EnergyBreakdown& e) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : e.components) j[k] = v;
  return j;
}

}  // namespace

double RunRow::OpsPerCycle() const {
  return counters.cycles ? 2.0 * static_cast<double>(macs) / static_cast<double>(counters.cycles)
                         : 0.0;
}

double RunRow::MappingEfficiency() const {
  return counters.macs ? static_cast<double>(macs) / static_cast<double>(counters.macs) : 0.0;
}

double RunReport::Accuracy() const {
  return images ? static_cast<double>(correct) / static_cast<double>(images) : 0.0;
}

double RunReport::UsPerImage() const {
  return static_cast<double>(total.counters.cycles) / config.clock_mhz /
         static_cast<double>(images);
}

RunReport BuildRunReport(const compiler::TpuRunResult& r, const std::string& model,
                         const std::string& engine, const config::TpuConfig& config,
                         const EnergyTable& table, int batch) {
  RunReport rep;
  rep.model = model;
  rep.engine = engine;
  rep.config = config;
  rep.table = table;
  rep.images = r.images;
  rep.plan = r.plan;
  rep.batch = batch;
  rep.checked = r.checked;
  rep.correct = r.correct;
  rep.mismatches = r.mismatches;
  rep.wall_seconds = r.wall_seconds;
  rep.total.name = "total";
  for (const compiler::LayerStats& l : r.layers) {
    RunRow row;
    row.name = l.name;
    row.macs = l.macs;
    row.counters = l.counters;
    row.energy = ComputeEnergy(l.counters, config, table);
    rep.total.macs += row.macs;
    rep.total.counters += row.counters;
    rep.layers.push_back(row);
  }
  // The total's energy is the sum of the layers', component by component.
  if (!rep.layers.empty()) {
    rep.total.energy.components = rep.layers.front().energy.components;
    for (auto& [k, v] : rep.total.energy.components) v = 0;
    for (const RunRow& row : rep.layers) {
      for (size_t i = 0; i < row.energy.components.size(); ++i) {
        rep.total.energy.components[i].second += row.energy.components[i].second;
      }
    }
  }
  return rep;
}

nlohmann::json RunReportJson(const RunReport& r) {
  const double images = static_cast<double>(r.images);
  const double peak = r.Peak();
  nlohmann::json layers = nlohmann::json::array();
  for (const RunRow& row : r.layers) {
    layers.push_back({{"name", row.name},
                      {"macs", row.macs},
                      {"cycles", row.Cycles()},
                      {"ops_per_cycle", row.OpsPerCycle()},
                      {"utilization", row.OpsPerCycle() / peak},
                      {"mapping_efficiency", row.MappingEfficiency()},
                      {"mxu_stream_cycles", row.counters.mxu_stream_cycles},
                      {"mxu_not_streaming_cycles", row.NotStreaming()},
                      {"stall_cycles", StallsJson(row.counters)},
                      {"ub_accesses", row.UbAccesses()},
                      {"acc_accesses", row.AccAccesses()},
                      {"dram_bytes", row.DramBytes()},
                      {"energy_pj", row.energy.Total()},
                      {"energy_components_pj", ComponentsJson(row.energy)}});
  }
  const RunRow& t = r.total;
  nlohmann::json j = {
      {"model", r.model},
      {"engine", r.engine},
      {"images", r.images},
      {"batch", r.batch},
      {"plan", r.plan},
      {"checked", r.checked},
      {"cycles", t.Cycles()},
      {"macs", t.macs},
      {"mapping_efficiency", t.MappingEfficiency()},
      {"mxu_stream_cycles_per_image", static_cast<double>(t.counters.mxu_stream_cycles) / images},
      {"stall_cycles", StallsJson(t.counters)},
      {"ops_per_cycle", t.OpsPerCycle()},
      {"utilization", t.OpsPerCycle() / peak},
      {"us_per_image", r.UsPerImage()},
      {"images_per_second", 1e6 / r.UsPerImage()},
      {"energy_pj", t.energy.Total()},
      {"energy_per_image_pj", t.energy.Total() / images},
      {"energy_components_pj", ComponentsJson(t.energy)},
      {"tops_per_watt", 2.0 * static_cast<double>(t.macs) / t.energy.Total()},
      {"energy_table", r.table.ToJson()},
      {"layers", layers},
      {"config", r.config.ToJson()},
      {"wall_seconds", r.wall_seconds},
      {"revision", kGitRevision}};
  j["topology"] = r.topology;
  if (r.checked && !r.topology) {
    j["accuracy"] = r.Accuracy();
    j["bit_exact"] = r.mismatches == 0;
    j["mismatches"] = r.mismatches;
  } else if (r.checked) {
    j["accuracy"] = nullptr;
    j["bit_exact"] = r.mismatches == 0;
    j["mismatches"] = r.mismatches;
  } else {
    j["accuracy"] = nullptr;
    j["bit_exact"] = nullptr;
    j["mismatches"] = nullptr;
  }
  return j;
}

std::string FormatRunText(const RunReport& r) {
  const double images = static_cast<double>(r.images);
  const double peak = r.Peak();
  std::string s =
      r.topology
          ? fmt::format("tpusim run: {} ({} layers, batch 1) on {} ({} x {}, {} MHz), {} engine\n",
                        r.model, r.layers.size(), r.config.name, r.config.array_dim,
                        r.config.array_dim, r.config.clock_mhz, r.engine)
          : fmt::format(
                "tpusim run: {} on {} ({} x {}, {} MHz), {} engine, {} test images in batches "
                "of {}\n",
                r.model, r.config.name, r.config.array_dim, r.config.array_dim, r.config.clock_mhz,
                r.engine, r.images, r.batch);
  if (!r.plan.empty()) s += "  plan       " + r.plan + "\n";
  if (r.topology && r.checked) {
    s += fmt::format(
        "  bit-exact  {} (every layer's int8 outputs, random data, against the CPU reference; "
        "{} layers differ)\n",
        r.mismatches == 0 ? "yes" : "NO", r.mismatches);
  } else if (r.checked) {
    s += fmt::format("  accuracy   {:.2f} % ({} of {})\n", 100 * r.Accuracy(), r.correct, r.images);
    s += fmt::format(
        "  bit-exact  {} (int8 logits of every image against the CPU int8 "
        "reference; {} differ)\n",
        r.mismatches == 0 ? "yes" : "NO", r.mismatches);
  } else {
    s += "  values     not computed (--timing-only): cycles, traffic and energy only\n";
  }
  s += fmt::format("  per image     {:>10}{:>10}{:>9}{:>7}{:>7}{:>10}{:>10}{:>10}{:>11}{:>11}\n",
                   "MACs", "cycles", "ops/cyc", "util", "map", "MXU idle", "UB rd+wr", "acc rd+wr",
                   "DRAM B", "energy nJ");
  auto line = [&](const RunRow& row) {
    auto per = [&](double v) { return Grouped(static_cast<int64_t>(v / images + 0.5)); };
    s += fmt::format(
        "  {:<14}{:>10}{:>10}{:>9.1f}{:>6.1f}%{:>6.0f}%{:>10}{:>10}{:>10}{:>11}{:>11.1f}\n",
        row.name, per(static_cast<double>(row.macs)), per(static_cast<double>(row.Cycles())),
        row.OpsPerCycle(), 100 * row.OpsPerCycle() / peak, 100 * row.MappingEfficiency(),
        per(static_cast<double>(row.NotStreaming())), per(static_cast<double>(row.UbAccesses())),
        per(static_cast<double>(row.AccAccesses())), per(static_cast<double>(row.DramBytes())),
        row.energy.Total() / images / 1000);
  };
  for (const RunRow& row : r.layers) line(row);
  line(r.total);
  std::string waits;
  for (int i = 0; i < hw::kNumCounters; ++i) {
    const uint64_t v = r.total.counters[i];
    if (hw::kCounterIsStall[static_cast<size_t>(i)] && v > 0) {
      waits += fmt::format("{} {}  ", hw::kCounterNames[static_cast<size_t>(i)],
                           Grouped(static_cast<int64_t>(static_cast<double>(v) / images + 0.5)));
    }
  }
  s += "  stalls     per image (counters of docs/architecture.md): " + waits + "\n";
  std::string parts;
  for (const auto& [k, v] : r.total.energy.components) {
    parts += fmt::format("{} {:.1f}  ", k, v / images / 1000);
  }
  s += fmt::format("  energy     {:.1f} nJ per image (table {}): {}\n",
                   r.total.energy.Total() / images / 1000, r.table.name, parts);
  s += fmt::format("  efficiency {:.2f} TOPS/W (2 x MACs / energy)\n",
                   2.0 * static_cast<double>(r.total.macs) / r.total.energy.Total());
  s += fmt::format(
      "  time       {:.1f} us per image at {} MHz = {:.0f} images/s "
      "(simulated); {:.1f} s wall\n",
      r.UsPerImage(), r.config.clock_mhz, 1e6 / r.UsPerImage(), r.wall_seconds);
  return s;
}

std::string RunReportCsv(const RunReport& r) {
  const double peak = r.Peak();
  std::string csv =
      "layer,macs,cycles,ops_per_cycle,utilization,mapping_efficiency,"
      "mxu_not_streaming_cycles,ub_accesses,acc_accesses,dram_bytes,energy_pj\n";
  for (const RunRow& row : r.layers) {
    csv += fmt::format("{},{},{},{:.4f},{:.6f},{:.6f},{},{},{},{},{:.1f}\n", row.name, row.macs,
                       row.Cycles(), row.OpsPerCycle(), row.OpsPerCycle() / peak,
                       row.MappingEfficiency(), row.NotStreaming(), row.UbAccesses(),
                       row.AccAccesses(), row.DramBytes(), row.energy.Total());
  }
  return csv;
}

}  // namespace tpu::report
