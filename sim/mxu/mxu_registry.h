// Picks the Verilated matrix-subsystem model built for an array size and number format.
#pragma once

#include <memory>
#include <vector>

#include "sim/mxu/mxu_engine.h"

namespace tpu::sim {

enum class EngineKind { kVerilator, kSystemC };

// The array sizes N whose N x N models are in this build: int8 operands (input_bits 8,
// CMake TPUSIM_ARRAY_DIMS) or bfloat16 ones (16, TPUSIM_BF16_ARRAY_DIMS).
std::vector<int> BuiltArrayDims(int input_bits = 8);
// Throws std::invalid_argument naming the built sizes when N was not built.
std::unique_ptr<MxuEngine> MakeMxuEngine(int array_dim, EngineKind kind, int input_bits = 8);

}  // namespace tpu::sim
