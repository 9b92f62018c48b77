// The matrix-subsystem engines by name (see gemm_engines.h).
#include "host/gemm/gemm_engines.h"

#include <fmt/format.h>

#include <stdexcept>

#include "fast/fast_mxu_engine.h"
#include "host/common/errors.h"
#include "sim/mxu/mxu_registry.h"

namespace tpu::gemm {
namespace {

// The RTL model of an array size is built with one accumulator depth: a configuration that
// asks for another is refused before the run, naming the presets that match the model.
void CheckRtlAccumulators(sim::MxuEngine& engine, const config::TpuConfig& config) {
  const sim::MxuParams p = engine.Params();
  if (p.acc_depth == config.acc_depth_rows) return;
  const std::string format = p.input_bits == 16 ? "bf16" : "int8";
  std::string presets;
  for (const std::string& name : config::PresetNames()) {
    const config::TpuConfig c = config::LoadConfig(name);
    // (A preset of several cores or matrix units is no gemm's: RequireOneMatrixUnit.)
    if (c.array_dim == p.array_dim && c.acc_depth_rows == p.acc_depth &&
        hw::Name(c.dtype) == format && c.cores == 1 && c.mxus_per_core == 1)
      presets += fmt::format("{}--config {}", presets.empty() ? "" : " or ", name);
  }
  throw UsageError(fmt::format(
      "the RTL model of the {0} x {0} array has {1} accumulator rows, and '{2}' asks for {3}: "
      "run it with {4}--set acc_depth_rows={1}, or use --engine fast (any size and depth)",
      p.array_dim, p.acc_depth, config.name, config.acc_depth_rows,
      presets.empty() ? "" : presets + ", "));
}

}  // namespace

std::unique_ptr<sim::MxuEngine> MakeGemmEngine(const std::string& name,
                                               const config::TpuConfig& config, int input_bits,
                                               const std::string& what) {
  try {
    if (name == "fast") {
      return std::make_unique<fast::FastMxuEngine>(config.array_dim, config.acc_depth_rows,
                                                   input_bits);
    }
    if (name == "rtl" || name == "systemc") {
      std::unique_ptr<sim::MxuEngine> e = sim::MakeMxuEngine(
          config.array_dim, name == "rtl" ? sim::EngineKind::kVerilator : sim::EngineKind::kSystemC,
          input_bits);
      // The SystemC engine learns its model's parameters only when it runs (the check after
      // the run, gemm_runner.cc, covers it).
      if (name == "rtl") CheckRtlAccumulators(*e, config);
      return e;
    }
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  throw UsageError("unknown " + what + " '" + name +
                   "'; use rtl (the Verilated RTL), systemc (the same RTL under the SystemC "
                   "kernel) or fast (the C++ model, any size)");
}

}  // namespace tpu::gemm
