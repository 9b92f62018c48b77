// The fast engine behind the ChipEngine seam (see fast_engine.h).
#include "host/engine/fast_engine.h"

#include <cstring>
#include <stdexcept>

#include "host/common/errors.h"
#include "host/common/progress_bar.h"
#include "host/engine/timeline.h"

namespace tpu::engine {

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

ExecResult FastEngine::Run(const ExecJob& job) {
  CheckJobFits(job, config_);
  if (!job.host_image.empty()) {
    std::memcpy(chip_->HostMemory(), job.host_image.data(), job.host_image.size());
  }
  if (!job.weight_image.empty()) {
    std::memcpy(chip_->WeightMemory() + job.weight_image_addr, job.weight_image.data(),
                job.weight_image.size());
  }
  fast::RunOptions ro;
  ro.watchdog_cycles = options_.watchdog_cycles;
  ro.timing_only = options_.timing_only;
  const std::vector<CycleObserver*> observers = Observers();
  for (CycleObserver* o : observers) o->BeginRun(job.program, job.name);
  if (!observers.empty()) {
    ro.on_cycles = [&observers](int, uint64_t first, uint64_t count, uint8_t issue, uint8_t busy,
                                uint8_t obs) {
      for (CycleObserver* o : observers) o->Cycles(first, count, {issue, busy, obs});
    };
  }
  ProgressBar bar("exec", options_.progress);
  if (options_.progress) ro.progress = [&bar](double f) { bar.Update(f); };
  const auto* words = reinterpret_cast<const uint8_t*>(job.program.words.data());
  const fast::RunResult f = chip_->Run(words, job.program.words.size(), ro);
  bar.Finish();

  ExecResult r;
  r.engine = "fast";
  const auto status = static_cast<uint64_t>(f.status);
  r.chip_status = hw::kStatusNames[status];
  r.error_pc = f.error_pc;
  r.counters = f.counters;
  r.cycles = f.counters.cycles;
  switch (f.end) {
    case fast::RunEnd::kHalted:
      r.state = "halted";
      r.ok = true;
      break;
    case fast::RunEnd::kError:
      r.state = "error";
      r.message = ErrorMessage(f.error_pc, status);
      break;
    case fast::RunEnd::kWatchdog:
      r.state = "watchdog";
      r.message = WatchdogMessage(f.stall);
      break;
    case fast::RunEnd::kNoHalt:
      r.state = "no-halt";
      r.message = NoHaltMessage(job.program.words.size());
      break;
  }
  for (CycleObserver* o : observers) o->EndRun(r.cycles);
  if (job.host_out_bytes > 0 && !options_.timing_only) {
    const uint8_t* src = chip_->HostMemory() + job.host_out_addr;
    r.host_out.assign(src, src + job.host_out_bytes);
  }
  return r;
}

}  // namespace tpu::engine
