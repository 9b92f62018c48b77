// `tpusim run`: a quantized model on the simulated TPU, checked input by input against the
// CPU int8 reference, with a per-program report (host/report/run_report.h); and `tpusim
// merge`, which puts the reports of slices of one run (run --shard) together.
#include "host/cli/run_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "arith/bf16.h"
#include "host/cli/options.h"
#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/progress_bar.h"
#include "host/nn/model.h"
#include "host/report/energy.h"
#include "host/report/run_report.h"
#include "host/run/topology.h"
#include "host/run/tpu_runner.h"

namespace tpu::cli {
namespace {

struct RunArgs {
  WorkloadOptions work;
  ChipOptions chip;
  TraceOptions trace;
  OutputOptions out;
  std::string csv, logits, predictions, shard;
  std::string energy = report::DefaultEnergyTablePath();
  std::string topology;
  std::string maps = "chip";  // --topology: where each layer's maps start and end
  int batch = 64;
  bool host_im2col = false;
  std::string weights = "fifo";  // --weights: fifo or vmem (compiler::WeightPath)
};

// --shard I/K: the I-th of K slices of `count` inputs, cut at whole batches so that the
// slices run the same programs the whole run does.
void ShardRange(const std::string& spec, int64_t count, int batch, int64_t* first, int64_t* n) {
  int64_t i = 0, k = 0;
  char slash = 0, rest = 0;
  if (std::sscanf(spec.c_str(), "%ld%c%ld%c", &i, &slash, &k, &rest) != 3 || slash != '/' ||
      k < 1 || i < 0 || i >= k) {
    throw UsageError("--shard " + spec + ": give I/K, the I-th (0 to K - 1) of K slices");
  }
  const int64_t batches = (count + batch - 1) / batch;
  const int64_t b0 = batches * i / k, b1 = batches * (i + 1) / k;
  *first = std::min(count, b0 * batch);
  *n = std::min(count, b1 * batch) - *first;
}

// --topology: every layer of a SCALE-Sim topology file with random data of the chip's type.
void RunTopology(const RunArgs& a, int batch) {
  run::CheckBatch(batch);
  for (const std::string* p : {&a.out.json, &a.csv}) {
    if (!p->empty()) CheckWritable(*p);
  }
  run::TopologyRunOptions options;
  options.host_im2col = a.host_im2col;
  options.batch = batch;
  options.maps_on_chip = a.maps == "chip";
  const report::EnergyTable table = report::LoadEnergyTable(a.energy);
  const std::vector<compiler::TopologyLayer> layers = compiler::ReadTopologyCsv(a.topology);
  run::ChipSession session(SessionSpecFrom(a.chip, a.trace, /*progress=*/false));
  ProgressBar bar("run", !a.out.quiet);
  const run::TpuRunResult r = run::RunTopologyOnTpu(
      layers, session.engine(), a.work.seed, [&](double f) { bar.Update(f); }, options);
  bar.Finish();
  session.Finish();
  report::RunReport report =
      report::BuildRunReport(r, std::filesystem::path(a.topology).filename().string(),
                             session.engine().Name(), session.config(), table, batch);
  report.topology = true;
  report.gemm_list = std::any_of(layers.begin(), layers.end(),
                                 [](const compiler::TopologyLayer& l) { return l.batch > 0; });
  report.inputs = fmt::format("random data, seed {}; maps {}", a.work.seed,
                              a.maps == "chip" ? "on chip where they fit" : "over the host link");
  report.labelled = false;
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

// Writes the report (and --logits, --predictions) of a run of `inputs`.
void Report(const RunArgs& a, const report::RunReport& report, const run::TpuRunResult& r,
            int64_t outputs, const nn::InputSet& inputs) {
  if (!r.logits_bf16.empty() && (!a.logits.empty() || !a.predictions.empty())) {
    std::vector<float> all;  // a bf16 chip's outputs, exactly, as float32
    for (const auto& y : r.logits_bf16)
      for (uint16_t v : y) all.push_back(arith::FloatOfBits(arith::Fp32OfBf16(v)));
    if (!a.logits.empty()) WriteLogits(a.logits, outputs, all);
    if (!a.predictions.empty())
      WritePredictions(a.predictions, outputs, all, inputs.labels, report.first_input);
  } else if (!a.logits.empty() || !a.predictions.empty()) {
    std::vector<int8_t> all;
    for (const auto& y : r.logits) all.insert(all.end(), y.begin(), y.end());
    if (!a.logits.empty()) WriteLogits(a.logits, outputs, all, r.output_scale);
    if (!a.predictions.empty())
      WritePredictions(a.predictions, outputs, all, inputs.labels, report.first_input);
  }
  if (!a.out.json.empty()) {
    WriteFileAtomically(a.out.json, report::RunReportJson(report).dump(2) + "\n");
  }
  if (!a.csv.empty()) WriteFileAtomically(a.csv, report::RunReportCsv(report));
  if (!a.out.quiet) std::cout << report::FormatRunText(report);
}

void Run(const RunArgs& a, bool batch_given) {
  if (!a.topology.empty()) return RunTopology(a, batch_given ? a.batch : 1);
  run::CheckBatch(a.batch);
  for (const std::string* p : {&a.out.json, &a.csv, &a.logits, &a.predictions}) {
    if (!p->empty()) CheckWritable(*p);
  }
  if (!a.logits.empty()) CheckWritable(LogitsScalePath(a.logits));
  if (a.chip.timing_only && !(a.logits.empty() && a.predictions.empty()))
    throw UsageError("--logits and --predictions need values; drop --timing-only");
  const report::EnergyTable table = report::LoadEnergyTable(a.energy);
  run::ChipSession session(SessionSpecFrom(a.chip, a.trace, /*progress=*/false));
  const nn::Model model = nn::LoadModel(a.work.model);
  // Not given: the most, up to the default, that the chip's memories take at once (the run
  // finds it; a shard finds it first, as its slice is cut at whole batches).
  const bool fit = !batch_given && !a.host_im2col;
  run::CompileChoices how;
  how.layer_jobs = a.host_im2col;
  how.fit_batch = fit && a.shard.empty();
  how.weights =
      a.weights == "vmem" ? compiler::WeightPath::kVectorMemory : compiler::WeightPath::kFifo;
  const int batch = fit && !a.shard.empty()
                        ? run::LargestBatchThatFits(model, session.config(), a.batch, how.weights)
                        : a.batch;
  nn::InputSet inputs = LoadInputs(a.work, model);
  if (session.config().dtype == hw::Dtype::kInt8) Warn(a.out, nn::InputRangeWarning(model, inputs));
  int64_t first = 0, count = inputs.count;
  const int64_t run_inputs = inputs.count;
  if (!a.shard.empty()) {
    ShardRange(a.shard, inputs.count, batch, &first, &count);
    if (count == 0) {
      throw UsageError(fmt::format("--shard {} is empty: {} inputs make {} batches of {}", a.shard,
                                   inputs.count, (inputs.count + batch - 1) / batch, batch));
    }
    inputs = nn::SliceInputs(inputs, first, count);
  }
  ProgressBar bar("run", !a.out.quiet);
  const run::TpuRunResult r = run::RunModelOnTpu(
      model, session.engine(), inputs, inputs.count, batch, [&](double f) { bar.Update(f); }, how);
  bar.Finish();
  session.Finish();
  report::RunReport report = report::BuildRunReport(r, model.name, session.engine().Name(),
                                                    session.config(), table, r.batch);
  report.inputs = inputs.source;
  report.shard = a.shard;
  report.first_input = first;
  report.run_inputs = run_inputs;
  Report(a, report, r, model.layers.back().out.Size(), inputs);
  if (r.non_finite_outputs > 0) {
    Warn(a.out, fmt::format("the outputs of {} of {} inputs are NaN or infinite ({}): they "
                            "equal the CPU reference bit for bit, but are no result",
                            r.non_finite_outputs, r.images, r.non_finite));
  }
  if (r.checked && r.mismatches != 0) {
    throw RuntimeError(fmt::format("{} of {} inputs differ from the CPU {} reference", r.mismatches,
                                   r.images, hw::Name(session.config().dtype)));
  }
}

// What `run --help` says after the options.
constexpr const char* kRunFooter = R"(
Compiles the whole network into one TPU program per batch (docs/compiler.md): the images,
weights and parameters move in once, activations stay in the unified buffer (the plan line
says how: segments of the network run in groups of images; what does not fit is spilled to
host memory and named), the chip forms each convolution's windows itself, residual adds run
in the VPU, and only the outputs move out. A chain of layers that does not fit one program
(the reason is printed) runs layer by layer instead: each conv and dense layer its own job,
its rows formed on the host (im2col). --host-im2col forces that lowering, to compare.
Every input's int8 outputs are checked against the CPU int8 reference; the table shows the
chip's counters and the energy estimated from them (docs/energy.md). --engine fast runs the
C++ model of the chip (same counters as the RTL, any array size); --timing-only skips the
values for cycle and energy studies.

Inputs: the test images of the model's data set (MNIST, Fashion-MNIST), or --inputs
FILE.npy (float32 N x C x H x W, or N x T x X sequences: what the exported model takes), or
--synthetic N (seeded, docs/quantization.md) for models without a data set. Accuracy only where there are labels.

--shard I/K runs the I-th of K slices of the inputs (cut at whole batches, so each slice runs
the programs the whole run would); `tpusim merge` puts their --json reports together into
the whole run's report.

--topology FILE.csv runs a network given as layer shapes instead (SCALE-Sim's topology
format, models/topologies/): every layer as a convolution with random data (int8, or
bfloat16 on a bf16 chip such as tpu-v3), its windows formed on the chip where it fits (rows
marked windows), else as a GEMM of its im2col rows; checked against the CPU reference of the
chip's type unless --timing-only, with the same per-layer table.
--batch B (default 1 there) streams B maps through each weight tile (on several cores each
core a share of them, or with fewer maps than cores a share of each layer's output
channels); --maps chip (the default) starts each layer's input maps in the unified buffer
and leaves its outputs there where they fit, as inside a whole network (programs outside
the layer's, not counted, move them), --maps host moves them over the host link in the
layer's program.

Examples:
  tpusim run --images 200 --batch 16 --json r.json
  tpusim run --config tpu-v1 --engine fast --images 10000 --batch 64
  tpusim run --model resnet18-int8 --config tpu-v1 --engine fast --synthetic 8 --batch 8
  tpusim run --model resnet18-int8 --inputs images.npy --logits y.npy --engine fast
  tpusim run --topology models/topologies/darknet19.csv --config tpu-v1 --engine fast --timing-only)";

// The flags that go with a model and not with --topology, and the one that goes only with it.
void CheckTopologyFlags(const CLI::App& cmd, bool topology) {
  if (!topology) {
    if (cmd.count("--maps") > 0)
      throw UsageError("--maps applies with --topology only (a model's maps stay on chip)");
    if (cmd.count("--weights") > 0 && cmd.count("--host-im2col") > 0)
      throw UsageError("--weights applies to whole-network programs; drop --host-im2col");
    return;
  }
  for (const char* flag : {"--model", "--data", "--dataset", "--images", "--inputs", "--synthetic",
                           "--logits", "--predictions", "--shard", "--weights"}) {
    if (cmd.count(flag) > 0) {
      throw UsageError(std::string(flag) +
                       " does not apply with --topology (its layers run on random data; "
                       "--batch sets how many maps)");
    }
  }
}

}  // namespace

void AddRunCommand(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Run a quantized model on the cycle-accurate TPU, checked against the CPU.");
  cmd->footer(kRunFooter);
  AddWorkloadOptions(cmd, &a->work, 100);
  AddChipOptions(cmd, &a->chip);
  cmd->add_option("--batch", a->batch,
                  "inputs per program (each weight tile streams them all); default 64, or the "
                  "most that fit the chip's memories");
  cmd->add_flag("--host-im2col", a->host_im2col,
                "run each layer as its own job with its rows formed on the host (the lowering "
                "before on-chip windows; chains only), to compare");
  cmd->add_option("--weights", a->weights,
                  "where the weights reach the matrix units: fifo (read_weights from weight "
                  "memory into each unit's FIFO, the default) or vmem (the Cloud TPU's path: "
                  "read_hbm into vector memory, then load_weights; docs/compiler.md)")
      ->check(CLI::IsMember({"fifo", "vmem"}));
  AddTraceOptions(cmd, &a->trace,
                  "waveform of the chip (.fst/.vcd; rtl engine), cycles counted across all the "
                  "run's programs");
  AddOutputOptions(cmd, &a->out, "write the results as JSON to this file");
  cmd->add_option("--csv", a->csv,
                  "write the per-layer table as CSV to this file: a row per layer, on several "
                  "cores a row per core after it (column core); names with commas quoted "
                  "(RFC 4180)");
  cmd->add_option("--logits", a->logits,
                  "write every input's int8 outputs (N x outputs .npy) and their scale "
                  "(NAME.scale.npy) to compare with your framework");
  cmd->add_option("--predictions", a->predictions,
                  "write each input's predicted class (and its label, where known) as CSV: "
                  "input,predicted,label");
  cmd->add_option("--shard", a->shard, "run only slice I of K of the inputs (I/K, from 0)");
  cmd->add_option("--energy", a->energy, "energy table (JSON, docs/energy.md)")
      ->capture_default_str();
  cmd->add_option("--topology", a->topology,
                  "run the layers of a topology file (SCALE-Sim CSV: convolutions, or GEMMs 'Layer "
                  "name, M, N, K' each on a batch of its M) instead of the model");
  cmd->add_option("--maps", a->maps,
                  "--topology: chip (each layer's maps start and stay in the unified buffer "
                  "where they fit) or host (they cross the host link)")
      ->check(CLI::IsMember({"chip", "host"}))
      ->capture_default_str();
  cmd->callback([a, cmd] {
    CheckTopologyFlags(*cmd, !a->topology.empty());
    Run(*a, cmd->count("--batch") > 0);
  });
}

namespace {

struct MergeArgs {
  std::vector<std::string> reports;
  OutputOptions out;
  std::string csv;
};

// The run reports to merge: the files named, and the .json files in folders named (a
// sweep's points/ folder, say), in name order.
std::vector<std::string> ReportFiles(const std::vector<std::string>& args) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& a : args) {
    if (!fs::is_directory(a)) {
      files.push_back(a);
      continue;
    }
    std::vector<std::string> in;
    for (const auto& e : fs::recursive_directory_iterator(a))
      if (e.is_regular_file() && e.path().extension() == ".json") in.push_back(e.path().string());
    std::sort(in.begin(), in.end());
    files.insert(files.end(), in.begin(), in.end());
  }
  if (files.empty()) throw UsageError("no run reports (.json) found in what was named");
  return files;
}

void Merge(const MergeArgs& a) {
  for (const std::string* p : {&a.out.json, &a.csv})
    if (!p->empty()) CheckWritable(*p);
  std::vector<report::RunReport> shards;
  for (const std::string& f : ReportFiles(a.reports)) {
    std::ifstream in(f);
    if (!in) throw UsageError("cannot open run report '" + f + "'");
    nlohmann::json j;
    try {
      in >> j;
    } catch (const nlohmann::json::exception& e) {
      throw UsageError(f + " is not valid JSON: " + e.what());
    }
    // A sweep's point record holds its run's report.
    if (j.is_object() && j.contains("report") && j["report"].is_object()) j = j["report"];
    if (!j.is_object() || !j.contains("shard")) continue;  // not a slice (a sweep's other files)
    shards.push_back(report::RunReportFromJson(j, f));
  }
  if (shards.empty()) throw UsageError("none of the reports is a slice of a run (run --shard)");
  // Every slice of one split, each once.
  const std::string total = shards.front().shard.substr(shards.front().shard.find('/') + 1);
  std::sort(shards.begin(), shards.end(),
            [](const auto& x, const auto& y) { return x.first_input < y.first_input; });
  std::set<std::string> seen;
  for (const report::RunReport& s : shards) {
    if (s.shard.substr(s.shard.find('/') + 1) != total) {
      throw UsageError("slices of different splits: " + shards.front().shard + " and " + s.shard);
    }
    if (!seen.insert(s.shard).second) throw UsageError("slice " + s.shard + " is there twice");
  }
  if (seen.size() != static_cast<size_t>(std::stoll(total))) {
    throw UsageError(
        fmt::format("{} of the {} slices are there; run the others first", seen.size(), total));
  }
  const report::RunReport m = report::MergeRunReports(shards);
  if (!a.out.json.empty()) WriteFileAtomically(a.out.json, report::RunReportJson(m).dump(2) + "\n");
  if (!a.csv.empty()) WriteFileAtomically(a.csv, report::RunReportCsv(m));
  if (!a.out.quiet) std::cout << report::FormatRunText(m);
  if (m.checked && m.mismatches != 0) {
    throw RuntimeError(fmt::format("{} of {} inputs differ from the CPU {} reference", m.mismatches,
                                   m.images, hw::Name(m.config.dtype)));
  }
}

}  // namespace

void AddMergeCommand(CLI::App& app) {
  auto a = std::make_shared<MergeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "merge", "Put the reports of the slices of one run (run --shard I/K) together.");
  cmd->footer(R"(
Reads the --json reports of `tpusim run --shard I/K` (files, or folders searched for .json
files: a sweep's points/ folder holds its points' reports) and writes the report the whole
run gives: images, accuracy, bit-exactness and every counter and per-layer sum. Refuses
slices of different runs, a slice given twice, and a split with slices missing.

Example:
  for i in 0 1 2 3; do tpusim run --shard $i/4 --json s$i.json ...; done
  tpusim merge s0.json s1.json s2.json s3.json --json whole.json
  tpusim merge sweeps/shards/points --json whole.json   # a sweep with a "shard" axis)");
  cmd->add_option("reports", a->reports, "run reports (.json) or folders of them")->required();
  AddOutputOptions(cmd, &a->out, "write the merged report as JSON to this file");
  cmd->add_option("--csv", a->csv, "write the merged per-program rows as CSV to this file");
  cmd->callback([a] { Merge(*a); });
}

}  // namespace tpu::cli
