// Picks the teaching model of the matrix subsystem (every signal readable through VPI,
// sim/mxu_probe.h) built for an array size.
#pragma once

#include <memory>
#include <vector>

#include "sim/mxu_engine.h"

namespace tpu::sim {

// The array sizes of this build's teaching models (CMake TPUSIM_TEACH_DIMS).
std::vector<int> BuiltTeachDims();
// Throws std::invalid_argument naming the built sizes when N was not built.
std::unique_ptr<MxuEngine> MakeTeachEngine(int array_dim);

}  // namespace tpu::sim
