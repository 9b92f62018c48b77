// Co-simulation of the two engines (the way Ibex's dv/cosim holds its core to a golden
// model): the same job runs on the rtl and the fast engine, and everything observable is
// compared: how the run ended, the status and failing instruction, every counter, the host
// memory, and the instruction timeline cycle by cycle. On a mismatch the job is written to
// a folder that `tpusim cosim --replay DIR` runs again.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "host/engine/chip_engine.h"

namespace tpu::cosim {

// "" when the results agree; otherwise the first difference, for people.
std::string Compare(const engine::ExecResult& rtl, const engine::ExecResult& fast);

// The result of running one job on both engines.
struct Outcome {
  engine::ExecResult rtl, fast;
  std::string difference;                    // "" when they agree (timelines included)
  double rtl_seconds = 0, fast_seconds = 0;  // wall time of each run
};
// Runs the job on both engines, each with a timeline, and compares.
Outcome RunBoth(engine::ChipEngine& rtl, engine::ChipEngine& fast, const engine::ExecJob& job);

struct CosimOptions {
  uint64_t programs = 200;
  uint64_t first_program = 0;  // runs programs first_program .. first_program + programs - 1
  uint64_t seed = 1;
  std::string save_dir;  // when set, every program is written here (as a mismatch would be)
                         // before it runs
  std::string mismatch_dir = "cosim-mismatches";  // where failing jobs are written
  std::function<void(double)> progress;
};

struct CosimSummary {
  std::string config;
  int array_dim = 0;
  int cores = 1;
  std::string dtype = "int8";  // the chip's number format
  uint64_t programs = 0, mismatches = 0;
  std::map<std::string, uint64_t> endings;  // halted, error: <status>, watchdog, no-halt
  // Instructions issued, by mnemonic, and vector instructions by operation ("vector add").
  std::map<std::string, uint64_t> executed;
  double rtl_seconds = 0, fast_seconds = 0;
  std::string first_mismatch;  // description, folder and replay command
};

// Runs options.programs random programs (host/cosim/program_generator.h) on both engines
// for the engines' config.
CosimSummary RunCosim(engine::ChipEngine& rtl, engine::ChipEngine& fast, const CosimOptions& o);

// Writes a job and both results to `dir` (program.asm, and program-core1.asm ... for the other
// cores of a chip of several cores, host.bin, weights.bin, config.json,
// job.json, rtl.json, fast.json). Throws RuntimeError when it cannot.
void WriteMismatch(const std::string& dir, const engine::ExecJob& job, const Outcome& outcome,
                   const config::TpuConfig& config);
// Reads a job written by WriteMismatch; `config` gets the config it ran on.
engine::ExecJob ReadMismatch(const std::string& dir, config::TpuConfig* config);

}  // namespace tpu::cosim
