// `tpusim compare`: the same inputs on the CPU (fp32 and int8, measured) and on
// the simulated TPU at each requested preset (cycles turned into time at the preset's
// clock, energy from the energy model), in one table.
#include "host/cli/compare_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "host/cli/compare_train.h"
#include "host/cli/options.h"
#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/subprocess.h"
#include "host/cuda/cuda_backend.h"
#include "host/data/mnist.h"
#include "host/engine/chip_engine.h"
#include "host/engine/engine_factory.h"
#include "host/nn/cpu_backend.h"
#include "host/nn/model.h"
#include "host/report/compare_report.h"
#include "host/report/energy.h"
#include "host/report/run_report.h"
#include "host/run/tpu_runner.h"

namespace tpu::cli {
namespace {

struct CompareArgs : WorkloadOptions, OutputOptions {
  std::vector<std::string> configs = {"small-16"};
  std::vector<std::string> engines = {"rtl"};
  std::string markdown;
  std::string energy = report::DefaultEnergyTablePath();
  int batch = 64;
  int threads = 2;
  bool train = false;  // --train: compare training (compare_train.h)
  int epochs = 1;
  int64_t limit = 0;
  std::string optimizer = "adam";
  std::string arch = "mlp";
  CLI::Option* configs_option = nullptr;
  CLI::Option* images_given = nullptr;
};

void RunCompareTrain(const CompareArgs& a) {
  if (a.images_given->count() || !a.inputs.empty() || a.synthetic > 0) {
    throw UsageError(
        "--images, --inputs and --synthetic are for inference; --train trains on "
        "the training set (--limit N: its first N images)");
  }
  CompareTrainArgs t;
  t.configs = a.configs_option->count() ? a.configs : std::vector<std::string>{"tpu-v2"};
  t.data = a.data;
  t.dataset = a.dataset.empty() ? "mnist" : a.dataset;
  t.optimizer = a.optimizer;
  t.arch = a.arch;
  t.markdown = a.markdown;
  t.json = a.json;
  t.energy = a.energy;
  t.epochs = a.epochs;
  t.batch = a.batch;
  t.threads = a.threads;
  t.limit = a.limit;
  t.seed = a.seed;
  t.quiet = a.quiet;
  CompareTrain(t);
}

report::CompareRow CpuRow(const nn::Model& m, const nn::InputSet& set, const CompareArgs& a,
                          nn::CpuBackend b) {
  report::CompareRow r;
  r.backend = nn::CpuBackendName(b);
  const auto e0 = RaplJoules();
  const nn::InferResult res = nn::InferCpu(m, set, set.count, b, a.batch, a.threads);
  const std::optional<double> joules = RaplJoulesSince(e0);
  if (set.HasLabels())
    r.accuracy = static_cast<double>(res.correct) / static_cast<double>(res.images);
  r.images_per_s = static_cast<double>(res.images) / res.seconds;
  r.latency_us = 1000 * nn::LatencyBatch1Ms(m, set, std::min<int64_t>(set.count, 200), b);
  if (joules) {
    r.energy_uj = *joules / static_cast<double>(res.images) * 1e6;
    r.energy_source = "measured (RAPL package)";
  } else {
    r.energy_source = "unavailable (no RAPL counter here)";
  }
  r.note = fmt::format("measured wall time, batch {}, {} threads", a.batch, a.threads);
  return r;
}

// Runs `tpusim run ARGS` in a child process (the SystemC kernel elaborates one system per
// process) and reads its JSON.
nlohmann::json RunJsonChild(const std::vector<std::string>& args, const std::string& json_path) {
  std::vector<std::string> argv = {std::filesystem::read_symlink("/proc/self/exe").string(), "run",
                                   "-q"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--json", json_path});
  if (!RunChild(argv).Ok())
    throw RuntimeError("'" + tpu::CommandLine(argv) + "' failed (its message is above)");
  std::ifstream in(json_path);
  nlohmann::json j;
  in >> j;
  return j;
}

// `tpusim run`'s JSON for the preset: the fast engine runs here; the rtl engine in a child
// process, as the SystemC kernel elaborates one system per process.
nlohmann::json RunJson(const std::string& preset, const std::string& engine_name,
                       const nn::Model& model, const nn::InputSet& set, int64_t images, int batch,
                       const CompareArgs& a, const std::string& json_path) {
  if (engine_name == "fast") {
    const config::TpuConfig config = config::LoadConfig(preset);
    const report::EnergyTable table = report::LoadEnergyTable(a.energy);
    const auto chip = engine::MakeChipEngine(engine::EngineKind::kFast, config, {});
    const run::TpuRunResult r = run::RunModelOnTpu(model, *chip, set, images, batch);
    return report::RunReportJson(
        report::BuildRunReport(r, model.name, "fast", config, table, batch));
  }
  std::vector<std::string> args = {"--model", a.model, "--energy", a.energy};
  if (!a.data.empty()) args.insert(args.end(), {"--data", a.data});
  if (!a.dataset.empty()) args.insert(args.end(), {"--dataset", a.dataset});
  if (!a.inputs.empty()) args.insert(args.end(), {"--inputs", a.inputs});
  if (a.synthetic > 0) {
    args.insert(args.end(),
                {"--synthetic", std::to_string(a.synthetic), "--seed", std::to_string(a.seed)});
  }
  args.insert(args.end(), {"--config", preset, "--engine", engine_name, "--images",
                           std::to_string(images), "--batch", std::to_string(batch)});
  return RunJsonChild(args, json_path);
}

report::CompareRow TpuRow(const std::string& preset, const std::string& engine_name,
                          const nn::Model& model, const nn::InputSet& set, const CompareArgs& a,
                          const std::string& scratch) {
  const nlohmann::json j =
      RunJson(preset, engine_name, model, set, set.count, a.batch, a, scratch + "/run.json");
  const nlohmann::json one =
      RunJson(preset, engine_name, model, set, 1, 1, a, scratch + "/one.json");
  report::CompareRow r;
  const std::string dtype = j["config"]["dtype"].get<std::string>();
  r.backend = "tpu " + preset + (dtype == "int8" ? "" : " " + dtype) +
              (a.engines.size() > 1 ? " (" + engine_name + ")" : "");
  if (!j["accuracy"].is_null()) r.accuracy = j["accuracy"].get<double>();
  r.images_per_s = j["images_per_second"].get<double>();
  r.latency_us = one["us_per_image"].get<double>();
  r.energy_uj = j["energy_per_image_pj"].get<double>() * 1e-6;
  r.energy_source =
      "modelled (the chip's event counts x " + j["energy_table"]["name"].get<std::string>() + ")";
  r.ops_per_cycle = j["ops_per_cycle"].get<double>();
  r.note = fmt::format(
      "simulated at {} MHz on the {} engine ({:.1f} s wall, {} cycles), batch {}, "
      "bit-exact {}",
      j["config"]["clock_mhz"].get<double>(), engine_name, j["wall_seconds"].get<double>(),
      j["cycles"].get<uint64_t>(), a.batch, j["bit_exact"].get<bool>() ? "yes" : "NO");
  return r;
}

void Compare(const CompareArgs& a) {
  if (a.train) return RunCompareTrain(a);
  if (a.images < 1 || a.batch < 1 || a.threads < 1) {
    throw UsageError("--images, --batch and --threads must be at least 1");
  }
  for (const std::string* p : {&a.json, &a.markdown}) {
    if (!p->empty()) CheckWritable(*p);
  }
  // Every argument is checked before the data set is read.
  report::LoadEnergyTable(a.energy);
  bool any_bf16 = false;  // a bf16 chip among the presets: its CPU reference gets a row too
  for (const std::string& c : a.configs)
    any_bf16 = config::LoadConfig(c).dtype == hw::Dtype::kBf16 || any_bf16;
  for (const std::string& e : a.engines) engine::ParseEngineKind(e);
  const nn::Model model = nn::LoadModel(a.model);
  const nn::InputSet set = LoadInputs(a, model);
  report::CompareReport report{model.name, set.count, set.source, {}, {}};
  std::vector<report::CompareRow>& rows = report.rows;
  if (!a.quiet) std::cerr << "compare: cpu-fp32 ...\n";
  rows.push_back(CpuRow(model, set, a, nn::CpuBackend::kFp32));
  if (!a.quiet) std::cerr << "compare: cpu-int8 ...\n";
  rows.push_back(CpuRow(model, set, a, nn::CpuBackend::kInt8));
  if (any_bf16) {
    if (!a.quiet) std::cerr << "compare: cpu-bf16 ...\n";
    rows.push_back(CpuRow(model, set, a, nn::CpuBackend::kBf16));
  }
  const std::string scratch =
      (std::filesystem::temp_directory_path() / ("tpusim_compare_" + std::to_string(::getpid())))
          .string();
  std::filesystem::create_directories(scratch);
  try {
    for (const std::string& c : a.configs) {
      for (const std::string& e : a.engines) {
        if (!a.quiet) std::cerr << "compare: tpu " << c << " (" << e << " engine) ...\n";
        rows.push_back(TpuRow(c, e, model, set, a, scratch));
      }
    }
  } catch (...) {
    std::filesystem::remove_all(scratch);
    throw;
  }
  std::filesystem::remove_all(scratch);
  std::string gpu_note, why;
  if (!cuda::Built()) {
    gpu_note = "GPU: this build has no CUDA backends (nvcc was not found), so no GPU rows.";
  } else if (!cuda::Available(&why)) {
    gpu_note = "GPU: no usable NVIDIA GPU here (" + why + "), so no GPU rows.";
  } else if (set.pixels.empty() || model.IsGraph()) {
    gpu_note = "GPU: the CUDA backends run chains of layers on MNIST images, so no GPU rows.";
  } else {
    const data::MnistSet mnist = nn::LoadTestSet(model, a.dataset, a.data, set.count);
    for (const bool int8 : {true, false}) {
      if (!a.quiet) std::cerr << "compare: " << (int8 ? "cuda-int8" : "cuda-fp32") << " ...\n";
      const cuda::GpuResult g = int8 ? cuda::InferCudaInt8(model, mnist, set.count, a.batch)
                                     : cuda::InferCudaFp32(model, mnist, set.count, a.batch);
      const cuda::GpuResult one =
          int8 ? cuda::InferCudaInt8(model, mnist, 1, 1) : cuda::InferCudaFp32(model, mnist, 1, 1);
      report::CompareRow r;
      r.backend = int8 ? "cuda-int8" : "cuda-fp32";
      r.accuracy = static_cast<double>(g.correct) / static_cast<double>(g.images);
      r.images_per_s = static_cast<double>(g.images) / g.wall_seconds;
      r.latency_us = one.wall_seconds * 1e6;
      r.energy_source = "unavailable (NVML energy not read yet)";
      r.note = fmt::format("measured on {}, wall time incl. copies, batch {}", g.device, a.batch);
      rows.push_back(r);
    }
    gpu_note = "GPU rows: measured wall time on the GPU, including host-device copies.";
  }

  report.gpu_note = gpu_note;
  if (!a.quiet) std::cout << report::FormatCompareText(report);
  if (!a.markdown.empty()) WriteFileAtomically(a.markdown, report::FormatCompareMarkdown(report));
  if (!a.json.empty())
    WriteFileAtomically(a.json, report::CompareReportJson(report).dump(2) + "\n");
}

}  // namespace

void AddCompareCommand(CLI::App& app) {
  auto a = std::make_shared<CompareArgs>();
  CLI::App* cmd = app.add_subcommand(
      "compare", "Compare CPU and simulated TPU (and GPU, when available) on the same images.");
  cmd->footer(R"(
Runs the same inputs (test images, --inputs FILE.npy or --synthetic N) with the CPU backends
(Eigen fp32 and int8, measured wall time) and on the simulated TPU at each preset (tpusim
run: cycles at the preset's clock, energy from the RTL's event counts), and prints accuracy
(where there are labels), inputs/s, latency per input (batch 1), energy per input (measured,
modelled or unavailable: the table says which) and ops/cycle.

With --train, the course material's experiment instead: the perceptron (--arch mlp, the
default) or the course's CNN (--arch lenet5) trained with the same hyperparameters and
epochs on the CPU (fp32, Eigen, measured), on the CPU reference of the chip's arithmetic
(cpu-bf16, measured) and on the chip at each preset (fast engine; tpu-v2 unless
--configs), one table of time per epoch (simulated at the preset's clock for the chip, the
simulation's wall time beside it), images/s, loss, test accuracy and energy per epoch
(docs/training.md).

Examples:
  tpusim compare --images 1000 --configs small-16,lab-8 --markdown table.md
  tpusim compare --images 1000 --engines rtl,fast
  tpusim compare --train --configs tpu-v2,tpu-v3 --epochs 1 --markdown train.md)");
  AddWorkloadOptions(cmd, a.get(), 1000);
  a->images_given = cmd->get_option("--images");
  a->configs_option =
      cmd->add_option("--configs", a->configs, "TPU presets, comma separated (--train: tpu-v2)")
          ->delimiter(',')
          ->capture_default_str();
  cmd->add_flag("--train", a->train, "compare training instead of inference (above)");
  cmd->add_option("--epochs", a->epochs, "--train: passes over the training set")
      ->capture_default_str();
  cmd->add_option("--limit", a->limit, "--train: the first N training images only (0: all)");
  cmd->add_option("--optimizer", a->optimizer, "--train: adam or sgd")->capture_default_str();
  cmd->add_option("--arch", a->arch, "--train: the network, mlp, lenet5 or wide")
      ->capture_default_str();
  cmd->add_option("--engines", a->engines,
                  "chip engines for the TPU rows, comma separated: rtl, fast or rtl,fast (the "
                  "same cycles side by side, each with its wall time)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--batch", a->batch, "images per batch (CPU and TPU)")->capture_default_str();
  cmd->add_option("--threads", a->threads, "CPU worker threads")->capture_default_str();
  cmd->add_option("--energy", a->energy, "energy table for the TPU rows")->capture_default_str();
  AddOutputOptions(cmd, a.get(), "write the table as JSON to this file");
  cmd->add_option("--markdown", a->markdown, "write the table as Markdown to this file");
  cmd->callback([a] { Compare(*a); });
}

}  // namespace tpu::cli
