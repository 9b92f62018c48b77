// The shared option groups (see options.h).
#include "host/cli/options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "arith/bf16.h"
#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/npy.h"
#include "host/common/subprocess.h"
#include "host/engine/engine_factory.h"
#include "sim/wave/wave_file.h"

namespace tpu::cli {
namespace {

// A count that must be at least 1 (--synthetic 0 would otherwise fall back to the data set).
CLI::Validator AtLeastOne() {
  return CLI::Validator(
      [](std::string& value) {
        try {
          if (std::stoll(value) >= 1) return std::string();
        } catch (const std::exception&) {
          return fmt::format("{} is not a whole number; give 1 or more", value);
        }
        return fmt::format("{} is not a count of inputs; give 1 or more", value);
      },
      "");
}

}  // namespace

void AddChipOptions(CLI::App* cmd, ChipOptions* o, bool engine) {
  std::string presets;
  for (const std::string& name : config::PresetNames()) {
    presets += (presets.empty() ? "" : ", ") + name;
  }
  cmd->add_option("-c,--config", o->config, "preset in configs/ (" + presets + ") or a .json file")
      ->capture_default_str();
  cmd->add_option("--set", o->sets,
                  "override a config field, e.g. --set host_mem_bytes_per_cycle=4 (repeatable)");
  cmd->add_option("--array", o->array, "array size N, overriding the config's array_dim");
  if (!engine) return;
  cmd->add_option("--engine", o->engine,
                  "rtl (the Verilated RTL: the reference, sizes built in) or fast (the C++ "
                  "model, cycle-exact with the RTL, any size 2 to 512)")
      ->capture_default_str();
  cmd->add_flag("--timing-only", o->timing_only,
                "fast engine: counters and cycles only, no values (for large studies)");
  cmd->add_option("--watchdog", o->watchdog,
                  "stop a run that makes no progress for this many cycles")
      ->capture_default_str();
}

config::TpuConfig ResolveConfig(const ChipOptions& o) {
  config::TpuConfig config = config::LoadConfig(o.config);
  for (const std::string& kv : o.sets) config::ApplyOverride(&config, kv);
  if (o.array && *o.array != config.array_dim) {
    config.array_dim = *o.array;
    config.name += fmt::format(" with --array {}", *o.array);
  }
  config.Validate();
  return config;
}

void RequireOneMatrixUnit(const config::TpuConfig& config, const std::string& command) {
  if (config.cores == 1 && config.mxus_per_core == 1) return;
  throw UsageError(fmt::format(
      "tpusim {} runs on one matrix unit of one core, and '{}' has {} core(s) of {} matrix "
      "unit(s); add --set cores=1 --set mxus_per_core=1 to run on one of them, or run a "
      "network on the whole chip with tpusim run",
      command, config.name, config.cores, config.mxus_per_core));
}

engine::EngineKind ResolveEngine(const ChipOptions& o) {
  const engine::EngineKind kind = engine::ParseEngineKind(o.engine);
  if (o.timing_only && kind != engine::EngineKind::kFast) {
    throw UsageError("--timing-only is a mode of the fast engine; add --engine fast");
  }
  if (o.watchdog == 0) throw UsageError("--watchdog must be at least 1 cycle");
  return kind;
}

engine::EngineOptions EngineOptionsFrom(const ChipOptions& o) {
  engine::EngineOptions e;
  e.watchdog_cycles = o.watchdog;
  e.timing_only = o.timing_only;
  return e;
}

nn::InputSet LoadInputs(const WorkloadOptions& o, const nn::Model& model) {
  const bool given = o.images_option != nullptr && o.images_option->count() > 0;
  if (!o.inputs.empty() && o.synthetic > 0) {
    throw UsageError("--inputs and --synthetic both name the inputs; give one");
  }
  if ((!o.inputs.empty() || o.synthetic > 0) && (!o.data.empty() || !o.dataset.empty())) {
    throw UsageError("--data and --dataset choose a data set; --inputs and --synthetic replace it");
  }
  if (given && o.images < 1) throw UsageError("--images must be at least 1");
  nn::InputSet in;
  if (!o.inputs.empty()) {
    in = nn::ReadInputsNpy(o.inputs, model);
  } else if (o.synthetic > 0) {
    in = nn::SyntheticInputs(model, o.synthetic, o.seed);
  } else {
    in = nn::InputsFromMnist(nn::LoadTestSet(model, o.dataset, o.data, 0));
  }
  if (given && o.images > in.count) {
    throw UsageError(
        fmt::format("--images {} is more than the {} {}", o.images, in.count, in.source));
  }
  const int64_t n =
      given || (o.inputs.empty() && o.synthetic == 0) ? std::min(o.images, in.count) : in.count;
  return n == in.count ? in : nn::SliceInputs(in, 0, n);
}

void AddWorkloadOptions(CLI::App* cmd, WorkloadOptions* o, std::optional<int64_t> images) {
  cmd->add_option("--model", o->model, "model folder (tpusim model --help)")->capture_default_str();
  cmd->add_option("--data", o->data,
                  "folder with the data set's IDX files (MNIST default: $TPUSIM_DATA, "
                  "../shared/data/mnist, then data/mnist from scripts/fetch-mnist; Fashion-MNIST: "
                  "$TPUSIM_FASHION_DATA, then /usr/share/datasets/fashion-mnist)");
  cmd->add_option("--dataset", o->dataset,
                  "mnist or fashion-mnist (default: the one the model was trained on)");
  cmd->add_option("--inputs", o->inputs,
                  "run on the inputs of this .npy file (float32 N x C x H x W, or N x T x X "
                  "sequences: what the exported "
                  "model takes) instead of the data set");
  cmd->add_option("--synthetic", o->synthetic,
                  "run on N seeded synthetic inputs (docs/quantization.md) instead of the data "
                  "set: for models without one")
      ->check(AtLeastOne());
  cmd->add_option("--seed", o->seed, "seed of --synthetic")->capture_default_str();
  if (images) {
    o->images = *images;
    o->images_option =
        cmd->add_option("--images", o->images,
                        "first N of the inputs (default: that many test images, or every input "
                        "of --inputs and --synthetic)")
            ->capture_default_str();
  }
}

void AddCalibrationOptions(CLI::App* cmd, CalibrationOptions* o) {
  cmd->add_option("--calibration", o->calibration,
                  "inputs to calibrate the activation scales on (the first of the training set, "
                  "of --inputs, or of --synthetic)")
      ->capture_default_str();
  cmd->add_option("--data", o->data, "folder with the data set's IDX files");
  cmd->add_option("--dataset", o->dataset,
                  "mnist or fashion-mnist (default: the one the model was trained on)");
  cmd->add_option(
      "--inputs", o->inputs,
      "calibrate on the inputs of this .npy file (float32 N x C x H x W, or N x T x X)");
  cmd->add_option("--synthetic", o->synthetic,
                  "calibrate on N seeded synthetic inputs (docs/quantization.md)")
      ->check(AtLeastOne());
  cmd->add_option("--seed", o->seed, "seed of --synthetic")->capture_default_str();
}

nn::InputSet LoadCalibration(const CalibrationOptions& o, const nn::Model& model) {
  if (o.calibration < 1) throw UsageError("--calibration must be at least 1 input");
  if (!o.inputs.empty() && o.synthetic > 0) {
    throw UsageError("--inputs and --synthetic both name the calibration inputs; give one");
  }
  if (!o.inputs.empty()) return nn::ReadInputsNpy(o.inputs, model);
  if (o.synthetic > 0) return nn::SyntheticInputs(model, o.synthetic, o.seed);
  if (model.dataset == "none") {
    throw UsageError("model '" + model.name +
                     "' has no data set to calibrate on: give --inputs FILE.npy (N x C x H x W "
                     "float32) or --synthetic N");
  }
  const std::string dir = data::FindDatasetDir(nn::DatasetFor(o.dataset, model), o.data);
  nn::InputSet s = nn::InputsFromMnist(data::LoadMnist(dir, /*train=*/true, o.calibration));
  s.source = "training images";
  return s;
}

std::string LogitsScalePath(const std::string& path) {
  const std::string ext = ".npy";
  const bool npy =
      path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  return (npy ? path.substr(0, path.size() - ext.size()) : path) + ".scale.npy";
}

void WriteLogits(const std::string& path, int64_t outputs, const std::vector<float>& fp32) {
  Tensor<float> t;
  t.shape = {static_cast<int64_t>(fp32.size()) / outputs, outputs};
  t.data = fp32;
  WriteNpyTensor(path, t);
}

void WriteLogits(const std::string& path, int64_t outputs, const std::vector<int8_t>& int8,
                 float scale) {
  Tensor<int8_t> t;
  t.shape = {static_cast<int64_t>(int8.size()) / outputs, outputs};
  t.data = int8;
  Tensor<float> s;
  s.shape = {1};
  s.data = {scale};
  WriteNpyTensor(LogitsScalePath(path), s);
  WriteNpyTensor(path, t);
}

namespace {

template <typename T>
void WritePredictionsOf(const std::string& path, int64_t outputs, const std::vector<T>& values,
                        const std::vector<uint8_t>& labels, int64_t first) {
  std::string csv = "input,predicted,label\n";
  const int64_t n = static_cast<int64_t>(values.size()) / outputs;
  for (int64_t i = 0; i < n; ++i) {
    const auto row = values.begin() + i * outputs;
    const int64_t best = std::max_element(row, row + outputs) - row;
    const auto label = static_cast<size_t>(i);
    csv += fmt::format("{},{},{}\n", first + i, best,
                       label < labels.size() ? std::to_string(labels[label]) : "");
  }
  WriteFileAtomically(path, csv);
}

}  // namespace

void WritePredictions(const std::string& path, int64_t outputs, const std::vector<float>& values,
                      const std::vector<uint8_t>& labels, int64_t first) {
  WritePredictionsOf(path, outputs, values, labels, first);
}
void WritePredictions(const std::string& path, int64_t outputs, const std::vector<int8_t>& values,
                      const std::vector<uint8_t>& labels, int64_t first) {
  WritePredictionsOf(path, outputs, values, labels, first);
}

void AddTraceOptions(CLI::App* cmd, TraceOptions* o, const std::string& wave_help, bool timeline) {
  cmd->add_option("--trace", o->wave, wave_help);
  cmd->add_option("--trace-start", o->start, "first cycle to trace")->capture_default_str();
  cmd->add_option("--trace-end", o->end, "last cycle to trace (default: the end)");
  if (timeline) {
    cmd->add_option("--timeline", o->timeline,
                    "write the instruction timeline (Chrome trace JSON: Perfetto, "
                    "chrome://tracing)");
  }
}

void CheckTraceOptions(const TraceOptions& o) {
  if (o.end && *o.end < o.start) {
    throw UsageError(fmt::format("--trace-end {} is before --trace-start {}", *o.end, o.start));
  }
  if (!o.wave.empty()) {
    try {
      sim::WaveFile::FormatOf(o.wave);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  for (const std::string* p : {&o.wave, &o.timeline}) {
    if (!p->empty()) CheckWritable(*p);
  }
}

void AddOutputOptions(CLI::App* cmd, OutputOptions* o, const std::string& json_help) {
  cmd->add_option("--json", o->json, json_help);
  cmd->add_flag("-q,--quiet", o->quiet, "print nothing but errors");
}

namespace {
std::string& CommandLineStore() {
  static std::string line = "tpusim";
  return line;
}
}  // namespace

void RememberCommandLine(int argc, const char* const* argv) {
  std::string line = "tpusim";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i > 1 && std::string(argv[i - 1]) == "--trace") {
      arg = std::filesystem::path(arg).filename().string();
    } else if (arg.rfind("--trace=", 0) == 0) {
      arg = "--trace=" + std::filesystem::path(arg.substr(8)).filename().string();
    }
    const bool plain = !arg.empty() && arg.find_first_of(" \t'\"$&|;<>()*?") == std::string::npos;
    line += " " + (plain ? arg : ShellQuote(arg));
  }
  CommandLineStore() = line;
}

const std::string& CommandLine() { return CommandLineStore(); }

run::SessionSpec SessionSpecFrom(const ChipOptions& chip, const TraceOptions& trace,
                                 bool progress) {
  run::SessionSpec s;
  s.config = ResolveConfig(chip);
  s.engine = ResolveEngine(chip);
  CheckTraceOptions(trace);
  s.options = EngineOptionsFrom(chip);
  s.options.progress = progress;
  s.options.trace_path = trace.wave;
  s.options.trace_start = trace.start;
  if (trace.end) s.options.trace_end = *trace.end;
  s.timeline_path = trace.timeline;
  s.command_line = CommandLine();
  s.quiet = !progress;
  return s;
}

bool CheckOperandFiles(const std::string& a_path, const std::string& b_path,
                       bool random_dims_given) {
  if (a_path.empty() && b_path.empty()) return false;
  if (random_dims_given) {
    throw UsageError("give either --a/--b files or --m/--k/--n for random operands, not both");
  }
  if (a_path.empty() || b_path.empty()) {
    throw UsageError(a_path.empty() ? "--b was given without --a; pass both operands"
                                    : "--a was given without --b; pass both operands");
  }
  return true;
}

void CheckInnerDimensions(const std::string& a_path, int64_t a_rows, int64_t a_cols,
                          const std::string& b_path, int64_t b_rows, int64_t b_cols) {
  if (a_cols == b_rows) return;
  throw UsageError(fmt::format(
      "inner dimensions differ: A ({}) is {} x {} but B ({}) is {} x {}; A's columns must "
      "equal B's rows",
      a_path, a_rows, a_cols, b_path, b_rows, b_cols));
}

bool ReadOperandFiles(const std::string& a_path, const std::string& b_path, bool random_dims_given,
                      Matrix<int8_t>* a, Matrix<int8_t>* b) {
  if (!CheckOperandFiles(a_path, b_path, random_dims_given)) return false;
  *a = ReadNpyInt8(a_path);
  *b = ReadNpyInt8(b_path);
  CheckInnerDimensions(a_path, a->rows, a->cols, b_path, b->rows, b->cols);
  return true;
}

bool ReadOperandFiles(const std::string& a_path, const std::string& b_path, bool random_dims_given,
                      Matrix<uint16_t>* a, Matrix<uint16_t>* b) {
  if (!CheckOperandFiles(a_path, b_path, random_dims_given)) return false;
  *a = ReadBf16Operand(a_path);
  *b = ReadBf16Operand(b_path);
  CheckInnerDimensions(a_path, a->rows, a->cols, b_path, b->rows, b->cols);
  return true;
}

Matrix<uint16_t> ReadBf16Operand(const std::string& path) {
  const Tensor<float> t = ReadNpyTensor<float>(path);
  if (t.shape.size() != 2) {
    throw UsageError(fmt::format("{}: a GEMM operand must be a 2-D float32 array, not {}-D", path,
                                 t.shape.size()));
  }
  Matrix<uint16_t> m;
  m.rows = t.shape[0];
  m.cols = t.shape[1];
  m.data.resize(t.data.size());
  for (size_t i = 0; i < t.data.size(); ++i) {
    if (!std::isfinite(t.data[i])) {
      throw UsageError(fmt::format("{}: element [{}][{}] is {}; operands must be finite numbers",
                                   path, static_cast<int64_t>(i) / m.cols,
                                   static_cast<int64_t>(i) % m.cols, t.data[i]));
    }
    m.data[i] = arith::Bf16OfFp32(arith::BitsOfFloat(t.data[i]));
  }
  return m;
}

void Warn(const OutputOptions& o, const std::string& message) {
  if (!o.quiet && !message.empty()) std::cerr << "tpusim: warning: " << message << "\n";
}

void RefuseNegativeUnsigned(CLI::App* app) {
  const CLI::Validator not_negative(
      [](std::string& value) {
        const auto first = value.find_first_not_of(" \t");
        if (first == std::string::npos || value[first] != '-') return std::string();
        return fmt::format("{} is negative; give a whole number of 0 or more", value);
      },
      "");
  for (CLI::Option* option : app->get_options()) {
    if (option->get_type_name().rfind("UINT", 0) == 0) option->check(not_negative);
  }
  for (CLI::App* command : app->get_subcommands([](CLI::App*) { return true; }))
    RefuseNegativeUnsigned(command);
}

}  // namespace tpu::cli
