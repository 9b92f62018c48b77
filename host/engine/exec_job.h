// What a job for a chip engine holds and what running it gives (data only; the engines are
// behind host/engine/chip_engine.h): a program plus memory images in; the status, every
// counter and the host memory read back out.
#pragma once

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "contract/tpu_contract.h"
#include "host/isa/isa.h"

namespace tpu::engine {

class Timeline;

struct ExecJob {
  std::string name;      // for people and timelines: the program file, the layer, ...
  isa::Program program;  // core 0's
  // On a chip of several cores (config `cores`): the programs of cores 1, 2, ...; a core
  // without one, or with an empty one, does not start. The memories are the chip's, shared.
  std::vector<isa::Program> other_programs;
  // Core `core`'s program (an empty one for a core without a program).
  const isa::Program& ProgramOf(int core) const {
    static const isa::Program kNone;
    if (core == 0) return program;
    const auto i = static_cast<size_t>(core) - 1;
    return core > 0 && i < other_programs.size() ? other_programs[i] : kNone;
  }
  std::vector<uint8_t> host_image;    // written to host memory at address 0
  std::vector<uint8_t> weight_image;  // written to weight memory at weight_image_addr
  uint64_t weight_image_addr = 0;
  uint64_t host_out_addr = 0;  // host memory read back after the run
  uint64_t host_out_bytes = 0;
};

// How a run, or one core's part of it, ended.
enum class RunEnd : uint8_t {
  kIdle,      // a core that did not start
  kHalted,    // HALT issued (the status register may still hold an error: see ExecResult::ok)
  kError,     // the chip stopped on an error (the status register says which)
  kWatchdog,  // no progress for the watchdog's cycles
  kNoHalt,    // the program ended without HALT
};
// Its name in reports and messages.
inline const char* Name(RunEnd end) {
  switch (end) {
    case RunEnd::kIdle:
      return "idle";
    case RunEnd::kHalted:
      return "halted";
    case RunEnd::kError:
      return "error";
    case RunEnd::kWatchdog:
      return "watchdog";
    case RunEnd::kNoHalt:
      return "no-halt";
  }
  return "?";
}
inline std::ostream& operator<<(std::ostream& o, RunEnd end) { return o << Name(end); }

// How one core's part of a run ended.
struct CoreResult {
  RunEnd state = RunEnd::kIdle;
  hw::Status chip_status = hw::Status::kOk;  // its status register
  uint64_t error_pc = 0;                     // the failing instruction (chip errors)
  uint64_t cycles = 0;                       // the cycle it ended in (0: not started)
  hw::ChipCounters counters;
};

// A run's result. On a chip of several cores the run ends when the last core has, and its
// state is an error on any core, else the watchdog, else a core without halt, else halted
// (docs/timing.md); chip_status, error_pc and message are those of the first core whose
// state is the run's; counters are the sum of the cores' (idle ones included) except
// `cycles`, the run's cycles.
struct ExecResult {
  std::string engine;  // rtl or fast
  RunEnd state = RunEnd::kIdle;
  hw::Status chip_status = hw::Status::kOk;  // the status register
  bool ok = false;                           // halted by HALT with status ok
  std::string message;                       // why it did not end cleanly; empty when ok
  uint64_t error_pc = 0;                     // the failing instruction (chip errors)
  uint64_t cycles = 0;                       // the chip's cycle counter
  hw::ChipCounters counters;
  std::vector<CoreResult> cores;  // each core's, on a chip of several cores (else empty)
  std::vector<uint8_t> host_out;  // empty in timing-only runs

  // Core `core`'s counters (on a chip of one core, the run's).
  const hw::ChipCounters& CountersOf(int core) const {
    return cores.empty() ? counters : cores.at(static_cast<size_t>(core)).counters;
  }
};

struct EngineOptions {
  uint64_t watchdog_cycles = 100000;  // stop a run that makes no progress this long
  bool progress = false;              // a progress bar on stderr for long runs
  bool timing_only = false;           // fast only: counters without values
  // rtl only: a waveform (*.fst or *.vcd) of a window of cycles, counted across all runs.
  std::string trace_path;
  uint64_t trace_start = 0;
  uint64_t trace_end = std::numeric_limits<uint64_t>::max();
  // Both: records every run's instruction timeline (host/engine/timeline.h).
  Timeline* timeline = nullptr;
};

enum class EngineKind { kRtl, kFast };
// "rtl" / "fast" (also how tests print it).
inline std::ostream& operator<<(std::ostream& os, EngineKind k) {
  return os << (k == EngineKind::kRtl ? "rtl" : "fast");
}

}  // namespace tpu::engine
