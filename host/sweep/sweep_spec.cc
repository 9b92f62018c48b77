// Reading a sweep spec and expanding its grid (see sweep_spec.h, docs/sweeps.md).
#include "host/sweep/sweep_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "host/common/errors.h"

namespace tpu::sweep {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

// The most points one spec may ask for: a typo in a range should not start a
// billion-point sweep.
constexpr int64_t kMaxPoints = 1000000;

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// The config's own fields that an axis or `set` may name.
std::vector<std::string> ConfigFields() {
  std::vector<std::string> out;
  const nlohmann::json fields = config::TpuConfig{}.ToJson();
  for (const auto& [k, v] : fields.items()) {
    if (k != "name" && k != "description") out.push_back(k);
  }
  return out;
}

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// A path in the spec, relative to the spec's folder, as one absolute path whatever folder
// the sweep runs from and however its spec was named: a point's key holds it, and
// `tpusim plot` (which finds the spec by its absolute path) must find the same keys.
std::string SpecRelative(const std::string& spec_path, const std::string& p) {
  if (p.empty()) return p;
  std::error_code ec;
  const fs::path joined = fs::absolute(fs::path(spec_path).parent_path() / p, ec);
  const fs::path canonical = fs::weakly_canonical(joined, ec);
  return (ec ? joined.lexically_normal() : canonical).string();
}

// An axis's values: a list, or {"from", "to", and "step" or "times"} of integers.
std::vector<nlohmann::json> AxisValues(const std::string& where, const ojson& v) {
  std::vector<nlohmann::json> out;
  if (v.is_array()) {
    for (const auto& x : v) out.push_back(nlohmann::json(x));
  } else if (v.is_object()) {
    for (const auto& [k, x] : v.items()) {
      if (k != "from" && k != "to" && k != "step" && k != "times") {
        throw UsageError(fmt::format(
            "{}: unknown key '{}' in a range (use from, to, and step or times)", where, k));
      }
    }
    auto get = [&](const char* k) -> int64_t {
      if (!v.contains(k)) return 0;
      if (!v[k].is_number_integer()) {
        throw UsageError(fmt::format("{}: '{}' must be an integer", where, k));
      }
      return v[k].get<int64_t>();
    };
    if (!v.contains("from") || !v.contains("to") || v.contains("step") == v.contains("times")) {
      throw UsageError(
          fmt::format("{}: a range needs from, to and one of step (add) or times (multiply), e.g. "
                      "{{\"from\": 4, \"to\": 256, \"times\": 2}}",
                      where));
    }
    const int64_t from = get("from"), to = get("to"), step = get("step"), times = get("times");
    if (to < from)
      throw UsageError(fmt::format("{}: 'to' ({}) is below 'from' ({})", where, to, from));
    if (v.contains("step") && step < 1) {
      throw UsageError(fmt::format("{}: 'step' must be at least 1", where));
    }
    if (v.contains("times") && (times < 2 || from < 1)) {
      throw UsageError(fmt::format("{}: 'times' must be at least 2 and 'from' at least 1", where));
    }
    for (int64_t x = from; x <= to; x = step ? x + step : x * times) {
      out.push_back(x);
      if (static_cast<int64_t>(out.size()) > kMaxPoints) {
        throw UsageError(fmt::format("{}: more than {} values", where, kMaxPoints));
      }
    }
  } else {
    throw UsageError(
        fmt::format("{}: an axis is a list of values or a range object, e.g. [4, 8, 16] or "
                    "{{\"from\": 4, \"to\": 256, \"times\": 2}}",
                    where));
  }
  if (out.empty()) throw UsageError(fmt::format("{}: the axis has no values", where));
  return out;
}

// Sets one run setting or config field of `job` (config fields collect in `sets`).
void ApplySetting(const std::string& spec_path, const std::string& key, const nlohmann::json& v,
                  PointJob* job, std::vector<std::pair<std::string, nlohmann::json>>* sets,
                  std::string* config_name) {
  auto str = [&]() {
    if (!v.is_string())
      throw UsageError(fmt::format("'{}' must be a string, not {}", key, v.dump()));
    return v.get<std::string>();
  };
  auto integer = [&](int64_t lo, int64_t hi) {
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
      throw UsageError(
          fmt::format("'{}' must be an integer from {} to {}, not {}", key, lo, hi, v.dump()));
    }
    return v.get<int64_t>();
  };
  if (key == "config") {
    *config_name = str();
    const std::string rel = SpecRelative(spec_path, *config_name);
    if (fs::exists(rel)) *config_name = rel;
  } else if (key == "model") {
    job->model = SpecRelative(spec_path, str());
  } else if (key == "arch") {
    job->arch = str();
  } else if (key == "dataset") {
    job->dataset = str();
    if (job->dataset != "mnist") {
      throw UsageError(fmt::format("unknown dataset '{}' (known: mnist)", job->dataset));
    }
  } else if (key == "data") {
    job->data = SpecRelative(spec_path, str());
  } else if (key == "images") {
    job->images = integer(1, job->command == "train" ? 60000 : 10000);
  } else if (key == "batch") {
    job->batch = static_cast<int>(integer(1, 1 << 20));
  } else if (key == "engine") {
    job->engine = str();
    if (job->engine != "fast" && job->engine != "rtl") {
      throw UsageError(fmt::format("unknown engine '{}' (known: fast, rtl)", job->engine));
    }
  } else if (key == "timing_only") {
    if (!v.is_boolean()) throw UsageError("'timing_only' must be true or false");
    job->timing_only = v.get<bool>();
  } else if (key == "energy") {
    job->energy = SpecRelative(spec_path, str());
  } else if (key == "inputs") {
    job->inputs = SpecRelative(spec_path, str());
  } else if (key == "synthetic") {
    job->synthetic = integer(1, 1 << 20);
  } else if (key == "seed") {
    job->seed = static_cast<uint64_t>(integer(0, int64_t{1} << 53));
  } else if (key == "optimizer") {
    job->optimizer = str();
    if (job->optimizer != "adam" && job->optimizer != "sgd") {
      throw UsageError(fmt::format("unknown optimizer '{}' (known: adam, sgd)", job->optimizer));
    }
  } else if (key == "shard") {
    job->shard = str();
    int64_t i = -1, k = 0;
    char slash = 0, rest = 0;
    if (std::sscanf(job->shard.c_str(), "%ld%c%ld%c", &i, &slash, &k, &rest) != 3 || slash != '/' ||
        k < 1 || i < 0 || i >= k) {
      throw UsageError(fmt::format("'shard' must be \"I/K\" with 0 <= I < K, not {}", v.dump()));
    }
  } else {
    sets->emplace_back(key, v);
  }
}

// What `tpusim train --config` would refuse at once, refused before the sweep starts.
void CheckTrainPoint(const PointJob& job) {
  if (job.config.dtype != hw::Dtype::kBf16) {
    throw UsageError(
        fmt::format("config '{}' is not a bf16 chip: training needs the float32 "
                    "vector unit of one (tpu-v2, tpu-v3, tpu-v4, or dtype bf16)",
                    job.config.name));
  }
  if (job.images < job.batch && !job.timing_only) {
    throw UsageError(fmt::format("images ({}) below batch ({}): the epoch would have no step",
                                 job.images, job.batch));
  }
  if (!job.arch.empty() && !job.model.empty())
    throw UsageError("'arch' and 'model' both name the network: give one");
  if (job.timing_only && job.engine != "fast")
    throw UsageError("'timing_only' is a mode of the fast engine: \"engine\": \"fast\"");
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

std::string PointJob::Key() const { return fmt::format("{:016x}", Fnv1a(ToJson().dump())); }

nlohmann::json PointJob::ToJson() const {
  nlohmann::json cfg = config.ToJson();
  cfg.erase("name");  // where the config came from does not change the result
  cfg.erase("description");
  nlohmann::json j = {
      {"config", cfg},    {"model", model}, {"dataset", dataset}, {"data", data},
      {"images", images}, {"batch", batch}, {"engine", engine},   {"timing_only", timing_only},
      {"energy", energy}};
  // Only when given, so that the points of sweeps without them keep their keys.
  if (!inputs.empty()) j["inputs"] = inputs;
  if (synthetic > 0) j["synthetic"] = synthetic, j["seed"] = seed;
  if (!shard.empty()) j["shard"] = shard;
  if (command != "run") {  // a training point's own settings (run points keep their keys)
    j["command"] = command;
    j["optimizer"] = optimizer;
    j["seed"] = seed;
    for (const char* k : {"model", "timing_only"}) j.erase(k);
    // Only when given, so that the points of sweeps without them keep their keys.
    if (!model.empty()) j["model"] = model;
    if (!arch.empty()) j["arch"] = arch;
    if (timing_only) j["timing_only"] = true;
  }
  return j;
}

int64_t SweepSpec::NumPoints() const {
  int64_t n = 1;
  for (const Axis& a : axes) n *= static_cast<int64_t>(a.values.size());
  return n;
}

const std::vector<std::string>& SweepCommands() {
  static const std::vector<std::string> k = {"run", "train"};
  return k;
}

const std::vector<std::string>& RunAxes(const std::string& command) {
  static const std::vector<std::string> run = {
      "config",      "model",  "dataset", "data",      "images", "batch", "engine",
      "timing_only", "energy", "inputs",  "synthetic", "seed",   "shard"};
  static const std::vector<std::string> train = {"config",    "dataset", "data",   "images",
                                                 "batch",     "engine",  "energy", "seed",
                                                 "optimizer", "arch",    "model",  "timing_only"};
  return command == "train" ? train : run;
}

const std::vector<std::string>& KnownMetrics(const std::string& command) {
  // A training point's: its epoch on the chip (the sweep runner's TrainReport).
  static const std::vector<std::string> train = {
      "cycles_per_step",     "cycles_per_image",     "us_per_image", "images_per_second", "macs",
      "ops_per_cycle",       "utilization",          "bound_cycles", "bound_ratio",       "binds",
      "energy_per_image_pj", "dram_bytes_per_image", "loss",         "accuracy"};
  if (command == "train") return train;
  static const std::vector<std::string> k = {"cycles",
                                             "chip_cycles",
                                             "cycles_per_image",
                                             "us_per_image",
                                             "images_per_second",
                                             "macs",
                                             "ops_per_cycle",
                                             "utilization",
                                             "mapping_efficiency",
                                             "energy_per_image_pj",
                                             "tops_per_watt",
                                             "dram_bytes_per_image",
                                             "accuracy"};
  return k;
}

SweepSpec LoadSweepSpec(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("cannot read the sweep spec '{}'", path));
  ojson j;
  try {
    j = ojson::parse(in);
  } catch (const nlohmann::json::exception& e) {  // parse errors and number overflows
    throw UsageError(fmt::format("{}: not valid JSON ({})", path, e.what()));
  }
  return ParseSweepSpec(j, path);
}

SweepSpec ParseSweepSpec(const ojson& j, const std::string& path) {
  if (!j.is_object()) throw UsageError(path + ": a sweep spec is a JSON object");
  for (const auto& [k, v] : j.items()) {
    if (k != "name" && k != "description" && k != "command" && k != "base" && k != "axes" &&
        k != "metrics") {
      throw UsageError(fmt::format(
          "{}: unknown key '{}' (a spec has name, description, command, base, axes, metrics)", path,
          k));
    }
  }
  for (const char* k : {"name", "description", "command"}) {
    if (j.contains(k) && !j[k].is_string()) {
      throw UsageError(fmt::format("{}: '{}' must be a string, not {}", path, k, j[k].dump()));
    }
  }
  SweepSpec s;
  s.path = path;
  s.source = j;
  s.command = j.value("command", "run");
  if (!Contains(SweepCommands(), s.command)) {
    throw UsageError(
        fmt::format("{}: unknown command '{}'; known: {}", path, s.command, Join(SweepCommands())));
  }
  s.name = j.value("name", fs::path(path).stem().string());
  s.base = j.value("base", ojson::object());
  if (!s.base.is_object()) throw UsageError(path + ": 'base' must be an object");
  const std::vector<std::string> fields = ConfigFields();
  auto check_name = [&](const std::string& where, const std::string& k) {
    if (!Contains(RunAxes(s.command), k) && !Contains(fields, k)) {
      throw UsageError(
          fmt::format("{}: unknown {} '{}' for {} points; known: {} and the config "
                      "fields {}",
                      path, where, k, s.command, Join(RunAxes(s.command)), Join(fields)));
    }
  };
  for (const auto& [k, v] : s.base.items()) {
    if (k == "set") {
      if (!v.is_object())
        throw UsageError(path + ": base 'set' must be an object of config fields");
      for (const auto& [f, x] : v.items()) {
        if (!Contains(fields, f)) {
          throw UsageError(fmt::format("{}: base set: unknown config field '{}'; known: {}", path,
                                       f, Join(fields)));
        }
      }
    } else {
      check_name("base key", k);
    }
  }
  if (!j.contains("axes") || !j["axes"].is_object() || j["axes"].empty()) {
    throw UsageError(path +
                     ": 'axes' must be an object with at least one axis, e.g. "
                     "{\"array_dim\": [8, 16, 32]}");
  }
  for (const auto& [k, v] : j["axes"].items()) {
    check_name("axis", k);
    s.axes.push_back({k, AxisValues(fmt::format("{}: axis '{}'", path, k), v)});
  }
  int64_t n = 1;
  for (const Axis& a : s.axes) {
    n *= static_cast<int64_t>(a.values.size());
    if (n > kMaxPoints) {
      throw UsageError(fmt::format("{}: more than {} points in the grid", path, kMaxPoints));
    }
  }
  if (j.contains("metrics")) {
    if (!j["metrics"].is_array() || j["metrics"].empty()) {
      throw UsageError(path + ": 'metrics' must be a non-empty list of names");
    }
    for (const auto& m : j["metrics"]) {
      if (!m.is_string() || !Contains(KnownMetrics(s.command), m.get<std::string>())) {
        throw UsageError(fmt::format("{}: unknown metric {} of {} points; known: {}", path,
                                     m.dump(), s.command, Join(KnownMetrics(s.command))));
      }
      s.metrics.push_back(m.get<std::string>());
    }
  } else {
    s.metrics = KnownMetrics(s.command);
  }
  return s;
}

std::vector<SweepPoint> ExpandPoints(const SweepSpec& spec) {
  std::vector<SweepPoint> points;
  const int64_t n = spec.NumPoints();
  points.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    SweepPoint p;
    p.index = i;
    // The grid position: the last axis varies fastest.
    int64_t rest = i;
    std::vector<size_t> pick(spec.axes.size());
    for (size_t a = spec.axes.size(); a-- > 0;) {
      const int64_t size = static_cast<int64_t>(spec.axes[a].values.size());
      pick[a] = static_cast<size_t>(rest % size);
      rest /= size;
    }
    for (size_t a = 0; a < spec.axes.size(); ++a) {
      p.values[spec.axes[a].name] = spec.axes[a].values[pick[a]];
    }
    std::string where = "point " + std::to_string(i) + " (";
    for (const auto& [k, v] : p.values.items()) {
      where += (where.back() == '(' ? "" : ", ") + k + "=" + v.dump();
    }
    where += ")";
    try {
      std::vector<std::pair<std::string, nlohmann::json>> sets;
      std::string config_name = spec.command == "train" ? "tpu-v2" : "small-16";
      p.job.command = spec.command;
      // A training point's model: its --arch or --model where given, else train's own.
      p.job.model = spec.command == "train" ? "" : TPUSIM_SOURCE_DIR "/models/lenet5";
      for (const auto& [k, v] : spec.base.items()) {
        if (k == "set") {
          for (const auto& [f, x] : v.items()) sets.emplace_back(f, nlohmann::json(x));
        } else {
          ApplySetting(spec.path, k, nlohmann::json(v), &p.job, &sets, &config_name);
        }
      }
      for (const auto& [k, v] : p.values.items()) {
        ApplySetting(spec.path, k, nlohmann::json(v), &p.job, &sets, &config_name);
      }
      p.job.config = config::LoadConfig(config_name);
      // The config fields in one step, validated together (an axis may need another's value).
      nlohmann::json cj = p.job.config.ToJson();
      for (const auto& [f, x] : sets) cj[f] = x;
      p.job.config = config::FromJson(cj, p.job.config.name, "the sweep");
      if (spec.command == "train") CheckTrainPoint(p.job);
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("{}: {}: {}", spec.path, where, e.what()));
    }
    p.key = p.job.Key();
    points.push_back(std::move(p));
  }
  return points;
}

}  // namespace tpu::sweep
