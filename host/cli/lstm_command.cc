// `tpusim lstm`: an int8 LSTM layer with values on the whole chip (host/compiler/lstm_program.h),
// checked against the int8 reference and compared with the fp32 cell.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "host/cli/isa_commands.h"
#include "host/cli/options.h"
#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/compiler/lstm_program.h"
#include "host/report/exec_report.h"

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

// What the LSTM lines of the report say: its size, its ops and whether h and c are right.
struct LstmVerdict {
  bool checked = false, bit_exact = false;
  float worst_h_error = 0;
};

std::string FormatLstm(const LstmOptions& o, const compiler::LstmCase& k, const LstmVerdict& v,
                       const engine::ExecResult& r, const config::TpuConfig& c) {
  const double ops = 2.0 * static_cast<double>(k.Macs());
  const double seconds = static_cast<double>(r.cycles) / (c.clock_mhz * 1e6);
  std::string s = fmt::format(
      "LSTM {} inputs x {} hidden units, batch {}, {} steps: {:.3g} ops (gate matmuls), "
      "{:.1f} ops/cycle, {:.3g} TOPS at {} MHz\n",
      o.inputs, o.hidden, o.batch, o.steps, ops, ops / static_cast<double>(r.cycles),
      seconds > 0 ? ops / seconds / 1e12 : 0.0, c.clock_mhz);
  if (!v.checked) return s + "values: not computed (--timing-only)\n";
  return s + fmt::format(
                 "h and c: {} the int8 reference (host/nn/lstm.h); largest |h - fp32 cell| "
                 "{:.4f} (cell scale {:.4g})\n",
                 v.bit_exact ? "bit-exact against" : "DIFFER from", v.worst_h_error, k.cell_scale);
}

void RunLstm(const LstmOptions& o) {
  CheckSizes(o);
  RequireOneMatrixUnit(ResolveConfig(o.chip), "lstm");
  run::ChipSession session(SessionSpecFrom(o.chip, o.trace, /*progress=*/!o.out.quiet));
  const config::TpuConfig& config = session.config();
  const compiler::LstmCase k =
      compiler::MakeLstmCase(o.inputs, o.hidden, o.batch, o.steps, o.seed, config);
  if (!o.out.json.empty()) CheckWritable(o.out.json);
  session.engine().Load(k.program.exe);
  const std::vector<int8_t> zeros(k.h.size(), 0);  // h0 = c0 = 0
  std::vector<int8_t> h, c;
  const engine::ExecResult r = k.program.Run(session.engine(), k.x, zeros, zeros, &h, &c);
  session.Finish();
  LstmVerdict v;
  if (r.ok && !o.chip.timing_only) {
    v.checked = true;
    v.bit_exact = h == k.h && c == k.c;
    v.worst_h_error = k.WorstHError(h);
  }
  const std::string name = fmt::format("lstm {}x{}", o.inputs, o.hidden);
  const size_t words = k.program.exe.programs[0].words.size();
  if (!o.out.json.empty()) {
    nlohmann::json j = report::ExecReportJson(r, config, name, words);
    j["lstm"] = {{"inputs", o.inputs},
                 {"hidden", o.hidden},
                 {"batch", o.batch},
                 {"steps", o.steps},
                 {"seed", o.seed},
                 {"macs", k.Macs()},
                 {"cell_scale", k.cell_scale},
                 {"checked", v.checked},
                 {"bit_exact", v.bit_exact},
                 {"worst_h_error", v.worst_h_error}};
    WriteFileAtomically(o.out.json, j.dump(2) + "\n");
  }
  if (!o.out.quiet) {
    std::cout << report::FormatExecReport(r, config, name, words);
    if (r.ok) std::cout << FormatLstm(o, k, v, r, config);
  }
  if (!r.ok) throw RuntimeError(name + ": " + r.message);
  if (v.checked && !v.bit_exact)
    throw RuntimeError(name + ": h and c differ from the int8 reference");
}

}  // namespace

void AddLstmCommand(CLI::App& app) {
  auto o = std::make_shared<LstmOptions>();
  CLI::App* cmd = app.add_subcommand(
      "lstm", "Run an int8 LSTM layer with values on the chip, checked against the CPU.");
  cmd->footer(R"(
Builds a seeded LSTM layer (PyTorch's gates i, f, g, o and initialisation) and inputs
uniform in [-1, 1], quantizes it (docs/quantization.md, "LSTM cells"), and runs --steps
steps of a batch of sequences on the chip: each step's gate matmuls on the array, the
cell's sigmoid and tanh tables, products and sum on the vector unit, h and c kept in the
unified buffer, the weights streamed from weight memory every step. Prints the chip's
counters, the gate matmuls' ops per cycle and TOPS, and whether the final h and c are
bit-exact against the int8 reference (exit 1 when not), with the distance of h from the
fp32 cell's.

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
