// Picks the teaching models built for an array size: the weight-stationary matrix
// subsystem (every signal readable through VPI, sim/teach/mxu_probe.h) and the
// output-stationary array (sim/teach/os_array_engine.h, sim/teach/os_probe.h).
#pragma once

#include <memory>
#include <vector>

#include "contract/tpu_contract.h"
#include "sim/mxu/mxu_engine.h"
#include "sim/teach/os_array_engine.h"

namespace tpu::sim {

// The array sizes of this build's teaching models (CMake TPUSIM_TEACH_DIMS; bf16 weight-
// stationary ones: TPUSIM_TEACH_BF16_DIMS).
std::vector<int> BuiltTeachDims(hw::Dtype dtype = hw::Dtype::kInt8);
// Throws std::invalid_argument naming the built sizes when N was not built.
std::unique_ptr<MxuEngine> MakeTeachEngine(int array_dim, hw::Dtype dtype = hw::Dtype::kInt8);
std::unique_ptr<OsArrayEngine> MakeOsTeachEngine(int array_dim);

}  // namespace tpu::sim
