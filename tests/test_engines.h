// The chip engines a test binary has. The compiler's test binaries link no Verilated model
// (tests/test_engines_fast.cc: the fast engine only); each has an `_rtl` twin built from the
// same sources with both engines (tests/test_engines_all.cc) that runs only the tests that
// need the RTL (tests/CMakeLists.txt, tpusim_add_engine_gtest).
#pragma once

#include <memory>
#include <vector>

#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"

namespace tpu::test {

// The engines of this binary: {fast}, or {rtl, fast}.
std::vector<engine::EngineKind> TestEngineKinds();
// A chip of `kind`; throws UsageError for the rtl engine in a binary without it.
std::unique_ptr<engine::ChipEngine> TestEngine(engine::EngineKind kind,
                                               const config::TpuConfig& config,
                                               const engine::EngineOptions& options = {});

}  // namespace tpu::test
