// `tpusim gemm` (see gemm_command.h).
#include "host/cli/gemm_command.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <optional>

#include "arith/bf16.h"
#include "host/cli/options.h"
#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/npy.h"
#include "host/common/progress_bar.h"
#include "host/config/tpu_config.h"
#include "host/gemm/gemm_engines.h"
#include "host/gemm/gemm_runner.h"
#include "host/report/gemm_report.h"

namespace tpu::cli {
namespace {

struct GemmOptions {
  std::string a_path, b_path, out_path;
  std::optional<int64_t> m, k, n;
  uint64_t seed = 1;
  std::string dtype;  // empty: the config's (int8 unless it is a bf16 chip)
  ChipOptions chip;   // the matrix unit's engine is its own (--engine below)
  std::string engine = "rtl";
  TraceOptions trace;  // no timeline: the matrix unit has no instructions
  OutputOptions out;
};

// The operands, from files or random of the given (or default) shape, and their plan (which
// checks the shape before any random operand is made).
template <class T>
gemm::GemmPlan Operands(const GemmOptions& o, const config::TpuConfig& config, Matrix<T>* a,
                        Matrix<T>* b) {
  const auto plan = [&](const gemm::GemmShape& shape) {
    return gemm::PlanGemm(shape, config.array_dim, config.acc_depth_rows);
  };
  const bool random_dims = o.m || o.k || o.n;
  if (CheckOperandFiles(o.a_path, o.b_path, random_dims)) {
    if constexpr (sizeof(T) == 1) {
      *a = ReadNpyInt8(o.a_path);
      *b = ReadNpyInt8(o.b_path);
    } else {
      *a = ReadBf16Operand(o.a_path);
      *b = ReadBf16Operand(o.b_path);
    }
    CheckInnerDimensions(o.a_path, a->rows, a->cols, o.b_path, b->rows, b->cols);
    return plan({a->rows, a->cols, b->cols});
  }
  const gemm::GemmShape shape{o.m.value_or(64), o.k.value_or(64), o.n.value_or(64)};
  const gemm::GemmPlan p = plan(shape);
  *a = gemm::RandomOperand<T>(shape.m, shape.k, o.seed);
  *b = gemm::RandomOperand<T>(shape.k, shape.n, o.seed + 1);
  return p;
}

// C as the user gets it: int32, or float32 for bf16.
void WriteResult(const std::string& path, const gemm::GemmRunResult& r) {
  if (!r.bf16) return WriteNpyInt32(path, r.c);
  Tensor<float> t;
  t.shape = {r.c.rows, r.c.cols};
  t.data.resize(r.c.data.size());
  for (size_t i = 0; i < t.data.size(); ++i)
    t.data[i] = arith::FloatOfBits(static_cast<uint32_t>(r.c.data[i]));
  WriteNpyTensor(path, t);
}

template <class T>
void RunAs(const GemmOptions& o, const config::TpuConfig& config) {
  Matrix<T> a, b;
  const gemm::GemmPlan plan = Operands(o, config, &a, &b);
  const gemm::GemmShape& shape = plan.shape;
  if (sizeof(T) == 1 && shape.k > gemm::kMaxSafeK) {
    std::cerr << fmt::format(
        "tpusim: warning: K = {} exceeds {}, the largest K for which int32 accumulation "
        "cannot overflow; sums wrap modulo 2^32 as in the hardware\n",
        shape.k, gemm::kMaxSafeK);
  }
  // Outputs must be writable before a long run starts.
  for (const std::string* p : {&o.out_path, &o.out.json}) {
    if (!p->empty()) CheckWritable(*p);
  }
  const std::unique_ptr<sim::MxuEngine> engine =
      gemm::MakeGemmEngine(o.engine, config, 8 * sizeof(T), "--engine");
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

  if (!o.out_path.empty()) WriteResult(o.out_path, r);
  if (!o.out.json.empty()) {
    WriteFileAtomically(o.out.json, report::GemmReportJson(r, config).dump(2) + "\n");
  }
  if (!o.out.quiet) std::cout << report::FormatGemmReport(r, config);
  if (!r.matches_reference) {
    throw RuntimeError("the " + r.engine + " engine's result differs from the reference");
  }
}

void Run(const GemmOptions& o) {
  const config::TpuConfig config = ResolveConfig(o.chip);
  RequireOneMatrixUnit(config, "gemm");
  CheckTraceOptions(o.trace);
  const std::string dtype = o.dtype.empty() ? hw::Name(config.dtype) : o.dtype;
  if (dtype == "int8") return RunAs<int8_t>(o, config);
  if (dtype == "bf16") return RunAs<uint16_t>(o, config);
  throw UsageError("unknown --dtype '" + o.dtype +
                   "'; use int8 (int8 x int8 into int32, TPU v1) or bf16 (bfloat16 x bfloat16 "
                   "into float32, TPU v2/v3: docs/bf16.md)");
}

}  // namespace

void AddGemmCommand(CLI::App& app) {
  auto opts = std::make_shared<GemmOptions>();
  CLI::App* cmd = app.add_subcommand(
      "gemm",
      "Multiply two int8 or bfloat16 matrices on the cycle-accurate systolic array and report "
      "cycles.");
  cmd->footer(R"(
Tiles any M x K by K x N product onto the N x N weight-stationary array (folds over K
and N, streams M), runs the Verilated RTL, checks C bit for bit against a CPU reference and
prints the RTL's cycle counters next to the closed-form count of docs/mxu.md.

--dtype int8 (the default, unless the config is a bf16 chip such as tpu-v2): int8
operands, int32 C, checked against Eigen.
--dtype bf16: float32 .npy operands rounded to bfloat16 (random ones: normal, mean 0,
deviation 1), float32 sums and C, checked against the bf16 reference that adds in the
array's order (docs/bf16.md). The rtl engine has the sizes of TPUSIM_BF16_ARRAY_DIMS.

Examples:
  tpusim gemm --m 128 --k 96 --n 80                      random operands, small-16
  tpusim gemm --array 8 --a A.npy --b B.npy --out C.npy --json r.json
  tpusim gemm --config teach-4 --m 3 --k 2 --n 3 --trace t.fst --trace-end 40
  tpusim gemm --config tpu-v2 --m 512 --k 512 --n 512 --out C.npy

Exit status: 0 success, 1 runtime error or mismatch, 2 bad usage or input.)");

  cmd->add_option("--a", opts->a_path, "A operand: .npy matrix, M x K (int8; float32 with bf16)");
  cmd->add_option("--b", opts->b_path, "B operand: .npy matrix, K x N (int8; float32 with bf16)");
  cmd->add_option("--out", opts->out_path,
                  "write C (M x N; int32, float32 with bf16) to this .npy file");
  cmd->add_option("--dtype", opts->dtype,
                  "number format: int8 (int32 sums) or bf16 (float32 sums, docs/bf16.md); "
                  "default: the config's dtype");
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
