// Both engines (see test_engines.h).
#include "host/engine/engine_factory.h"
#include "tests/test_engines.h"

namespace tpu::test {

std::vector<engine::EngineKind> TestEngineKinds() {
  return {engine::EngineKind::kRtl, engine::EngineKind::kFast};
}

std::unique_ptr<engine::ChipEngine> TestEngine(engine::EngineKind kind,
                                               const config::TpuConfig& config,
                                               const engine::EngineOptions& options) {
  return engine::MakeChipEngine(kind, config, options);
}

}  // namespace tpu::test
