// The rtl engine: the host-side driver of the simulated TPU. It builds the SystemC system
// for a config::TpuConfig and, like host software on a real machine, talks to it only through its
// TLM-2.0 socket: loads the program, host data and weights, starts the run, waits for the
// interrupt, reads the status and counters and copies results back.
#pragma once

#include <memory>
#include <string>

#include "host/engine/chip_engine.h"

namespace tpu::driver {

class TpuDriver final : public engine::ChipEngine {
 public:
  // Elaborates the SystemC system; the SystemC kernel allows this once per process.
  // Throws UsageError when no model of the config's array size is built, or an option
  // does not apply (timing_only).
  TpuDriver(const config::TpuConfig& config, const engine::EngineOptions& options);
  ~TpuDriver() override;
  TpuDriver(const TpuDriver&) = delete;
  TpuDriver& operator=(const TpuDriver&) = delete;

  std::string Name() const override { return "rtl"; }
  const config::TpuConfig& Config() const override;
  // Runs one job to its end. Throws UsageError when an image does not fit its memory or
  // the program is too long, RuntimeError when the RTL model's built parameters differ
  // from the config or the simulation fails.
  engine::ExecResult Run(const engine::ExecJob& job) override;
  // Closes the trace and moves it into place (converting to VCD if asked). Throws
  // RuntimeError when that fails. Without it, no trace file is left behind.
  void Finish() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpu::driver
