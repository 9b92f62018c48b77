// Making a chip engine by kind: the fast engine, or the rtl engine (the Verilated chip in its
// SystemC system). The one place that names both, in the library tpu_engines; code that
// needs only the fast engine or the interface links tpu_engine and no Verilated model.
#pragma once

#include <memory>
#include <vector>

#include "host/engine/chip_engine.h"

namespace tpu::engine {

// The array sizes whose whole-chip RTL is in this build.
std::vector<int> RtlBuiltDims();
// Throws UsageError when the engine cannot run the config (an RTL size not built: the
// message names --engine fast and how to build it) or an option does not apply to it.
std::unique_ptr<ChipEngine> MakeChipEngine(EngineKind kind, const config::TpuConfig& config,
                                           const EngineOptions& options);

}  // namespace tpu::engine
