// The matrix-subsystem engines a GEMM runs on, by name (tpusim gemm --engine, Python's
// tpusim.gemm): rtl (the Verilated RTL, a fresh model each run), systemc (the same RTL
// under the SystemC kernel) and fast (the C++ model, any size).
#pragma once

#include <memory>
#include <string>

#include "host/config/tpu_config.h"
#include "sim/mxu/mxu_engine.h"

namespace tpu::gemm {

// The engine `name` for the config's array size and accumulators; `input_bits` 8 (int8) or
// 16 (bfloat16). Throws UsageError for an unknown name (calling it `what`: "--engine" on
// the command line), or an RTL size this build lacks (naming the built sizes and how to add
// one).
std::unique_ptr<sim::MxuEngine> MakeGemmEngine(const std::string& name,
                                               const config::TpuConfig& config, int input_bits,
                                               const std::string& what = "engine");

}  // namespace tpu::gemm
