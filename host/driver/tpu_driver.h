// The host-side driver of the simulated TPU: builds the SystemC system for a TpuConfig and,
// like host software on a real machine, talks to it only through its TLM-2.0 socket:
// loads the program, host data and weights, starts the run, waits for the interrupt, reads
// the status and counters and copies results back.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "host/config/tpu_config.h"
#include "host/isa/isa.h"

namespace tpu::host {

struct ExecJob {
  isa::Program program;
  std::vector<uint8_t> host_image;    // written to host memory at address 0
  std::vector<uint8_t> weight_image;  // written to weight memory at address 0
  uint64_t host_out_addr = 0;         // host memory read back after the run
  uint64_t host_out_bytes = 0;
};

struct ExecResult {
  std::string state;        // halted, error, watchdog, no-halt, internal-error
  std::string chip_status;  // the status register: ok, invalid-opcode, ...
  bool ok = false;          // halted by HALT with status ok
  std::string message;      // why it did not end cleanly; empty when ok
  uint64_t error_pc = 0;    // the failing instruction (chip errors)
  uint64_t cycles = 0;      // the chip's cycle counter
  std::vector<std::pair<std::string, uint64_t>> counters;  // in register order
  std::vector<uint8_t> host_out;

  // Throws std::out_of_range for an unknown name.
  uint64_t Counter(const std::string& name) const;
};

struct DriverOptions {
  std::string trace_path;  // *.fst or *.vcd; empty: none. Written by FinishTrace().
  // The window of cycles to trace, counted across all runs (run 2 follows run 1).
  uint64_t trace_start = 0;
  uint64_t trace_end = UINT64_MAX;
  uint64_t watchdog_cycles = 100000;
  bool progress = false;   // a progress bar on stderr for long runs
};

class TpuDriver {
 public:
  // Elaborates the SystemC system; the SystemC kernel allows this once per process.
  // Throws UsageError when no model of the config's array size is built.
  TpuDriver(const TpuConfig& config, const DriverOptions& options);
  ~TpuDriver();
  TpuDriver(const TpuDriver&) = delete;
  TpuDriver& operator=(const TpuDriver&) = delete;

  // Runs one job to its end. Throws UsageError when an image does not fit its memory or
  // the program is too long, RuntimeError when the RTL model's built parameters differ
  // from the config or the simulation fails.
  ExecResult Run(const ExecJob& job);
  // Closes the trace and moves it into place (converting to VCD if asked). Throws
  // RuntimeError when that fails. Without it, no trace file is left behind.
  void FinishTrace();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpu::host
