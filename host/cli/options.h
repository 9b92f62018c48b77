// The option groups the commands share, declared once so that the commands cannot drift:
// which chip (--config, --set, --array) and engine (--engine, --timing-only, --watchdog);
// which network and images (--model, --data, --images); GEMM operands (--a, --b); what to
// trace (--trace, --trace-start, --trace-end, --timeline); and what to print (--json,
// -q/--quiet).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host/common/npy.h"
#include "host/config/tpu_config.h"
#include "host/data/mnist.h"
#include "host/engine/chip_engine.h"
#include "host/engine/timeline.h"
#include "host/nn/inputs.h"
#include "host/nn/model.h"
#include "host/run/session.h"

namespace tpu::cli {

// ---- the chip -----------------------------------------------------------------------
struct ChipOptions {
  std::string config = "small-16";
  std::vector<std::string> sets;
  std::optional<int> array;
  std::string engine = "rtl";
  bool timing_only = false;
  uint64_t watchdog = 100000;
};

// --config/-c, --set, --array; with `engine`, also --engine, --timing-only, --watchdog.
void AddChipOptions(CLI::App* cmd, ChipOptions* o, bool engine = true);
// The preset or file, then every --set, then --array; validated (UsageError).
config::TpuConfig ResolveConfig(const ChipOptions& o);
// Commands that run one matrix unit of one core (gemm, lstm) refuse a configuration of more
// (UsageError naming the --set that runs one), rather than ignore the others.
void RequireOneMatrixUnit(const config::TpuConfig& config, const std::string& command);
// The engine's kind and options from the flags (UsageError for a bad combination).
engine::EngineKind ResolveEngine(const ChipOptions& o);
engine::EngineOptions EngineOptionsFrom(const ChipOptions& o);

// ---- the network and its inputs ---------------------------------------------------------
struct WorkloadOptions {
  std::string model = TPUSIM_SOURCE_DIR "/models/lenet5";
  std::string data;     // folder with the IDX files; empty: the usual places
  std::string dataset;  // mnist or fashion-mnist; empty: the one the model was trained on
  int64_t images = 100;
  std::string inputs;                    // --inputs FILE.npy instead of the data set
  int64_t synthetic = 0;                 // --synthetic N seeded inputs instead of the data set
  uint64_t seed = 1;                     // --seed of --synthetic (and of run --topology's data)
  CLI::Option* images_option = nullptr;  // to tell a given --images from its default
};

// What to run the model on: --inputs, --synthetic, or the test images of its data set; the
// first --images of them (all of a file or of --synthetic when --images is not given).
// Throws UsageError for a combination that makes no sense or a model without a data set and
// neither flag.
nn::InputSet LoadInputs(const WorkloadOptions& o, const nn::Model& model);

// --model, --data, --dataset, --inputs, --synthetic, --seed and (when `images` is given, as
// its default) --images.
void AddWorkloadOptions(CLI::App* cmd, WorkloadOptions* o, std::optional<int64_t> images);

// ---- calibration inputs (quantize, import --quantize) ------------------------------------
struct CalibrationOptions {
  std::string data, dataset, inputs;
  int64_t calibration = 2000;  // inputs to calibrate on (at most)
  int64_t synthetic = 0;
  uint64_t seed = 1;
};
// --calibration, --data, --dataset, --inputs, --synthetic, --seed.
void AddCalibrationOptions(CLI::App* cmd, CalibrationOptions* o);
// The first --calibration training images of the model's data set, or of --inputs, or
// --synthetic ones. Throws UsageError for a model without a data set and neither flag.
nn::InputSet LoadCalibration(const CalibrationOptions& o, const nn::Model& model);

// --logits FILE.npy: every input's output, N x outputs: float32 for an fp32 network; int8
// for an int8 one, with their scale (a float32 array of one value) in FILE.scale.npy (for
// FILE = NAME.npy, NAME.scale.npy). Each file is written under a temporary name, then renamed.
void WriteLogits(const std::string& path, int64_t outputs, const std::vector<float>& fp32);
void WriteLogits(const std::string& path, int64_t outputs, const std::vector<int8_t>& int8,
                 float scale);
// --predictions FILE.csv: one line per input, "input,predicted,label": its index (`first`
// for the first of `values`), the class of its largest output (the first of equal ones),
// and its label (`labels` from the first of `values`; empty where there are none). Written under a
// temporary name, then renamed.
void WritePredictions(const std::string& path, int64_t outputs, const std::vector<float>& values,
                      const std::vector<uint8_t>& labels, int64_t first = 0);
void WritePredictions(const std::string& path, int64_t outputs, const std::vector<int8_t>& values,
                      const std::vector<uint8_t>& labels, int64_t first = 0);
// The scale file beside an int8 --logits file.
std::string LogitsScalePath(const std::string& path);

// ---- GEMM operands ---------------------------------------------------------------------
// The --a/--b operand files of a command that can also make random operands from
// --m/--k/--n: false when neither file was given; else loads both into *a and *b. Throws
// UsageError when only one is given, when random dimensions were given too, or when
// A's columns differ from B's rows.
bool ReadOperandFiles(const std::string& a_path, const std::string& b_path, bool random_dims_given,
                      Matrix<int8_t>* a, Matrix<int8_t>* b);
// The same for bfloat16 operands (ReadBf16Operand).
bool ReadOperandFiles(const std::string& a_path, const std::string& b_path, bool random_dims_given,
                      Matrix<uint16_t>* a, Matrix<uint16_t>* b);
// A float32 .npy operand rounded to bfloat16 (docs/bf16.md) as bit patterns; UsageError for
// another rank, or naming the first NaN or infinity.
Matrix<uint16_t> ReadBf16Operand(const std::string& path);
// The checks of ReadOperandFiles for a caller that reads the files itself: false when
// neither file was given; UsageError when only one is, or random dimensions were given too.
bool CheckOperandFiles(const std::string& a_path, const std::string& b_path,
                       bool random_dims_given);
// UsageError naming both files when A's columns differ from B's rows.
void CheckInnerDimensions(const std::string& a_path, int64_t a_rows, int64_t a_cols,
                          const std::string& b_path, int64_t b_rows, int64_t b_cols);

// ---- tracing ----------------------------------------------------------------------------
struct TraceOptions {
  std::string wave;  // --trace: FST or VCD of the RTL's signals
  uint64_t start = 0;
  std::optional<uint64_t> end;
  std::string timeline;  // --timeline: Chrome trace JSON of the instructions
};

// --trace (described by `wave_help`), --trace-start, --trace-end and, with `timeline`,
// --timeline.
void AddTraceOptions(CLI::App* cmd, TraceOptions* o, const std::string& wave_help,
                     bool timeline = true);
// UsageError for a window that ends before it starts or a wave file of another format.
void CheckTraceOptions(const TraceOptions& o);

// The command line of this process, kept by main() for the headers of the GTKWave layouts
// written beside traces: "tpusim ARGS", with the --trace file's directory left out.
void RememberCommandLine(int argc, const char* const* argv);
const std::string& CommandLine();

// ---- every command ----------------------------------------------------------------------
// Refuses a negative value for every unsigned option of `app` and its commands (a parse
// error: "--programs: -1 is negative ..."): CLI11 2.1.2 converts them with strtoull, which
// takes "-1" as 2^64 - 1 (a `cosim --programs -1` that never ends).
void RefuseNegativeUnsigned(CLI::App* app);

// ---- what to print ----------------------------------------------------------------------
struct OutputOptions {
  std::string json;
  bool quiet = false;
};

// "tpusim: warning: MESSAGE" on stderr, unless the message is empty or `o` is quiet.
void Warn(const OutputOptions& o, const std::string& message);

void AddOutputOptions(CLI::App* cmd, OutputOptions* o, const std::string& json_help);

// ---- a chip set up from the options above -------------------------------------------------
// The session (host/run/session.h) the chip and trace options ask for; progress bars and
// notes on stderr with `progress`.
run::SessionSpec SessionSpecFrom(const ChipOptions& chip, const TraceOptions& trace, bool progress);

}  // namespace tpu::cli
