// The rtl engine: the host-side driver of the simulated TPU (the only code that links the
// Verilated chip, with engine_factory.cc). It builds the SystemC system
// for a config::TpuConfig and, like host software on a real machine, talks to it only through its
// TLM-2.0 socket: writes host data and weights, loads the programs, starts the run, waits
// for the interrupt, reads the status and counters, and reads results back.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "host/engine/chip_engine.h"

namespace tpu::engine {

class RtlEngine final : public ChipEngine {
 public:
  // Elaborates the SystemC system; the SystemC kernel allows this once per process.
  // Throws UsageError when no model of the config's array size is built, or an option
  // does not apply (timing_only).
  RtlEngine(const config::TpuConfig& config, const EngineOptions& options);
  ~RtlEngine() override;
  RtlEngine(const RtlEngine&) = delete;
  RtlEngine& operator=(const RtlEngine&) = delete;

  std::string Name() const override { return "rtl"; }
  const config::TpuConfig& Config() const override;
  // Closes the trace and moves it into place (converting to VCD if asked). Throws
  // RuntimeError when that fails. Without it, no trace file is left behind.
  void Finish() override;

 protected:
  void WriteMemory(Memory memory, uint64_t addr, const std::vector<uint8_t>& bytes) override;
  std::vector<uint8_t> ReadMemory(Memory memory, uint64_t addr, uint64_t bytes) override;
  // Throws RuntimeError when the RTL model's built parameters differ from the config or the
  // simulation fails.
  ExecResult RunPrograms(const ExecJob& job) override;

 private:
  // Starts the SystemC kernel (and the waveform) before the first transfer.
  void Start();
  // Runs `task` in the host thread (TLM transfers need it) until it returns.
  void InHostThread(const std::function<void()>& task);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpu::engine
