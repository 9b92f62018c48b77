// Loading and validating TpuConfig presets (see tpu_config.h).
#include "host/config/tpu_config.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "host/common/errors.h"

namespace tpu::host {
namespace fs = std::filesystem;

void TpuConfig::Validate() const {
  const std::string where = "config '" + name + "': ";
  if (array_dim < 2 || array_dim > 256) {
    throw UsageError(where + "array_dim " + std::to_string(array_dim) +
                     " is out of range; use 2 to 256");
  }
  if (acc_depth_rows < 2 || acc_depth_rows > 65536) {
    throw UsageError(where + "acc_depth_rows " + std::to_string(acc_depth_rows) +
                     " is out of range; use 2 to 65536");
  }
  if (!(clock_mhz > 0.0 && clock_mhz <= 10000.0)) {
    throw UsageError(where + "clock_mhz must be in (0, 10000]");
  }
}

nlohmann::json TpuConfig::ToJson() const {
  return {{"name", name},
          {"description", description},
          {"array_dim", array_dim},
          {"acc_depth_rows", acc_depth_rows},
          {"clock_mhz", clock_mhz}};
}

std::string ConfigDir() {
  if (const char* env = std::getenv("TPUSIM_CONFIG_DIR"); env && *env) return env;
  return TPUSIM_SOURCE_DIR "/configs";
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(ConfigDir(), ec)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TpuConfig LoadConfig(const std::string& name_or_path) {
  const bool is_path =
      name_or_path.find('/') != std::string::npos ||
      (name_or_path.size() > 5 && name_or_path.compare(name_or_path.size() - 5, 5, ".json") == 0);
  const std::string path = is_path ? name_or_path : ConfigDir() + "/" + name_or_path + ".json";
  std::ifstream in(path);
  if (!in) {
    if (is_path) throw UsageError("config file '" + path + "' cannot be opened");
    std::string known;
    for (const auto& n : PresetNames()) known += (known.empty() ? "" : ", ") + n;
    throw UsageError("unknown preset '" + name_or_path +
                     "' (known: " + (known.empty() ? "none found in " + ConfigDir() : known) +
                     "); or pass a path to a .json config");
  }
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError("config '" + path + "' is not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw UsageError("config '" + path + "' must be a JSON object");
  static const std::set<std::string> kKeys = {"name", "description", "array_dim", "acc_depth_rows",
                                              "clock_mhz"};
  for (const auto& [key, value] : j.items()) {
    if (!kKeys.count(key)) {
      throw UsageError("config '" + path + "': unknown key '" + key +
                       "' (known: name, description, array_dim, acc_depth_rows, clock_mhz)");
    }
  }
  TpuConfig c;
  c.name = is_path ? path : name_or_path;
  try {
    c.name = j.value("name", c.name);
    c.description = j.value("description", c.description);
    c.array_dim = j.value("array_dim", c.array_dim);
    c.acc_depth_rows = j.value("acc_depth_rows", c.acc_depth_rows);
    c.clock_mhz = j.value("clock_mhz", c.clock_mhz);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError("config '" + path + "': a field has the wrong type: " + e.what());
  }
  c.Validate();
  return c;
}

}  // namespace tpu::host
