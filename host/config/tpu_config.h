// TpuConfig: the one description of the simulated chip. Read from a named preset in
// configs/ (or a JSON file), overridden by command-line flags, validated, echoed in
// every report.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace tpu::config {

struct TpuConfig {
  std::string name;           // preset name, or the file it came from
  std::string description;    // one line for people
  int array_dim = 16;         // N of the N x N systolic array
  int acc_depth_rows = 1024;  // accumulator rows of N int32 values
  double clock_mhz = 700.0;   // used to turn cycles into time in reports
  // The whole chip (tpusim exec): on-chip buffers, as built into the RTL model of this
  // array size (cmake/TpusimRtl.cmake) and checked against it.
  int ub_depth_rows = 16384;  // unified buffer rows of N int8 values
  int weight_fifo_tiles = 4;  // weight FIFO depth in N x N tiles
  int param_sets = 32;        // VPU parameter sets (bias, multiplier, shift per lane)
  // External memories: size, latency (cycles to the first byte) and bandwidth.
  int64_t host_mem_bytes = 16 << 20;
  int host_mem_latency_cycles = 100;
  int host_mem_bytes_per_cycle = 16;
  int64_t weight_mem_bytes = 16 << 20;
  int weight_mem_latency_cycles = 50;
  int weight_mem_bytes_per_cycle = 16;

  // Cycles one N-byte row keeps the host (weight) memory's port busy: ceil(N / bytes per
  // cycle), as the DMA engines request rows (docs/timing.md).
  int64_t HostRowCycles() const {
    return (array_dim + host_mem_bytes_per_cycle - 1) / host_mem_bytes_per_cycle;
  }
  int64_t WeightRowCycles() const {
    return (array_dim + weight_mem_bytes_per_cycle - 1) / weight_mem_bytes_per_cycle;
  }

  // Throws UsageError saying which field is wrong and what would be valid.
  void Validate() const;
  nlohmann::json ToJson() const;
};

// The folder that holds the presets: $TPUSIM_CONFIG_DIR, else the source tree's configs/.
std::string ConfigDir();
// Preset names found in ConfigDir(), sorted.
std::vector<std::string> PresetNames();
// Loads a preset by name ("small-16") or a JSON file by path ("my.json").
// Throws UsageError for an unknown preset (listing the known ones), unreadable or
// malformed JSON, unknown keys or invalid values.
TpuConfig LoadConfig(const std::string& name_or_path);
// A config from a JSON object; `where` names its origin in error messages.
TpuConfig FromJson(const nlohmann::json& j, const std::string& default_name,
                   const std::string& where);
// Applies "key=value" (a JSON value, e.g. host_mem_latency_cycles=200) and validates.
// Throws UsageError for an unknown key, a wrong type or an invalid value.
void ApplyOverride(TpuConfig* config, const std::string& key_value);

}  // namespace tpu::config
