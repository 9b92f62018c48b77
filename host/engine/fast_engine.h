// The fast engine behind the ChipEngine seam: the plain C++ chip of fast/ loaded with a
// job's images, run, and read back like the rtl engine's TLM driver does.
#pragma once

#include <memory>
#include <string>

#include "fast/fast_chip.h"
#include "host/engine/chip_engine.h"

namespace tpu::engine {

class FastEngine final : public ChipEngine {
 public:
  // Throws UsageError when the config asks for what the fast engine cannot honour, or an
  // option does not apply to it (waveforms come from the RTL).
  FastEngine(const config::TpuConfig& config, const EngineOptions& options);

  std::string Name() const override { return "fast"; }
  const config::TpuConfig& Config() const override { return config_; }
  bool ComputesValues() const override { return !options_.timing_only; }
  ExecResult Run(const ExecJob& job) override;

  // The chip's parameters for a config (every field the fast engine models).
  static fast::ChipParams ParamsFor(const config::TpuConfig& config);

 private:
  config::TpuConfig config_;
  EngineOptions options_;
  std::unique_ptr<fast::FastChip> chip_;
};

}  // namespace tpu::engine
