// The seam between what host software does with the chip and how the chip is simulated.
// An engine loads an executable once (each core's program and a map of named memory
// regions, executable.h); each run then writes regions, runs the programs over memories
// that keep what they hold between runs, and reads regions back. A job (exec_job.h: a
// program plus memory images) is the one-step form of that: loaded, run and read at once. Two
// engines implement it:
//
//   rtl   the Verilated RTL (rtl/tpu_top.sv) in the SystemC system of sim/, driven through
//         its TLM-2.0 socket (host/engine/rtl_engine.h): the ground truth for cycles, with
//         waveforms; one model per array size built in, one system per process.
//   fast  the same chip in plain C++ (fast/): any array size from 2 to 512 at run time,
//         any number of engines per process (one per thread), a timing-only mode.
//
// Both give identical results and counters for every program; `tpusim cosim` checks it.
// Everything above this seam (the compiler's runner, gemm, exec, run, compare, sweeps,
// benchmarks) takes a ChipEngine and does not ask which one it is. What a job and its
// result hold is in exec_job.h (data only); this library (tpu_engine) has the interface,
// the fast engine and the timeline, and links no Verilated model: the rtl engine
// (rtl_engine.h) and MakeChipEngine (engine_factory.h) are in tpu_engines.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "contract/tpu_contract.h"
#include "host/config/tpu_config.h"
#include "host/engine/cycle_observer.h"
#include "host/engine/exec_job.h"
#include "host/engine/executable.h"
#include "host/engine/timeline.h"
#include "sim/system/stall_info.h"

namespace tpu::engine {

class ChipEngine {
 public:
  virtual ~ChipEngine() = default;
  virtual std::string Name() const = 0;
  virtual const config::TpuConfig& Config() const = 0;
  // False in timing-only runs: counters only, no output values (host_out stays empty).
  virtual bool ComputesValues() const { return true; }
  // Loads `exe`: its programs run at every Run() until the next Load, its regions are what
  // Write and Read name, and each region's initial contents are written. The memories keep
  // what they hold otherwise. Throws UsageError where a program or a region does not fit
  // the config's cores and memories.
  void Load(Executable exe);
  // Writes `bytes` into region `region` from its first byte; at most the region's size.
  void Write(const std::string& region, const std::vector<uint8_t>& bytes);
  // Region `region` as the memory holds it now (after a run, what the run left there; a
  // timing-only engine computes no values, so there only what was written).
  std::vector<uint8_t> Read(const std::string& region);
  // Runs the loaded programs to their end over the memories as they are. Throws
  // RuntimeError when the simulation itself fails.
  ExecResult Run();
  // One job in one step: loads it (ExecutableOf), runs it, and reads its host range back
  // into host_out (not in timing-only runs); it stays loaded. Throws UsageError when an
  // image does not fit its memory.
  ExecResult Run(const ExecJob& job);
  // Writes what spans runs (the rtl engine's waveform). Throws RuntimeError on failure.
  virtual void Finish() {}
  // Records the instruction timeline of the runs that follow (nullptr: stop recording).
  // On a chip of several cores, core `core`'s timeline (core 0's: GetTimeline()).
  void SetTimeline(Timeline* timeline, int core = 0);
  Timeline* GetTimeline(int core = 0) const {
    return static_cast<size_t>(core) < timelines_.size() ? timelines_[static_cast<size_t>(core)]
                                                         : nullptr;
  }
  // Shows the runs that follow, cycle by cycle, to `observer` too (nullptr: to none): the
  // cycles of core `core` while it runs (on a chip of one core, core 0: the run); EndRun
  // gets the run's cycles.
  void SetObserver(CycleObserver* observer, int core = 0);
  // The observers of core `core` in the next run (its timeline too, where set).
  std::vector<CycleObserver*> Observers(int core = 0) const;

 protected:
  // The engine's part of the above: its memories, and a run of `job`'s programs (its images
  // and read-back range are not the engine's to handle: the memories are written and read
  // apart).
  virtual void WriteMemory(Memory memory, uint64_t addr, const std::vector<uint8_t>& bytes) = 0;
  virtual std::vector<uint8_t> ReadMemory(Memory memory, uint64_t addr, uint64_t bytes) = 0;
  virtual ExecResult RunPrograms(const ExecJob& job) = 0;

  std::vector<Timeline*> timelines_;       // by core; nullptr: none
  std::vector<CycleObserver*> observers_;  // by core; nullptr: none

 private:
  // The loaded executable's map (throws UsageError where none is loaded).
  const Executable& Loaded() const;

  Executable loaded_;  // its name and regions (its programs moved into programs_)
  ExecJob programs_;   // the loaded programs, as RunPrograms takes them
  bool has_loaded_ = false;
};

// Observer k of `observers` shows core k's cycles (ChipEngine::SetObserver), for cores 0 to
// `cores` - 1, while this lives; then those cores have none again.
template <class Observer>
class ScopedCoreObservers {
 public:
  ScopedCoreObservers(ChipEngine& engine, std::vector<Observer>& observers, size_t cores)
      : engine_(engine), cores_(cores) {
    for (size_t k = 0; k < cores_; ++k) engine_.SetObserver(&observers[k], static_cast<int>(k));
  }
  ~ScopedCoreObservers() {
    for (size_t k = 0; k < cores_; ++k) engine_.SetObserver(nullptr, static_cast<int>(k));
  }
  ScopedCoreObservers(const ScopedCoreObservers&) = delete;
  ScopedCoreObservers& operator=(const ScopedCoreObservers&) = delete;

 private:
  ChipEngine& engine_;
  size_t cores_;
};

// An engine's observers for one run, by core: BeginRun with each core's program when made,
// each core's cycles while it runs, EndRun with the run's cycles.
class CoreObservers {
 public:
  CoreObservers(const ChipEngine& engine, const ExecJob& job, int cores);
  bool Empty() const { return empty_; }
  void Cycles(int core, uint64_t first, uint64_t count, const CycleObs& obs) const {
    for (CycleObserver* o : by_core_[static_cast<size_t>(core)]) o->Cycles(first, count, obs);
  }
  void EndRun(const ExecResult& r) const;

 private:
  std::vector<std::vector<CycleObserver*>> by_core_;
  bool empty_ = true;
};

// "rtl" or "fast"; throws UsageError for anything else.
EngineKind ParseEngineKind(const std::string& name);
const char* EngineKindName(EngineKind kind);
// The messages of runs that did not end with halt, the same for both engines.
std::string ErrorMessage(uint64_t pc, uint64_t status);
std::string NoHaltMessage(uint64_t instructions);
using sim::StallInfo;
std::string WatchdogMessage(const StallInfo& stall);

// The longest program a job can hold (the system's program region, sim/system/tpu_system.h).
inline constexpr uint64_t kMaxProgramWords = uint64_t{1} << 20;

// The executable of a job: its programs, and the regions "host image" and "weight image"
// (its images, written when it is loaded) and "outputs" (its read-back range).
Executable ExecutableOf(ExecJob job);

// Checks that the programs, the images and the read-back range fit the config's cores and
// memories (both engines apply the same checks). Throws UsageError naming the config field.
void CheckJobFits(const ExecJob& job, const config::TpuConfig& config);
// Checks that a region lies inside its memory (UsageError naming the region otherwise).
void CheckRegionFits(const Region& region, const config::TpuConfig& config);

// The run's fields from its state `state` and cycles `cycles` (as the engine's chip ended
// it) and its cores' (`r->cores`, filled): ok, chip_status, error_pc and message of the first
// core whose state is the run's, counters summed (exec_job.h says how); messages[c] is core
// c's message for its state. A chip of one core keeps no `cores` (its fields are the core's).
void SummarizeCores(ExecResult* r, RunEnd state, uint64_t cycles,
                    const std::vector<std::string>& messages);

}  // namespace tpu::engine
