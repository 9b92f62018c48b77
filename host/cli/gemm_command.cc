// `tpusim gemm` (see gemm_command.h).
#include "host/cli/gemm_command.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <optional>

#include "fast/fast_mxu_engine.h"
#include "host/cli/options.h"
#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/npy.h"
#include "host/common/progress_bar.h"
#include "host/config/tpu_config.h"
#include "host/gemm/gemm_runner.h"
#include "host/report/gemm_report.h"
#include "sim/mxu/mxu_registry.h"

namespace tpu::cli {
namespace {

struct GemmOptions {
  std::string a_path, b_path, out_path;
  std::optional<int64_t> m, k, n;
  uint64_t seed = 1;
  ChipOptions chip;  // the matrix unit's engine is its own (--engine below)
  std::string engine = "rtl";
  TraceOptions trace;  // no timeline: the matrix unit has no instructions
  OutputOptions out;
};

void Run(const GemmOptions& o) {
  const config::TpuConfig config = ResolveConfig(o.chip);
  CheckTraceOptions(o.trace);

  // Operands.
  Matrix<int8_t> a, b;
  const bool from_files = ReadOperandFiles(o.a_path, o.b_path, o.m || o.k || o.n, &a, &b);
  const gemm::GemmShape shape =
      from_files ? gemm::GemmShape{a.rows, a.cols, b.cols}
                 : gemm::GemmShape{o.m.value_or(64), o.k.value_or(64), o.n.value_or(64)};
  const gemm::GemmPlan plan = gemm::PlanGemm(shape, config.array_dim, config.acc_depth_rows);
  if (!from_files) {
    a = gemm::RandomInt8(shape.m, shape.k, o.seed);
    b = gemm::RandomInt8(shape.k, shape.n, o.seed + 1);
  }
  if (shape.k > gemm::kMaxSafeK) {
    std::cerr << fmt::format(
        "tpusim: warning: K = {} exceeds {}, the largest K for which int32 accumulation "
        "cannot overflow; sums wrap modulo 2^32 as in the hardware\n",
        shape.k, gemm::kMaxSafeK);
  }

  // Outputs must be writable before a long run starts.
  for (const std::string* p : {&o.out_path, &o.out.json}) {
    if (!p->empty()) CheckWritable(*p);
  }

  std::unique_ptr<sim::MxuEngine> engine;
  try {
    if (o.engine == "fast") {
      engine = std::make_unique<fast::FastMxuEngine>(config.array_dim, config.acc_depth_rows);
    } else if (o.engine == "rtl" || o.engine == "systemc") {
      engine = sim::MakeMxuEngine(config.array_dim, o.engine == "rtl" ? sim::EngineKind::kVerilator
                                                                      : sim::EngineKind::kSystemC);
    } else {
      throw UsageError("unknown --engine '" + o.engine +
                       "'; use rtl (the Verilated RTL), systemc (the same RTL under the SystemC "
                       "kernel) or fast (the C++ model, any size)");
    }
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (o.engine == "fast" && !o.trace.wave.empty()) {
    throw UsageError("waveforms (--trace) come from the RTL; use --engine rtl");
  }

  sim::RunOptions run;
  run.trace.path = o.trace.wave;
  run.trace.start_cycle = o.trace.start;
  if (o.trace.end) run.trace.end_cycle = *o.trace.end;
  ProgressBar bar("gemm", !o.out.quiet);
  run.progress = [&bar](double f) { bar.Update(f); };

  const gemm::GemmRunResult r = gemm::RunGemm(plan, a, b, *engine, run);
  bar.Finish();
  if (!o.trace.wave.empty())
    run::WriteTraceLayouts(o.trace.wave, /*chip=*/false, CommandLine(), o.out.quiet);

  if (!o.out_path.empty()) WriteNpyInt32(o.out_path, r.c);
  if (!o.out.json.empty()) {
    WriteFileAtomically(o.out.json, report::GemmReportJson(r, config).dump(2) + "\n");
  }
  if (!o.out.quiet) std::cout << report::FormatGemmReport(r, config);
  if (!r.matches_reference) {
    throw RuntimeError("the RTL result differs from the Eigen reference");
  }
}

}  // namespace

void AddGemmCommand(CLI::App& app) {
  auto opts = std::make_shared<GemmOptions>();
  CLI::App* cmd = app.add_subcommand(
      "gemm", "Multiply two int8 matrices on the cycle-accurate systolic array and report cycles.");
  cmd->footer(R"(
Tiles any M x K by K x N product onto the N x N weight-stationary array (folds over K
and N, streams M), runs the Verilated RTL, checks C bit for bit against Eigen and prints
the RTL's cycle counters next to the closed-form count of docs/mxu.md.

Examples:
  tpusim gemm --m 128 --k 96 --n 80                      random operands, small-16
  tpusim gemm --array 8 --a A.npy --b B.npy --out C.npy --json r.json
  tpusim gemm --config teach-4 --m 3 --k 2 --n 3 --trace t.fst --trace-end 40

Exit status: 0 success, 1 runtime error or mismatch, 2 bad usage or input.)");

  cmd->add_option("--a", opts->a_path, "A operand: .npy int8 matrix, M x K");
  cmd->add_option("--b", opts->b_path, "B operand: .npy int8 matrix, K x N");
  cmd->add_option("--out", opts->out_path, "write C (M x N, int32) to this .npy file");
  cmd->add_option("--m", opts->m, "rows of A, for random operands (default 64)");
  cmd->add_option("--k", opts->k, "columns of A = rows of B, for random operands (default 64)");
  cmd->add_option("--n", opts->n, "columns of B, for random operands (default 64)");
  cmd->add_option("--seed", opts->seed, "seed of the random operands (B uses seed + 1)")
      ->capture_default_str();
  AddChipOptions(cmd, &opts->chip, /*engine=*/false);
  cmd->add_option("--engine", opts->engine,
                  "rtl (the Verilated C++ model of the RTL), systemc (the same RTL as a SystemC "
                  "module) or fast (the C++ model of the matrix unit: same cycles, any size)")
      ->capture_default_str();
  AddTraceOptions(cmd, &opts->trace, "write a waveform: FILE.fst (GTKWave) or FILE.vcd",
                  /*timeline=*/false);
  AddOutputOptions(cmd, &opts->out, "write the report as JSON to this file");
  cmd->callback([opts] { Run(*opts); });
}

}  // namespace tpu::cli
