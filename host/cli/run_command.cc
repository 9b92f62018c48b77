// `tpusim run`: the quantized MNIST CNN on the simulated TPU, checked image by image
// against the CPU int8 reference, with a per-layer report (host/report/run_report.h).
#include "host/cli/run_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "host/cli/options.h"
#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/progress_bar.h"
#include "host/compiler/topology.h"
#include "host/compiler/tpu_runner.h"
#include "host/data/mnist.h"
#include "host/nn/model.h"
#include "host/report/energy.h"
#include "host/report/run_report.h"

namespace tpu::cli {
namespace {

struct RunArgs {
  WorkloadOptions work;
  ChipOptions chip;
  TraceOptions trace;
  OutputOptions out;
  std::string csv;
  std::string energy = report::DefaultEnergyTablePath();
  std::string topology;
  uint64_t seed = 1;
  int batch = 64;
  bool host_im2col = false;
};

// --topology: every layer of a SCALE-Sim topology file with random int8 data.
void RunTopology(const RunArgs& a) {
  for (const std::string* p : {&a.out.json, &a.csv}) {
    if (!p->empty()) CheckWritable(*p);
  }
  const report::EnergyTable table = report::LoadEnergyTable(a.energy);
  const std::vector<compiler::TopologyLayer> layers = compiler::ReadTopologyCsv(a.topology);
  ChipSession session(a.chip, a.trace, /*progress=*/false);
  ProgressBar bar("run", !a.out.quiet);
  const compiler::TpuRunResult r = compiler::RunTopologyOnTpu(
      layers, session.engine(), a.seed, [&](double f) { bar.Update(f); }, a.host_im2col);
  bar.Finish();
  session.Finish();
  report::RunReport report =
      report::BuildRunReport(r, std::filesystem::path(a.topology).filename().string(),
                             session.engine().Name(), session.config(), table, /*batch=*/1);
  report.topology = true;
  if (!a.out.json.empty()) {
    WriteFileAtomically(a.out.json, report::RunReportJson(report).dump(2) + "\n");
  }
  if (!a.csv.empty()) WriteFileAtomically(a.csv, report::RunReportCsv(report));
  if (!a.out.quiet) std::cout << report::FormatRunText(report);
  if (r.checked && r.mismatches != 0) {
    throw RuntimeError(fmt::format("{} of {} layers differ from the CPU reference", r.mismatches,
                                   r.layers.size()));
  }
}

void Run(const RunArgs& a) {
  if (!a.topology.empty()) return RunTopology(a);
  if (a.work.images < 1 || a.batch < 1) throw UsageError("--images and --batch must be at least 1");
  for (const std::string* p : {&a.out.json, &a.csv}) {
    if (!p->empty()) CheckWritable(*p);
  }
  const report::EnergyTable table = report::LoadEnergyTable(a.energy);
  ChipSession session(a.chip, a.trace, /*progress=*/false);
  const nn::Model model = nn::LoadModel(a.work.model);
  const data::MnistSet test = LoadTestSet(a.work, model, a.work.images);
  if (a.work.images > test.count) {
    throw UsageError(
        fmt::format("--images {} is more than the {} test images", a.work.images, test.count));
  }
  ProgressBar bar("run", !a.out.quiet);
  const compiler::TpuRunResult r = compiler::RunModelOnTpu(
      model, session.engine(), test.pixels.data(), test.labels.data(), a.work.images, a.batch,
      [&](double f) { bar.Update(f); }, a.host_im2col);
  bar.Finish();
  session.Finish();

  const report::RunReport report = report::BuildRunReport(r, model.name, session.engine().Name(),
                                                          session.config(), table, a.batch);
  if (!a.out.json.empty()) {
    WriteFileAtomically(a.out.json, report::RunReportJson(report).dump(2) + "\n");
  }
  if (!a.csv.empty()) WriteFileAtomically(a.csv, report::RunReportCsv(report));
  if (!a.out.quiet) std::cout << report::FormatRunText(report);
  if (r.checked && r.mismatches != 0) {
    throw RuntimeError(
        fmt::format("{} of {} images differ from the CPU int8 reference", r.mismatches, r.images));
  }
}

}  // namespace

void AddRunCommand(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Run the quantized MNIST CNN on the cycle-accurate TPU, checked against the CPU.");
  cmd->footer(R"(
Compiles the whole network into one TPU program per batch (docs/compiler.md): the images,
weights and parameters move in once, every activation stays in the unified buffer, the
chip forms each convolution's windows itself, and only the logits move out. A model or
chip that does not fit one program (the reason is printed) runs layer by layer instead:
each conv and dense layer (with the 2 x 2 pooling after a conv fused into the VPU) its own
job, its rows formed on the host (im2col). --host-im2col forces that lowering, to compare.
Every image's int8 logits are checked against the CPU int8 reference; the table shows the
chip's counters and the energy estimated from them (docs/energy.md), per program. --engine fast runs the C++
model of the chip (same counters as the RTL, any array size); --timing-only skips the
values for cycle and energy studies.

--topology FILE.csv runs a network given as layer shapes instead (SCALE-Sim's topology
format, models/topologies/): every layer as a convolution with random int8 data, its map
moved in once and its windows formed on the chip where it fits (rows marked windows),
else as a GEMM of its im2col rows; checked against the CPU unless --timing-only, with the
same per-layer table (batch 1).

Examples:
  tpusim run --images 200 --batch 16 --json r.json
  tpusim run --config tpu-v1 --engine fast --images 10000 --batch 64
  tpusim run --topology models/topologies/darknet19.csv --config tpu-v1 --engine fast --timing-only)");
  AddWorkloadOptions(cmd, &a->work, 100);
  AddChipOptions(cmd, &a->chip);
  cmd->add_option("--batch", a->batch, "images per program (each weight tile streams them all)")
      ->capture_default_str();
  cmd->add_flag("--host-im2col", a->host_im2col,
                "run each layer as its own job with its rows formed on the host (the lowering "
                "before on-chip windows), to compare");
  AddTraceOptions(cmd, &a->trace,
                  "waveform of the chip (.fst/.vcd; rtl engine), cycles counted across all the "
                  "run's programs");
  AddOutputOptions(cmd, &a->out, "write the results as JSON to this file");
  cmd->add_option("--csv", a->csv,
                  "write one row per program (the whole network, or each layer job) as CSV to "
                  "this file");
  cmd->add_option("--energy", a->energy, "energy table (JSON, docs/energy.md)")
      ->capture_default_str();
  cmd->add_option("--topology", a->topology,
                  "run the layers of a topology file (SCALE-Sim CSV) instead of the model");
  cmd->add_option("--seed", a->seed, "seed of the random data of --topology")
      ->capture_default_str();
  cmd->callback([a, cmd] {
    if (!a->topology.empty()) {
      for (const char* flag : {"--model", "--data", "--dataset", "--images", "--batch"}) {
        if (cmd->count(flag) > 0) {
          throw UsageError(std::string(flag) +
                           " does not apply with --topology (its layers run on random data, "
                           "batch 1)");
        }
      }
    }
    Run(*a);
  });
}

}  // namespace tpu::cli
