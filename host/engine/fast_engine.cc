// The fast engine behind the ChipEngine seam (see fast_engine.h).
#include "host/engine/fast_engine.h"

#include <cstring>
#include <stdexcept>

#include "host/common/errors.h"
#include "host/common/progress_bar.h"
#include "host/engine/timeline.h"

namespace tpu::engine {
namespace {

// A run's end as the engine seam names it.
RunEnd EndOf(fast::RunEnd end) {
  switch (end) {
    case fast::RunEnd::kHalted:
      return RunEnd::kHalted;
    case fast::RunEnd::kError:
      return RunEnd::kError;
    case fast::RunEnd::kWatchdog:
      return RunEnd::kWatchdog;
    case fast::RunEnd::kNoHalt:
      return RunEnd::kNoHalt;
  }
  return RunEnd::kError;
}

// How a core ended, and the message for it (as the rtl engine words it).
CoreResult ToCoreResult(const fast::RunResult& f, bool started, const isa::Program& program,
                        std::string* message) {
  CoreResult c;
  const auto status = static_cast<uint64_t>(f.status);
  c.state = started ? EndOf(f.end) : RunEnd::kIdle;
  c.chip_status = f.status;
  c.error_pc = f.error_pc;
  c.counters = f.counters;
  c.cycles = f.cycles;
  message->clear();
  if (!started) return c;
  if (f.end == fast::RunEnd::kError) *message = ErrorMessage(f.error_pc, status);
  if (f.end == fast::RunEnd::kWatchdog) *message = WatchdogMessage(f.stall);
  if (f.end == fast::RunEnd::kNoHalt) *message = NoHaltMessage(program.words.size());
  return c;
}

}  // namespace

fast::ChipParams FastEngine::ParamsFor(const config::TpuConfig& c) {
  fast::ChipParams p;
  static_cast<hw::ChipParams&>(p) = c;
  return p;
}

FastEngine::FastEngine(const config::TpuConfig& config, const EngineOptions& options)
    : config_(config), options_(options) {
  SetTimeline(options.timeline);
  config_.Validate();
  if (!options.trace_path.empty()) {
    throw UsageError("waveforms (" + Field("trace") + ") come from the RTL; run with " +
                     Field("engine") + " rtl, or use " + Field("timeline") +
                     " for the fast engine's instruction timeline");
  }
  try {
    chip_ = std::make_unique<fast::FastChip>(ParamsFor(config_));
  } catch (const std::invalid_argument& e) {
    throw UsageError("config '" + config_.name + "': " + e.what());
  }
}

void FastEngine::WriteMemory(Memory memory, uint64_t addr, const std::vector<uint8_t>& bytes) {
  std::memcpy(MemoryAt(memory, addr), bytes.data(), bytes.size());
}

std::vector<uint8_t> FastEngine::ReadMemory(Memory memory, uint64_t addr, uint64_t bytes) {
  const uint8_t* from = MemoryAt(memory, addr);
  return std::vector<uint8_t>(from, from + bytes);
}

ExecResult FastEngine::RunPrograms(const ExecJob& job) {
  fast::RunOptions ro;
  ro.watchdog_cycles = options_.watchdog_cycles;
  ro.timing_only = options_.timing_only;
  const CoreObservers observers(*this, job, config_.cores);
  if (!observers.Empty()) {
    ro.on_cycles = [&observers](int core, uint64_t first, uint64_t count, uint8_t issue,
                                uint8_t busy, uint8_t obs, uint8_t mxus) {
      observers.Cycles(core, first, count, {issue, busy, obs, mxus});
    };
  }
  ProgressBar bar("exec", options_.progress);
  if (options_.progress) ro.progress = [&bar](double f) { bar.Update(f); };
  std::vector<fast::CoreProgram> programs;
  for (int c = 0; c < config_.cores; ++c) {
    const isa::Program& p = job.ProgramOf(c);
    programs.push_back({reinterpret_cast<const uint8_t*>(p.words.data()), p.words.size()});
  }
  const fast::ChipRunResult f = chip_->RunCores(programs, ro);
  bar.Finish();

  ExecResult r;
  r.engine = "fast";
  std::vector<std::string> messages(programs.size());
  for (size_t c = 0; c < programs.size(); ++c) {
    const bool started = c == 0 || programs[c].count > 0;
    r.cores.push_back(
        ToCoreResult(f.cores[c], started, job.ProgramOf(static_cast<int>(c)), &messages[c]));
  }
  SummarizeCores(&r, EndOf(f.end), programs.size() == 1 ? f.cores[0].counters.cycles : f.cycles,
                 messages);
  observers.EndRun(r);
  return r;
}

}  // namespace tpu::engine
