// The matrix-subsystem engines by name (see gemm_engines.h).
#include "host/gemm/gemm_engines.h"

#include <stdexcept>

#include "fast/fast_mxu_engine.h"
#include "host/common/errors.h"
#include "sim/mxu/mxu_registry.h"

namespace tpu::gemm {

std::unique_ptr<sim::MxuEngine> MakeGemmEngine(const std::string& name,
                                               const config::TpuConfig& config, int input_bits,
                                               const std::string& what) {
  try {
    if (name == "fast") {
      return std::make_unique<fast::FastMxuEngine>(config.array_dim, config.acc_depth_rows,
                                                   input_bits);
    }
    if (name == "rtl" || name == "systemc") {
      return sim::MakeMxuEngine(
          config.array_dim, name == "rtl" ? sim::EngineKind::kVerilator : sim::EngineKind::kSystemC,
          input_bits);
    }
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  throw UsageError("unknown " + what + " '" + name +
                   "'; use rtl (the Verilated RTL), systemc (the same RTL under the SystemC "
                   "kernel) or fast (the C++ model, any size)");
}

}  // namespace tpu::gemm
