// The shared chip and engine options (see chip_options.h).
#include "host/cli/chip_options.h"

#include <fmt/format.h>

#include "host/common/errors.h"

namespace tpu::cli {

void AddChipOptions(CLI::App* cmd, ChipOptions* o, bool engine) {
  cmd->add_option("-c,--config", o->config,
                  "preset in configs/ (teach-4, lab-8, small-16, edge-32, tpu-v1) or a .json file")
      ->capture_default_str();
  cmd->add_option("--set", o->sets,
                  "override a config field, e.g. --set host_mem_bytes_per_cycle=4 (repeatable)");
  cmd->add_option("--array", o->array, "array size N, overriding the config's array_dim");
  if (!engine) return;
  cmd->add_option("--engine", o->engine,
                  "rtl (the Verilated RTL: the reference, sizes built in) or fast (the C++ "
                  "model, cycle-exact with the RTL, any size 2 to 512)")
      ->capture_default_str();
  cmd->add_flag("--timing-only", o->timing_only,
                "fast engine: counters and cycles only, no values (for large studies)");
  cmd->add_option("--watchdog", o->watchdog,
                  "stop a run that makes no progress for this many cycles")
      ->capture_default_str();
}

host::TpuConfig ResolveConfig(const ChipOptions& o) {
  host::TpuConfig config = host::LoadConfig(o.config);
  for (const std::string& kv : o.sets) host::ApplyOverride(&config, kv);
  if (o.array && *o.array != config.array_dim) {
    config.array_dim = *o.array;
    config.name += fmt::format(" with --array {}", *o.array);
  }
  config.Validate();
  return config;
}

engine::EngineKind ResolveEngine(const ChipOptions& o) {
  const engine::EngineKind kind = engine::ParseEngineKind(o.engine);
  if (o.timing_only && kind != engine::EngineKind::kFast) {
    throw UsageError("--timing-only is a mode of the fast engine; add --engine fast");
  }
  if (o.watchdog == 0) throw UsageError("--watchdog must be at least 1 cycle");
  return kind;
}

engine::EngineOptions EngineOptionsFrom(const ChipOptions& o) {
  engine::EngineOptions e;
  e.watchdog_cycles = o.watchdog;
  e.timing_only = o.timing_only;
  return e;
}

}  // namespace tpu::cli
