// Picks the Verilated matrix-subsystem model built for an array size.
#pragma once

#include <memory>
#include <vector>

#include "sim/mxu/mxu_engine.h"

namespace tpu::sim {

enum class EngineKind { kVerilator, kSystemC };

// The array sizes N whose N x N models are in this build (CMake TPUSIM_ARRAY_DIMS).
std::vector<int> BuiltArrayDims();
// Throws std::invalid_argument naming the built sizes when N was not built.
std::unique_ptr<MxuEngine> MakeMxuEngine(int array_dim, EngineKind kind);

}  // namespace tpu::sim
