// Loading and validating TpuConfig presets (see tpu_config.h).
#include "host/config/tpu_config.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "host/common/errors.h"

namespace tpu::config {
namespace fs = std::filesystem;

void TpuConfig::Validate() const {
  const std::string where = "config '" + name + "': ";
  if (array_dim < 2 || array_dim > 512) {
    throw UsageError(where + "array_dim " + std::to_string(array_dim) +
                     " is out of range; use 2 to 512 (the RTL: the sizes built in)");
  }
  if (acc_depth_rows < 2 || acc_depth_rows > 65536) {
    throw UsageError(where + "acc_depth_rows " + std::to_string(acc_depth_rows) +
                     " is out of range; use 2 to 65536");
  }
  if (!(clock_mhz > 0.0 && clock_mhz <= 10000.0)) {
    throw UsageError(where + "clock_mhz must be in (0, 10000]");
  }
  auto range = [&](const char* key, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi) {
      throw UsageError(where + key + " " + std::to_string(v) + " is out of range; use " +
                       std::to_string(lo) + " to " + std::to_string(hi));
    }
  };
  range("ub_depth_rows", ub_depth_rows, 2, 1 << 24);
  range("weight_fifo_tiles", weight_fifo_tiles, 1, 64);
  range("param_sets", param_sets, 1, 4096);
  range("host_mem_bytes", host_mem_bytes, 1, int64_t{1} << 30);
  range("host_mem_latency_cycles", host_mem_latency_cycles, 0, 1000000);
  range("host_mem_bytes_per_cycle", host_mem_bytes_per_cycle, 1, 1 << 20);
  range("weight_mem_bytes", weight_mem_bytes, 1, int64_t{1} << 36);  // 64 GiB
  range("weight_mem_latency_cycles", weight_mem_latency_cycles, 0, 1000000);
  range("weight_mem_bytes_per_cycle", weight_mem_bytes_per_cycle, 1, 1 << 20);
}

nlohmann::json TpuConfig::ToJson() const {
  return {{"name", name},
          {"description", description},
          {"array_dim", array_dim},
          {"acc_depth_rows", acc_depth_rows},
          {"clock_mhz", clock_mhz},
          {"ub_depth_rows", ub_depth_rows},
          {"weight_fifo_tiles", weight_fifo_tiles},
          {"param_sets", param_sets},
          {"host_mem_bytes", host_mem_bytes},
          {"host_mem_latency_cycles", host_mem_latency_cycles},
          {"host_mem_bytes_per_cycle", host_mem_bytes_per_cycle},
          {"weight_mem_bytes", weight_mem_bytes},
          {"weight_mem_latency_cycles", weight_mem_latency_cycles},
          {"weight_mem_bytes_per_cycle", weight_mem_bytes_per_cycle}};
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
  return FromJson(j, is_path ? path : name_or_path, path);
}

TpuConfig FromJson(const nlohmann::json& j, const std::string& default_name,
                   const std::string& path) {
  if (!j.is_object()) throw UsageError("config '" + path + "' must be a JSON object");
  // The known keys are exactly the ones a config is written with.
  std::vector<std::string> kKeys;
  const nlohmann::json defaults = TpuConfig().ToJson();
  for (const auto& item : defaults.items()) kKeys.push_back(item.key());
  for (const auto& [key, value] : j.items()) {
    if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end()) {
      std::string known;
      for (const auto& k : kKeys) known += (known.empty() ? "" : ", ") + k;
      throw UsageError("config '" + path + "': unknown key '" + key + "' (known: " + known + ")");
    }
  }
  TpuConfig c;
  c.name = default_name;
  // Each field with its type checked: a fraction or a number beyond the field's type is an
  // error, never a silent truncation (2^32 + 16 is not 16).
  auto get = [&](const char* key, auto* field) {
    using T = std::remove_pointer_t<decltype(field)>;
    if (!j.contains(key)) return;
    const nlohmann::json& v = j[key];
    const auto wrong = [&](const std::string& want) {
      return UsageError("config '" + path + "': '" + key + "' must be " + want + ", not " +
                        v.dump());
    };
    if constexpr (std::is_same_v<T, std::string>) {
      if (!v.is_string()) throw wrong("a string");
      *field = v.get<std::string>();
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!v.is_number()) throw wrong("a number");
      *field = static_cast<T>(v.get<double>());
    } else {
      const bool fits =
          v.is_number_unsigned()
              ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
              : v.is_number_integer() && v.get<int64_t>() >= std::numeric_limits<T>::min() &&
                    v.get<int64_t>() <= std::numeric_limits<T>::max();
      if (!fits)
        throw wrong("an integer of at most " + std::to_string(std::numeric_limits<T>::max()));
      *field = static_cast<T>(v.get<int64_t>());
    }
  };
  get("name", &c.name);
  get("description", &c.description);
  get("array_dim", &c.array_dim);
  get("acc_depth_rows", &c.acc_depth_rows);
  get("clock_mhz", &c.clock_mhz);
  get("ub_depth_rows", &c.ub_depth_rows);
  get("weight_fifo_tiles", &c.weight_fifo_tiles);
  get("param_sets", &c.param_sets);
  get("host_mem_bytes", &c.host_mem_bytes);
  get("host_mem_latency_cycles", &c.host_mem_latency_cycles);
  get("host_mem_bytes_per_cycle", &c.host_mem_bytes_per_cycle);
  get("weight_mem_bytes", &c.weight_mem_bytes);
  get("weight_mem_latency_cycles", &c.weight_mem_latency_cycles);
  get("weight_mem_bytes_per_cycle", &c.weight_mem_bytes_per_cycle);
  c.Validate();
  return c;
}

void ApplyOverride(TpuConfig* config, const std::string& key_value) {
  const size_t eq = key_value.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw UsageError("--set '" + key_value +
                     "' must be KEY=VALUE, e.g. host_mem_latency_cycles=200");
  }
  const std::string key = key_value.substr(0, eq);
  const std::string text = key_value.substr(eq + 1);
  nlohmann::json j = config->ToJson();
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    value = text;  // a bare word: a string field such as name or description
  }
  const std::string name = config->name;
  j[key] = value;
  *config = FromJson(j, name, "--set " + key_value);
}

}  // namespace tpu::config
