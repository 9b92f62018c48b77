// Picks the Verilated whole-chip model (tpu_top) built for an array size.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/system/tpu_system.h"

namespace tpu::sim {

// The array sizes N whose tpu_top models in number format dtype are in this build (CMake
// TPUSIM_TPU_DIMS, TPUSIM_TPU_BF16_DIMS).
std::vector<int> BuiltTpuDims(hw::Dtype dtype = hw::Dtype::kInt8);
// The chips of several cores or matrix units in this build, as "CxN", "CxMxN", bf16 after N
// (CMake TPUSIM_TPU_CHIPS and the presets of several cores or units).
std::vector<std::string> BuiltTpuChips();
// Throws std::invalid_argument naming the built sizes and how to add N when it was not built.
// The model is the one of config.chip.array_dim and config.chip.dtype (and config.chip.cores).
std::unique_ptr<TpuSystemBase> MakeTpuSystem(const char* name, const TpuSystemConfig& config);

}  // namespace tpu::sim
