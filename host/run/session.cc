// A chip set up for a run (see session.h).
#include "host/run/session.h"

#include <iostream>

#include "sim/wave/gtkw_layout.h"

namespace tpu::run {
namespace {

// Only a bf16 chip has the float32 vector unit (docs/isa.md).
bool HasVectorUnit(const config::TpuConfig& c) { return c.dtype == hw::Dtype::kBf16; }

}  // namespace

ChipSession::ChipSession(const SessionSpec& spec) : spec_(spec) {
  engine::EngineOptions e = spec_.options;
  if (!spec_.timeline_path.empty()) {
    timeline_ = std::make_unique<engine::Timeline>(
        spec_.config.clock_mhz, spec_.config.mxus_per_core, HasVectorUnit(spec_.config));
    e.timeline = timeline_.get();
  }
  engine_ = engine::MakeChipEngine(spec_.engine, spec_.config, e);
  // A chip of several cores: a timeline per core, written as one file (a process per core).
  for (int c = 1; timeline_ && c < spec_.config.cores; ++c) {
    other_timelines_.push_back(std::make_unique<engine::Timeline>(
        spec_.config.clock_mhz, spec_.config.mxus_per_core, HasVectorUnit(spec_.config)));
    engine_->SetTimeline(other_timelines_.back().get(), c);
  }
}

void ChipSession::Finish() {
  engine_->Finish();
  const std::string& wave = spec_.options.trace_path;
  if (!wave.empty()) WriteTraceLayouts(wave, /*chip=*/true, spec_.command_line, spec_.quiet);
  if (timeline_) {
    timeline_->Note("engine", engine_->Name());
    timeline_->Note("config", spec_.config.ToJson());
    std::vector<const engine::Timeline*> others;
    for (const auto& t : other_timelines_) others.push_back(t.get());
    timeline_->Write(spec_.timeline_path, others);
  }
}

void WriteTraceLayouts(const std::string& trace_path, bool chip, const std::string& command_line,
                       bool quiet) {
  try {
    const auto written = sim::WriteLayoutsForTrace(
        trace_path, chip ? sim::TraceKind::kChip : sim::TraceKind::kMxu, command_line);
    if (quiet) return;
    std::string list;
    for (const auto& p : written) list += (list.empty() ? "" : ", ") + p;
    std::cerr << "tpusim: wrote " << trace_path << " and its GTKWave layout"
              << (written.size() > 1 ? "s " : " ") << list << " (open with: gtkwave " << trace_path
              << " " << written.front() << ")\n";
  } catch (const std::exception& e) {
    std::cerr << "tpusim: warning: wrote " << trace_path
              << " but no GTKWave layout for it: " << e.what() << "\n";
  }
}

}  // namespace tpu::run
