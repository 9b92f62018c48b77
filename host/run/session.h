// A chip set up for a run: the config, the engine it names, with its waveform window and
// instruction timeline, and what a finished run leaves behind (the waveform's GTKWave
// layouts, the timeline file). The CLI fills a SessionSpec from its options; the session
// speaks of fields and files only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"
#include "host/engine/engine_factory.h"
#include "host/engine/timeline.h"

namespace tpu::run {

struct SessionSpec {
  config::TpuConfig config;
  engine::EngineKind engine = engine::EngineKind::kRtl;
  engine::EngineOptions options;  // its trace_path is the waveform ("": none)
  std::string timeline_path;      // the instruction timeline to write ("": none)
  std::string command_line;       // how the run was started, noted in the waveform's layouts
  bool quiet = false;             // no notes on stderr about the files written
};

// Finish() closes the waveform and writes the timeline (a failed run's are the most useful
// ones, so callers finish before they report).
class ChipSession {
 public:
  explicit ChipSession(const SessionSpec& spec);
  const config::TpuConfig& config() const { return spec_.config; }
  engine::ChipEngine& engine() { return *engine_; }
  void Finish();

 private:
  SessionSpec spec_;
  std::unique_ptr<engine::Timeline> timeline_;                      // core 0's
  std::vector<std::unique_ptr<engine::Timeline>> other_timelines_;  // cores 1, 2, ...
  std::unique_ptr<engine::ChipEngine> engine_;
};

// Writes the GTKWave layouts for a waveform file beside it (the whole chip's with `chip`,
// else the matrix subsystem's) and, unless quiet, says where; a layout that cannot be
// written is a warning, the waveform stays.
void WriteTraceLayouts(const std::string& trace_path, bool chip, const std::string& command_line,
                       bool quiet);

}  // namespace tpu::run
