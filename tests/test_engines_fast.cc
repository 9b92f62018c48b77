// The fast engine only: test binaries that link no Verilated model (see test_engines.h).
#include "host/common/errors.h"
#include "host/engine/fast_engine.h"
#include "tests/test_engines.h"

namespace tpu::test {

std::vector<engine::EngineKind> TestEngineKinds() { return {engine::EngineKind::kFast}; }

std::unique_ptr<engine::ChipEngine> TestEngine(engine::EngineKind kind,
                                               const config::TpuConfig& config,
                                               const engine::EngineOptions& options) {
  if (kind != engine::EngineKind::kFast) {
    throw UsageError("this test binary links no rtl engine: its _rtl twin runs this test");
  }
  return std::make_unique<engine::FastEngine>(config, options);
}

}  // namespace tpu::test
