// The rtl engine: the host-side driver of the simulated TPU (the only code that links the
// Verilated chip, with engine_factory.cc). It builds the SystemC system
// for a config::TpuConfig and, like host software on a real machine, talks to it only through its
// TLM-2.0 socket: loads the program, host data and weights, starts the run, waits for the
// interrupt, reads the status and counters and copies results back.
#pragma once

#include <memory>
#include <string>

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
  // Runs one job to its end. Throws UsageError when an image does not fit its memory or
  // the program is too long, RuntimeError when the RTL model's built parameters differ
  // from the config or the simulation fails.
  ExecResult Run(const ExecJob& job) override;
  // Closes the trace and moves it into place (converting to VCD if asked). Throws
  // RuntimeError when that fails. Without it, no trace file is left behind.
  void Finish() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpu::engine
