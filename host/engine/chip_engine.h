// The seam between what host software does with the chip and how the chip is simulated.
// A job is a program plus memory images; running it gives the status, every counter and
// the host memory read back. Two engines implement it:
//
//   rtl   the Verilated RTL (rtl/tpu_top.sv) in the SystemC system of sim/, driven through
//         its TLM-2.0 socket (host/driver/tpu_driver.h): the ground truth for cycles, with
//         waveforms; one model per array size built in, one system per process.
//   fast  the same chip in plain C++ (fast/): any array size from 2 to 512 at run time,
//         any number of engines per process (one per thread), a timing-only mode.
//
// Both give identical results and counters for every program; `tpusim cosim` checks it.
// Everything above this seam (the compiler's runner, gemm, exec, run, compare, sweeps,
// benchmarks) takes a ChipEngine and does not ask which one it is.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "contract/tpu_contract.h"
#include "host/config/tpu_config.h"
#include "host/engine/cycle_observer.h"
#include "host/engine/timeline.h"
#include "host/isa/isa.h"
#include "sim/stall_info.h"

namespace tpu::engine {

struct ExecJob {
  std::string name;  // for people and timelines: the program file, the layer, ...
  isa::Program program;
  std::vector<uint8_t> host_image;    // written to host memory at address 0
  std::vector<uint8_t> weight_image;  // written to weight memory at weight_image_addr
  uint64_t weight_image_addr = 0;
  uint64_t host_out_addr = 0;  // host memory read back after the run
  uint64_t host_out_bytes = 0;
};

struct ExecResult {
  std::string engine;       // rtl or fast
  std::string state;        // halted, error, watchdog, no-halt
  std::string chip_status;  // the status register: ok, invalid-opcode, ...
  bool ok = false;          // halted by HALT with status ok
  std::string message;      // why it did not end cleanly; empty when ok
  uint64_t error_pc = 0;    // the failing instruction (chip errors)
  uint64_t cycles = 0;      // the chip's cycle counter
  hw::ChipCounters counters;
  std::vector<uint8_t> host_out;  // empty in timing-only runs
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

class ChipEngine {
 public:
  virtual ~ChipEngine() = default;
  virtual std::string Name() const = 0;
  virtual const config::TpuConfig& Config() const = 0;
  // False in timing-only runs: counters only, no output values (host_out stays empty).
  virtual bool ComputesValues() const { return true; }
  // Runs one job to its end. Throws UsageError when an image does not fit its memory,
  // RuntimeError when the simulation itself fails.
  virtual ExecResult Run(const ExecJob& job) = 0;
  // Writes what spans runs (the rtl engine's waveform). Throws RuntimeError on failure.
  virtual void Finish() {}
  // Records the instruction timeline of the runs that follow (nullptr: stop recording).
  void SetTimeline(Timeline* timeline) { timeline_ = timeline; }
  Timeline* GetTimeline() const { return timeline_; }
  // Shows the runs that follow, cycle by cycle, to `observer` too (nullptr: to none).
  void SetObserver(CycleObserver* observer) { observer_ = observer; }

 protected:
  // The observers of the next run (the timeline and the observer, where set).
  std::vector<CycleObserver*> Observers() const {
    std::vector<CycleObserver*> v;
    if (timeline_) v.push_back(timeline_);
    if (observer_) v.push_back(observer_);
    return v;
  }

  Timeline* timeline_ = nullptr;
  CycleObserver* observer_ = nullptr;
};

enum class EngineKind { kRtl, kFast };
// "rtl" / "fast" (also how tests print it).
inline std::ostream& operator<<(std::ostream& os, EngineKind k) {
  return os << (k == EngineKind::kRtl ? "rtl" : "fast");
}

// "rtl" or "fast"; throws UsageError for anything else.
EngineKind ParseEngineKind(const std::string& name);
const char* EngineKindName(EngineKind kind);
// The array sizes whose whole-chip RTL is in this build.
std::vector<int> RtlBuiltDims();
// Throws UsageError when the engine cannot run the config (an RTL size not built: the
// message names --engine fast and how to build it) or an option does not apply to it.
std::unique_ptr<ChipEngine> MakeChipEngine(EngineKind kind, const config::TpuConfig& config,
                                           const EngineOptions& options);

// The messages of runs that did not end with halt, the same for both engines.
std::string ErrorMessage(uint64_t pc, uint64_t status);
std::string NoHaltMessage(uint64_t instructions);
using sim::StallInfo;
std::string WatchdogMessage(const StallInfo& stall);

// The longest program a job can hold (the system's program region, sim/tpu_system.h).
inline constexpr uint64_t kMaxProgramWords = uint64_t{1} << 20;

// Checks that the program, the images and the read-back range fit the config's memories (both
// engines apply the same checks). Throws UsageError naming the config field.
void CheckJobFits(const ExecJob& job, const config::TpuConfig& config);

}  // namespace tpu::engine
