// The fast engine behind the ChipEngine seam: the plain C++ chip of fast/, its memories
// written, run and read back as the rtl engine's TLM driver does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

  // The chip's parameters for a config (every field the fast engine models).
  static fast::ChipParams ParamsFor(const config::TpuConfig& config);

 protected:
  void WriteMemory(Memory memory, uint64_t addr, const std::vector<uint8_t>& bytes) override;
  std::vector<uint8_t> ReadMemory(Memory memory, uint64_t addr, uint64_t bytes) override;
  ExecResult RunPrograms(const ExecJob& job) override;

 private:
  uint8_t* MemoryAt(Memory memory, uint64_t addr) {
    return (memory == Memory::kHost ? chip_->HostMemory() : chip_->WeightMemory()) + addr;
  }

  config::TpuConfig config_;
  EngineOptions options_;
  std::unique_ptr<fast::FastChip> chip_;
};

}  // namespace tpu::engine
