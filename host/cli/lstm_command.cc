// `tpusim lstm`: a seeded int8 LSTM layer as a model of one `lstm` layer, compiled and run
// as `tpusim run` runs any model (the network compiler's LSTM lowering, host/compiler/lower/
// lstm.cc), checked against the int8 reference and compared with the fp32 cell.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "host/cli/isa_commands.h"
#include "host/cli/options.h"
#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/nn/fp32_net.h"
#include "host/nn/inputs.h"
#include "host/nn/lstm.h"
#include "host/nn/quantize.h"
#include "host/report/energy.h"
#include "host/report/run_report.h"
#include "host/run/session.h"
#include "host/run/tpu_runner.h"

namespace tpu::cli {
namespace {

struct LstmOptions {
  int64_t inputs = 256, hidden = 256, batch = 8, steps = 4;
  uint64_t seed = 1;
  ChipOptions chip;
  TraceOptions trace;
  OutputOptions out;
};

void CheckSizes(const LstmOptions& o) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"--inputs", o.inputs}, {"--hidden", o.hidden}, {"--batch", o.batch}, {"--steps", o.steps}};
  for (const auto& [flag, v] : sizes)
    if (v < 1 || v > 65535) throw UsageError(fmt::format("{} {} must be 1 to 65535", flag, v));
}

// A seeded LSTM layer (nn::RandomLstm: PyTorch's initialisation) as a model of one lstm
// layer over `steps` steps, `batch` sequences of inputs uniform in [-1, 1], and the model
// quantized on them (the cell scale calibrated: max |c| / 127).
struct LstmCase {
  nn::Model fp32, int8;
  nn::InputSet inputs;
};

LstmCase MakeCase(const LstmOptions& o) {
  const nn::Lstm cell = nn::RandomLstm(o.inputs, o.hidden, o.seed);
  LstmCase k;
  nn::Model& m = k.fp32;
  m.name = fmt::format("lstm {}x{}", o.inputs, o.hidden);
  m.preprocess = m.dataset = "none";
  m.input = {1, static_cast<int>(o.steps), static_cast<int>(o.inputs)};
  nn::Layer l;
  l.type = nn::LayerType::kLstm;
  l.name = "lstm";
  l.inputs = {nn::kModelInput};
  l.out = {1, 1, static_cast<int>(o.hidden)};
  l.weights = {{o.inputs + o.hidden, 4 * o.hidden}, cell.weights};
  l.bias = {{4 * o.hidden}, cell.bias};
  m.layers = {l};
  nn::InferShapes(&m);
  k.inputs.shape = m.input;
  k.inputs.count = o.batch;
  k.inputs.source = fmt::format("uniform in [-1, 1] (seed {})", o.seed);
  std::mt19937_64 rng(o.seed + 1);
  std::uniform_real_distribution<float> unit(-1, 1);
  k.inputs.values.resize(static_cast<size_t>(o.batch * m.input.Size()));
  for (float& v : k.inputs.values) v = unit(rng);
  k.int8 = k.fp32;
  nn::Quantize(&k.int8, k.inputs, o.batch);
  return k;
}

// What the LSTM lines of the report say: whether h is right, and how far from fp32.
struct LstmVerdict {
  bool checked = false, bit_exact = false;
  float worst_h_error = 0;
};

LstmVerdict Check(const LstmCase& k, const run::TpuRunResult& r) {
  LstmVerdict v;
  if (!r.checked) return v;
  v.checked = true;
  v.bit_exact = r.mismatches == 0;
  nn::ForwardCache cache;
  nn::Forward(k.fp32, nn::Fp32Inputs(k.inputs, 0, k.inputs.count), &cache);
  const auto& h = cache.acts.back();
  for (size_t i = 0; i < r.logits.size(); ++i)
    for (size_t j = 0; j < r.logits[i].size(); ++j)
      v.worst_h_error =
          std::max(v.worst_h_error, std::fabs(r.logits[i][j] * r.output_scale -
                                              h(static_cast<int64_t>(i), static_cast<int64_t>(j))));
  return v;
}

std::string FormatLstm(const LstmOptions& o, const LstmCase& k, const LstmVerdict& v,
                       const report::RunReport& rep) {
  const double ops = 2.0 * static_cast<double>(k.fp32.layers[0].Macs()) * o.batch;
  const auto cycles = static_cast<double>(rep.ElapsedCycles());
  const double seconds = cycles / (rep.config.clock_mhz * 1e6);
  std::string s = fmt::format(
      "LSTM {} inputs x {} hidden units, batch {}, {} steps: {:.3g} ops (gate matmuls), "
      "{:.1f} ops/cycle, {:.3g} TOPS at {} MHz\n",
      o.inputs, o.hidden, o.batch, o.steps, ops, cycles > 0 ? ops / cycles : 0.0,
      seconds > 0 ? ops / seconds / 1e12 : 0.0, rep.config.clock_mhz);
  if (!v.checked) return s + "values: not computed (--timing-only)\n";
  return s + fmt::format(
                 "h: {} the int8 reference (host/nn/lstm.h); largest |h - fp32 cell| {:.4f} "
                 "(cell scale {:.4g})\n",
                 v.bit_exact ? "bit-exact against" : "DIFFERS from", v.worst_h_error,
                 k.int8.layers[0].q.cell_scale);
}

void RunLstm(const LstmOptions& o) {
  CheckSizes(o);
  if (!o.out.json.empty()) CheckWritable(o.out.json);
  const report::EnergyTable table = report::LoadEnergyTable(report::DefaultEnergyTablePath());
  run::ChipSession session(SessionSpecFrom(o.chip, o.trace, /*progress=*/!o.out.quiet));
  const LstmCase k = MakeCase(o);
  const auto batch = static_cast<int>(o.batch);
  const run::TpuRunResult r =
      run::RunModelOnTpu(k.int8, session.engine(), k.inputs, o.batch, batch);
  session.Finish();
  report::RunReport rep = report::BuildRunReport(r, k.int8.name, session.engine().Name(),
                                                 session.config(), table, r.batch);
  rep.inputs = k.inputs.source;
  const LstmVerdict v = Check(k, r);
  if (!o.out.json.empty()) {
    nlohmann::json j = report::RunReportJson(rep);
    j["lstm"] = {{"inputs", o.inputs},
                 {"hidden", o.hidden},
                 {"batch", o.batch},
                 {"steps", o.steps},
                 {"seed", o.seed},
                 {"macs", k.fp32.layers[0].Macs() * o.batch},
                 {"cell_scale", k.int8.layers[0].q.cell_scale},
                 {"checked", v.checked},
                 {"bit_exact", v.bit_exact},
                 {"worst_h_error", v.worst_h_error}};
    WriteFileAtomically(o.out.json, j.dump(2) + "\n");
  }
  if (!o.out.quiet) std::cout << report::FormatRunText(rep) << FormatLstm(o, k, v, rep);
  if (v.checked && !v.bit_exact)
    throw RuntimeError(k.int8.name + ": h differs from the int8 reference");
}

}  // namespace

void AddLstmCommand(CLI::App& app) {
  auto o = std::make_shared<LstmOptions>();
  CLI::App* cmd = app.add_subcommand(
      "lstm", "Run an int8 LSTM layer with values on the chip, checked against the CPU.");
  cmd->footer(R"(
Builds a seeded LSTM layer (PyTorch's gates i, f, g, o and initialisation) as a model of
one lstm layer over --steps steps, and --batch sequences of inputs uniform in [-1, 1];
quantizes it on them (docs/quantization.md, "LSTM cells"), and runs it as tpusim run runs
any model (one program for the batch, docs/compiler.md "LSTM layers"): each step's gate
matmuls on the array, the cell's sigmoid and tanh tables, products and sum on the vector
unit, h and c kept on chip, the weights streamed from weight memory every step. Prints the
run's report (cycles, each operation's row, energy), the gate matmuls' ops per cycle and
TOPS, and whether the last h is bit-exact against the int8 reference (exit 1 when not),
with its distance from the fp32 cell's. A model of your own (an imported nn.LSTM:
docs/import.md, "Sequences") runs with tpusim run.

Examples:
  tpusim lstm --config teach-4 --inputs 5 --hidden 6 --batch 3 --steps 3
  tpusim lstm --config tpu-v1 --engine fast --inputs 600 --hidden 600 --batch 64 --json l.json
  tpusim lstm --config tpu-v1 --engine fast --timing-only --hidden 1024 --batch 256

Docs: docs/quantization.md (the arithmetic), docs/vpu.md (the tables), docs/isa.md.)");
  cmd->add_option("--inputs", o->inputs, "input size X")->capture_default_str();
  cmd->add_option("--hidden", o->hidden, "hidden units H")->capture_default_str();
  cmd->add_option("--batch", o->batch, "sequences run side by side")->capture_default_str();
  cmd->add_option("--steps", o->steps, "time steps")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the weights and inputs")->capture_default_str();
  AddChipOptions(cmd, &o->chip);
  AddTraceOptions(cmd, &o->trace, "write a waveform of every chip signal (.fst/.vcd; rtl engine)");
  AddOutputOptions(cmd, &o->out, "write the report as JSON to this file");
  cmd->callback([o] { RunLstm(*o); });
}

}  // namespace tpu::cli
