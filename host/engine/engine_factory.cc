// Making a chip engine by kind (see engine_factory.h).
#include "host/engine/engine_factory.h"

#include "host/engine/fast_engine.h"
#include "host/engine/rtl_engine.h"
#include "sim/system/tpu_registry.h"

namespace tpu::engine {

std::vector<int> RtlBuiltDims() { return sim::BuiltTpuDims(); }

std::unique_ptr<ChipEngine> MakeChipEngine(EngineKind kind, const config::TpuConfig& config,
                                           const EngineOptions& options) {
  if (kind == EngineKind::kFast) return std::make_unique<FastEngine>(config, options);
  return std::make_unique<RtlEngine>(config, options);
}

}  // namespace tpu::engine
