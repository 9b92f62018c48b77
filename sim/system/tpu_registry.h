// Picks the Verilated whole-chip model (tpu_top) built for an array size.
#pragma once

#include <memory>
#include <vector>

#include "sim/system/tpu_system.h"

namespace tpu::sim {

// The array sizes N whose tpu_top models are in this build (CMake TPUSIM_TPU_DIMS).
std::vector<int> BuiltTpuDims();
// Throws std::invalid_argument naming the built sizes and how to add N when it was not built.
// The array size is config.chip.array_dim.
std::unique_ptr<TpuSystemBase> MakeTpuSystem(const char* name, const TpuSystemConfig& config);

}  // namespace tpu::sim
