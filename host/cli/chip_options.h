// The options every command that runs the chip shares, declared once so the commands
// cannot drift: which chip (--config, --set, --array) and which engine (--engine,
// --timing-only, --watchdog).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"

namespace tpu::cli {

struct ChipOptions {
  std::string config = "small-16";
  std::vector<std::string> sets;
  std::optional<int> array;
  std::string engine = "rtl";
  bool timing_only = false;
  uint64_t watchdog = 100000;
};

// --config/-c, --set, --array; with `engine`, also --engine, --timing-only, --watchdog.
void AddChipOptions(CLI::App* cmd, ChipOptions* o, bool engine = true);
// The preset or file, then every --set, then --array; validated (UsageError).
host::TpuConfig ResolveConfig(const ChipOptions& o);
// The engine's kind and options from the flags (UsageError for a bad combination).
engine::EngineKind ResolveEngine(const ChipOptions& o);
engine::EngineOptions EngineOptionsFrom(const ChipOptions& o);

}  // namespace tpu::cli
