// `tpusim run`: the quantized MNIST CNN on the simulated TPU, checked image by image
// against the CPU int8 reference, with a per-layer report (host/report/run_report.h).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "host/cli/chip_options.h"
#include "host/cli/run_command.h"
#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/progress_bar.h"
#include "host/compiler/tpu_runner.h"
#include "host/data/mnist.h"
#include "host/engine/chip_engine.h"
#include "host/engine/timeline.h"
#include "host/nn/model.h"
#include "host/report/energy.h"
#include "host/report/run_report.h"

namespace tpu::cli {
namespace {

struct RunArgs {
  std::string model = TPUSIM_SOURCE_DIR "/models/lenet5";
  ChipOptions chip;
  std::string data, json, csv, trace, timeline;
  uint64_t trace_start = 0, trace_end = UINT64_MAX;
  std::string energy = host::DefaultEnergyTablePath();
  int64_t images = 100;
  int batch = 16;
  bool quiet = false;
};

void Run(const RunArgs& a) {
  if (a.images < 1 || a.batch < 1) throw UsageError("--images and --batch must be at least 1");
  for (const std::string* p : {&a.json, &a.csv, &a.trace, &a.timeline}) {
    if (!p->empty()) CheckWritable(*p);
  }
  const host::EnergyTable table = host::LoadEnergyTable(a.energy);
  const host::TpuConfig config = ResolveConfig(a.chip);
  const engine::EngineKind kind = ResolveEngine(a.chip);
  const nn::Model model = nn::LoadModel(a.model);
  const data::MnistSet test = data::LoadMnist(data::FindMnistDir(a.data), /*train=*/false, a.images);
  if (a.images > test.count) {
    throw UsageError(fmt::format("--images {} is more than the {} test images", a.images, test.count));
  }
  engine::EngineOptions eopt = EngineOptionsFrom(a.chip);
  eopt.trace_path = a.trace;
  eopt.trace_start = a.trace_start;
  eopt.trace_end = a.trace_end;
  engine::Timeline timeline(config.clock_mhz);
  if (!a.timeline.empty()) eopt.timeline = &timeline;
  const std::unique_ptr<engine::ChipEngine> chip = engine::MakeChipEngine(kind, config, eopt);
  ProgressBar bar("run", !a.quiet);
  const compiler::TpuRunResult r = compiler::RunModelOnTpu(
      model, *chip, test.pixels.data(), test.labels.data(), a.images, a.batch,
      [&](double f) { bar.Update(f); });
  bar.Finish();
  chip->Finish();
  if (!a.timeline.empty()) {
    timeline.Note("engine", chip->Name());
    timeline.Note("config", config.ToJson());
    timeline.Write(a.timeline);
  }

  const host::RunReport report =
      host::BuildRunReport(r, model.name, chip->Name(), config, table, a.batch);
  if (!a.json.empty()) WriteFileAtomically(a.json, host::RunReportJson(report).dump(2) + "\n");
  if (!a.csv.empty()) WriteFileAtomically(a.csv, host::RunReportCsv(report));
  if (!a.quiet) std::cout << host::FormatRunText(report);
  if (r.checked && r.mismatches != 0) {
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
counters and the energy estimated from them (docs/energy.md). --engine fast runs the C++
model of the chip (same counters as the RTL, any array size); --timing-only skips the
values for cycle and energy studies.

Examples:
  tpusim run --images 200 --batch 16 --json r.json
  tpusim run --config tpu-v1 --engine fast --images 10000 --batch 64)");
  cmd->add_option("--model", a->model, "model folder")->capture_default_str();
  AddChipOptions(cmd, &a->chip);
  cmd->add_option("--images", a->images, "first N of the 10,000 test images")->capture_default_str();
  cmd->add_option("--batch", a->batch, "images per weight tile")->capture_default_str();
  cmd->add_option("--data", a->data, "folder with the MNIST IDX files");
  cmd->add_option("--json", a->json, "write the results as JSON to this file");
  cmd->add_option("--csv", a->csv, "write one row per layer as CSV to this file");
  cmd->add_option("--trace", a->trace, "waveform of the chip (.fst/.vcd; rtl engine), cycles "
                  "counted across all layer jobs");
  cmd->add_option("--trace-start", a->trace_start, "first cycle to trace")->capture_default_str();
  cmd->add_option("--trace-end", a->trace_end, "last cycle to trace (default: the end)");
  cmd->add_option("--timeline", a->timeline,
                  "write the instruction timeline of every layer job (Chrome trace JSON)");
  cmd->add_option("--energy", a->energy, "energy table (JSON, docs/energy.md)")
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", a->quiet, "print nothing but errors");
  cmd->callback([a] { Run(*a); });
}

}  // namespace tpu::cli
