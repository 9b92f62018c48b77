// `tpusim run`: the quantized MNIST CNN on the simulated TPU, checked image by image
// against the CPU int8 reference, with a per-layer report.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "host/cli/run_command.h"
#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/progress_bar.h"
#include "host/common/revision.h"
#include "host/common/text.h"
#include "host/compiler/tpu_runner.h"
#include "host/data/mnist.h"
#include "host/driver/tpu_driver.h"
#include "host/nn/model.h"
#include "host/report/energy.h"

namespace tpu::cli {
namespace {

struct RunArgs {
  std::string model = TPUSIM_SOURCE_DIR "/models/lenet5";
  std::string config = "small-16";
  std::string data, json, csv, trace;
  uint64_t trace_start = 0, trace_end = UINT64_MAX;
  std::string energy = host::DefaultEnergyTablePath();
  int64_t images = 100;
  int batch = 16;
  bool quiet = false;
};

struct LayerRow {
  std::string name;
  int64_t macs = 0;
  uint64_t cycles = 0, stalls = 0, ub = 0, acc = 0, dram = 0, issued = 0, stream = 0;
  std::vector<std::pair<std::string, uint64_t>> stall_reasons;
  host::EnergyBreakdown energy;
};

void Run(const RunArgs& a) {
  if (a.images < 1 || a.batch < 1) throw UsageError("--images and --batch must be at least 1");
  if (!a.json.empty()) CheckWritable(a.json);
  if (!a.csv.empty()) CheckWritable(a.csv);
  if (!a.trace.empty()) CheckWritable(a.trace);
  const host::EnergyTable table = host::LoadEnergyTable(a.energy);
  const host::TpuConfig config = host::LoadConfig(a.config);
  const nn::Model model = nn::LoadModel(a.model);
  const data::MnistSet test = data::LoadMnist(data::FindMnistDir(a.data), /*train=*/false, a.images);
  if (a.images > test.count) {
    throw UsageError(fmt::format("--images {} is more than the {} test images", a.images, test.count));
  }
  host::DriverOptions dopt;
  dopt.trace_path = a.trace;
  dopt.trace_start = a.trace_start;
  dopt.trace_end = a.trace_end;
  host::TpuDriver driver(config, dopt);
  ProgressBar bar("run", !a.quiet);
  const compiler::TpuRunResult r = compiler::RunModelOnTpu(
      model, config, driver, test.pixels.data(), test.labels.data(), a.images, a.batch,
      [&](double f) { bar.Update(f); });
  bar.Finish();
  driver.FinishTrace();

  const double peak = 2.0 * config.array_dim * config.array_dim;
  auto ops = [](int64_t macs, uint64_t cycles) {
    return cycles ? 2.0 * static_cast<double>(macs) / static_cast<double>(cycles) : 0.0;
  };
  std::vector<LayerRow> rows;
  for (const compiler::LayerStats& l : r.layers) {
    LayerRow row;
    row.name = l.name;
    row.macs = l.macs;
    row.cycles = l.Counter("cycles");
    // Cycles the matrix unit did not stream a row, and why the chip waited, by reason.
    row.stalls = l.Counter("cycles") - l.Counter("mxu_stream_cycles");
    row.issued = l.Counter("macs");
    row.stream = l.Counter("mxu_stream_cycles");
    for (const char* k : {"mxu_stall_weights", "mxu_load_cycles", "mxu_drain_cycles",
                          "mxu_idle_cycles", "issue_stall_unit_busy", "issue_stall_ub_hazard",
                          "issue_stall_acc_hazard", "issue_stall_param_hazard",
                          "issue_stall_drain", "weight_dma_stall_fifo_full", "host_mem_stall",
                          "weight_mem_stall"}) {
      row.stall_reasons.emplace_back(k, l.Counter(k));
    }
    row.ub = l.Counter("ub_reads") + l.Counter("ub_writes");
    row.acc = l.Counter("acc_reads") + l.Counter("acc_writes");
    row.dram = l.Counter("host_bytes_read") + l.Counter("host_bytes_written") +
               l.Counter("weight_bytes_read");
    row.energy = host::ComputeEnergy([&](const std::string& n) { return l.Counter(n); }, config,
                                     table);
    rows.push_back(row);
  }
  // Totals are the sums of the layers, energy component by component.
  LayerRow total;
  total.name = "total";
  total.macs = r.TotalMacs();
  total.energy.components = rows.front().energy.components;
  for (auto& [k, v] : total.energy.components) v = 0;
  total.stall_reasons = rows.front().stall_reasons;
  for (auto& [k, v] : total.stall_reasons) v = 0;
  for (const LayerRow& row : rows) {
    total.cycles += row.cycles;
    total.stalls += row.stalls;
    total.ub += row.ub;
    total.acc += row.acc;
    total.dram += row.dram;
    total.issued += row.issued;
    total.stream += row.stream;
    for (size_t i = 0; i < row.stall_reasons.size(); ++i) {
      total.stall_reasons[i].second += row.stall_reasons[i].second;
    }
    for (size_t i = 0; i < row.energy.components.size(); ++i) {
      total.energy.components[i].second += row.energy.components[i].second;
    }
  }
  const double images = static_cast<double>(r.images);
  auto stalls_json = [](const LayerRow& row) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [k, v] : row.stall_reasons) j[k] = v;
    return j;
  };
  auto mapping = [](const LayerRow& row) {
    return row.issued ? static_cast<double>(row.macs) / static_cast<double>(row.issued) : 0.0;
  };
  auto components_json = [](const host::EnergyBreakdown& e) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [k, v] : e.components) j[k] = v;
    return j;
  };
  const bool bit_exact = r.mismatches == 0;
  const double accuracy = static_cast<double>(r.correct) / static_cast<double>(r.images);
  const double us_per_image =
      static_cast<double>(total.cycles) / config.clock_mhz / static_cast<double>(r.images);

  if (!a.json.empty()) {
    nlohmann::json layers = nlohmann::json::array();
    for (const LayerRow& row : rows) {
      layers.push_back({{"name", row.name},
                        {"macs", row.macs},
                        {"cycles", row.cycles},
                        {"ops_per_cycle", ops(row.macs, row.cycles)},
                        {"utilization", ops(row.macs, row.cycles) / peak},
                        {"mapping_efficiency", mapping(row)},
                        {"mxu_stream_cycles", row.stream},
                        {"mxu_not_streaming_cycles", row.stalls},
                        {"stall_cycles", stalls_json(row)},
                        {"ub_accesses", row.ub},
                        {"acc_accesses", row.acc},
                        {"dram_bytes", row.dram},
                        {"energy_pj", row.energy.Total()},
                        {"energy_components_pj", components_json(row.energy)}});
    }
    const nlohmann::json j = {{"model", model.name},
                              {"images", r.images},
                              {"batch", a.batch},
                              {"accuracy", accuracy},
                              {"bit_exact", bit_exact},
                              {"mismatches", r.mismatches},
                              {"cycles", total.cycles},
                              {"macs", total.macs},
                              {"mapping_efficiency", mapping(total)},
                              {"mxu_stream_cycles_per_image",
                               static_cast<double>(total.stream) / images},
                              {"stall_cycles", stalls_json(total)},
                              {"ops_per_cycle", ops(total.macs, total.cycles)},
                              {"utilization", ops(total.macs, total.cycles) / peak},
                              {"us_per_image", us_per_image},
                              {"images_per_second", 1e6 / us_per_image},
                              {"energy_pj", total.energy.Total()},
                              {"energy_per_image_pj", total.energy.Total() / images},
                              {"energy_components_pj", components_json(total.energy)},
                              {"tops_per_watt", 2.0 * static_cast<double>(total.macs) /
                                                    total.energy.Total()},
                              {"energy_table", table.ToJson()},
                              {"layers", layers},
                              {"config", config.ToJson()},
                              {"wall_seconds", r.wall_seconds},
                              {"revision", kGitRevision}};
    WriteFileAtomically(a.json, j.dump(2) + "\n");
  }
  if (!a.quiet) {
    std::cout << fmt::format(
        "tpusim run: {} on {} ({} x {}, {} MHz), {} test images in batches of {}\n", model.name,
        config.name, config.array_dim, config.array_dim, config.clock_mhz, r.images, a.batch);
    std::cout << fmt::format("  accuracy   {:.2f} % ({} of {})\n", 100 * accuracy, r.correct,
                             r.images);
    std::cout << fmt::format("  bit-exact  {} (int8 logits of every image against the CPU int8 "
                             "reference; {} differ)\n",
                             bit_exact ? "yes" : "NO", r.mismatches);
    std::cout << fmt::format("  per image     {:>10}{:>10}{:>9}{:>7}{:>7}{:>10}{:>10}{:>10}{:>11}{:>11}\n",
                             "MACs", "cycles", "ops/cyc", "util", "map", "MXU idle",
                             "UB rd+wr", "acc rd+wr", "DRAM B", "energy nJ");
    auto line = [&](const LayerRow& row) {
      auto per = [&](double v) { return Grouped(static_cast<int64_t>(v / images + 0.5)); };
      std::cout << fmt::format(
          "  {:<14}{:>10}{:>10}{:>9.1f}{:>6.1f}%{:>6.0f}%{:>10}{:>10}{:>10}{:>11}{:>11.1f}\n",
          row.name, per(static_cast<double>(row.macs)), per(static_cast<double>(row.cycles)),
          ops(row.macs, row.cycles), 100 * ops(row.macs, row.cycles) / peak, 100 * mapping(row),
          per(static_cast<double>(row.stalls)), per(static_cast<double>(row.ub)),
          per(static_cast<double>(row.acc)), per(static_cast<double>(row.dram)),
          row.energy.Total() / images / 1000);
    };
    for (const LayerRow& row : rows) line(row);
    line(total);
    std::string waits;
    for (const auto& [k, v] : total.stall_reasons) {
      if (v > 0) waits += fmt::format("{} {}  ", k, Grouped(static_cast<int64_t>(v / images + 0.5)));
    }
    std::cout << "  stalls     per image (counters of docs/architecture.md): " << waits << "\n";
    std::string parts;
    for (const auto& [k, v] : total.energy.components) {
      parts += fmt::format("{} {:.1f}  ", k, v / images / 1000);
    }
    std::cout << fmt::format("  energy     {:.1f} nJ per image ({}table {}): {}\n",
                             total.energy.Total() / images / 1000, "", table.name, parts);
    std::cout << fmt::format("  efficiency {:.2f} TOPS/W (2 x MACs / energy)\n",
                             2.0 * static_cast<double>(total.macs) / total.energy.Total());
    std::cout << fmt::format("  time       {:.1f} us per image at {} MHz = {:.0f} images/s "
                             "(simulated); {:.1f} s wall\n",
                             us_per_image, config.clock_mhz, 1e6 / us_per_image, r.wall_seconds);
  }
  if (!a.csv.empty()) {
    std::string csv = "layer,macs,cycles,ops_per_cycle,utilization,mapping_efficiency,"
                      "mxu_not_streaming_cycles,ub_accesses,acc_accesses,dram_bytes,energy_pj\n";
    for (const LayerRow& row : rows) {
      csv += fmt::format("{},{},{},{:.4f},{:.6f},{:.6f},{},{},{},{},{:.1f}\n", row.name, row.macs,
                         row.cycles, ops(row.macs, row.cycles), ops(row.macs, row.cycles) / peak,
                         mapping(row), row.stalls, row.ub, row.acc, row.dram, row.energy.Total());
    }
    WriteFileAtomically(a.csv, csv);
  }
  if (!bit_exact) {
    throw RuntimeError(fmt::format("{} of {} images differ from the CPU int8 reference",
                                   r.mismatches, r.images));
  }
}

}  // namespace

void AddRunCommand(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Run the quantized MNIST CNN on the cycle-accurate TPU, checked against the CPU.");
  cmd->footer(R"(
Lowers every conv and dense layer (with the 2 x 2 pooling after a conv fused into the VPU)
to a TPU program, runs it on the whole chip in batches, checks every image's int8 logits
against the CPU int8 reference, and prints accuracy and a per-layer table of the chip's
counters and the energy estimated from them (docs/energy.md).

Example:
  tpusim run --images 200 --batch 16 --json r.json)");
  cmd->add_option("--model", a->model, "model folder")->capture_default_str();
  cmd->add_option("-c,--config", a->config, "preset (teach-4, lab-8, small-16, edge-32) or .json")
      ->capture_default_str();
  cmd->add_option("--images", a->images, "first N of the 10,000 test images")->capture_default_str();
  cmd->add_option("--batch", a->batch, "images per weight tile")->capture_default_str();
  cmd->add_option("--data", a->data, "folder with the MNIST IDX files");
  cmd->add_option("--json", a->json, "write the results as JSON to this file");
  cmd->add_option("--csv", a->csv, "write one row per layer as CSV to this file");
  cmd->add_option("--trace", a->trace, "waveform of the chip (.fst/.vcd), cycles counted across "
                  "all layer jobs");
  cmd->add_option("--trace-start", a->trace_start, "first cycle to trace")->capture_default_str();
  cmd->add_option("--trace-end", a->trace_end, "last cycle to trace (default: the end)");
  cmd->add_option("--energy", a->energy, "energy table (JSON, docs/energy.md)")
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", a->quiet, "print nothing but errors");
  cmd->callback([a] { Run(*a); });
}

}  // namespace tpu::cli
