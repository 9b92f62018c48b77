// TpuConfig: the one description of the simulated chip. Read from a named preset in
// configs/ (or a JSON file), overridden by command-line flags, validated, echoed in
// every report.
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "contract/memory_channel.h"
#include "contract/tpu_contract.h"

namespace tpu::config {

// The chip's numeric fields (array size, buffer depths, clock, memories) are
// hw::ChipParams, generated from contract/tpu_contract.toml with their ranges, units and
// docs (docs/architecture.md, "Configuration and the models built"); a config adds its name.
struct TpuConfig : hw::ChipParams {
  std::string name;         // preset name, or the file it came from
  std::string description;  // one line for people

  // Cycles per row (N operands: hw::RowBytes) of the host (weight) memory while the DMA
  // engines stream rows: bytes / bytes per cycle, at least one (contract/memory_channel.h,
  // docs/timing.md).
  double HostRowCycles() const {
    return hw::MemoryChannel::RowCycles(static_cast<uint64_t>(hw::RowBytes(*this)),
                                        static_cast<uint64_t>(host_mem_bytes_per_cycle));
  }
  double WeightRowCycles() const {
    return hw::MemoryChannel::RowCycles(static_cast<uint64_t>(hw::RowBytes(*this)),
                                        static_cast<uint64_t>(weight_mem_bytes_per_cycle));
  }
  // ... of a core's weight DMAs together, one per matrix unit and each at most a row a
  // cycle, sharing the channel: at least 1 / mxus_per_core, and the channel's time for a row
  // (docs/timing.md, "Chips of several cores"). With one unit, WeightRowCycles.
  double CoreWeightRowCycles() const {
    return std::max(
        1.0 / static_cast<double>(std::max(1, mxus_per_core)),
        static_cast<double>(hw::RowBytes(*this)) / static_cast<double>(weight_mem_bytes_per_cycle));
  }

  // The cycles the vector unit is busy with one `vector op=... rows=R`: a group of
  // vector_sublanes rows a cycle, then the operation's latency and the cycle that writes the
  // last group (docs/timing.md, "The vector unit").
  double VectorCycles(hw::VectorOp op, int64_t rows) const {
    return static_cast<double>(VectorGroups(rows) + hw::Info(op).latency + 1);
  }
  // The groups of vector_sublanes rows that `rows` rows make (the last what is left).
  int64_t VectorGroups(int64_t rows) const {
    const int64_t s = std::max(1, vector_sublanes);
    return (rows + s - 1) / s;
  }

  // Throws UsageError saying which field is wrong and what would be valid.
  void Validate() const;
  nlohmann::json ToJson() const;
};

// A field's value as a config file writes it: the number, or an enum field's name
// ("bf16").
template <class T>
std::string FieldText(const hw::ParamInfo& info, T value) {
  if constexpr (std::is_enum_v<T>) {
    return info.names[static_cast<int>(value)];
  } else {
    return std::to_string(value);
  }
}

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
// The chip's shape for reports: "128 x 128, bf16", "2 matrix units of 4 x 4", "2 cores of 2
// matrix units of 128 x 128, bf16" (", bf16" only where the format is not int8).
std::string ShapeText(const TpuConfig& config);
// Applies "key=value" (a JSON value, e.g. host_mem_latency_cycles=200) and validates.
// Throws UsageError for an unknown key, a wrong type or an invalid value.
void ApplyOverride(TpuConfig* config, const std::string& key_value);

}  // namespace tpu::config
