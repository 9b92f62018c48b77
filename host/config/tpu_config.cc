// Loading and validating TpuConfig presets (see tpu_config.h).
#include "host/config/tpu_config.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "host/common/errors.h"

namespace tpu::config {
namespace fs = std::filesystem;

namespace {

// A number as people write it: an integer without ".0".
std::string Number(double v) {
  if (std::abs(v) < 1e15 && v == std::floor(v)) return std::to_string(static_cast<int64_t>(v));
  return nlohmann::json(v).dump();
}

}  // namespace

void TpuConfig::Validate() const {
  hw::ForEachParam(*this, [&](const hw::ParamInfo& info, auto value) {
    if (hw::InRange(info, static_cast<double>(value))) return;
    const std::string range =
        info.lo_open ? "more than " + Number(info.lo) + " and at most " : Number(info.lo) + " to ";
    if (info.names)
      throw UsageError("config '" + name + "': " + info.name + " is not a known value");
    throw UsageError("config '" + name + "': " + info.name + " " +
                     Number(static_cast<double>(value)) + " is out of range; use " + range +
                     Number(info.hi) + " " + info.unit + " (" + info.name + ": " + info.doc + ")");
  });
  // Each core has a weight-memory port per matrix unit and one for its host DMA
  // (read_hbm); the memory serves at most 64 (contract/memory_channel.h, PortTurns).
  if (cores * (mxus_per_core + 1) > 64)
    throw UsageError("config '" + name + "': " + std::to_string(cores) + " cores of " +
                     std::to_string(mxus_per_core) + " matrix units need " +
                     std::to_string(cores * (mxus_per_core + 1)) +
                     " weight-memory ports (a matrix unit's each and the host DMA's), more "
                     "than the 64 the memory serves; use fewer cores or matrix units per core");
}

nlohmann::json TpuConfig::ToJson() const {
  nlohmann::json j = {{"name", name}, {"description", description}};
  hw::ForEachParam(*this, [&](const hw::ParamInfo& info, auto value) {
    if constexpr (std::is_enum_v<decltype(value)>) {
      j[info.name] = FieldText(info, value);
    } else {
      j[info.name] = value;
    }
  });
  return j;
}

std::string ConfigDir() {
  if (const char* env = std::getenv("TPUSIM_CONFIG_DIR"); env && *env) return env;
  return TPUSIM_SOURCE_DIR "/configs";
}

std::string ShapeText(const TpuConfig& c) {
  std::string s;
  if (c.cores > 1) s += std::to_string(c.cores) + " cores of ";
  if (c.mxus_per_core > 1) s += std::to_string(c.mxus_per_core) + " matrix units of ";
  s += std::to_string(c.array_dim) + " x " + std::to_string(c.array_dim);
  if (c.dtype != hw::Dtype::kInt8) s += ", " + std::string(hw::Name(c.dtype));
  return s;
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
  auto get = [&](const char* key, auto* field, const char* const* names = nullptr,
                 int num_names = 0) {
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
    } else if constexpr (std::is_enum_v<T>) {
      std::string one_of;
      for (int i = 0; i < num_names; ++i) {
        if (v.is_string() && v.get<std::string>() == names[i]) {
          *field = static_cast<T>(i);
          return;
        }
        one_of += std::string(i ? (i + 1 == num_names ? " or " : ", ") : "") + names[i];
      }
      throw wrong(one_of);
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
  hw::ForEachParam(c, [&](const hw::ParamInfo& info, auto& field) {
    // (The names of an enum field: hi + 1 of them; a numeric field has none.)
    get(info.name, &field, info.names, info.names ? static_cast<int>(info.hi) + 1 : 0);
  });
  c.Validate();
  return c;
}

void ApplyOverride(TpuConfig* config, const std::string& key_value) {
  const size_t eq = key_value.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw UsageError(Field("set") + " '" + key_value +
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
  *config = FromJson(j, name, Field("set") + " " + key_value);
}

}  // namespace tpu::config
