// TpuConfig: the one description of the simulated chip. Read from a named preset in
// configs/ (or a JSON file), overridden by command-line flags, validated, echoed in
// every report.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace tpu::host {

struct TpuConfig {
  std::string name;           // preset name, or the file it came from
  std::string description;    // one line for people
  int array_dim = 16;         // N of the N x N systolic array
  int acc_depth_rows = 1024;  // accumulator rows of N int32 values
  double clock_mhz = 700.0;   // used to turn cycles into time in reports

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

}  // namespace tpu::host
