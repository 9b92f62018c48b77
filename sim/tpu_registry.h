// Picks the Verilated whole-chip model (tpu_top) built for an array size.
#pragma once

#include <memory>
#include <vector>

#include "sim/tpu_system.h"

namespace tpu::sim {

// The array sizes N whose tpu_top models are in this build (CMake TPUSIM_TPU_DIMS).
std::vector<int> BuiltTpuDims();
// Throws std::invalid_argument naming the built sizes and how to add N when it was not built.
std::unique_ptr<TpuSystemBase> MakeTpuSystem(int array_dim, const char* name,
                                             const TpuSystemConfig& config);

}  // namespace tpu::sim
