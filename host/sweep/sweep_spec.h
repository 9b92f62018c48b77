// A design-space sweep (docs/sweeps.md): a JSON spec names a base run (config, model,
// images, batch, engine, ...) and axes of values; the sweep is every combination of the
// axes (the Cartesian product, first axis slowest). Each point resolves to one `tpusim run`
// with a fully validated config, and is known by a key hashed from everything that
// decides its result, so finished points are found again after an interruption.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "host/config/tpu_config.h"

namespace tpu::sweep {

// What one point runs: the inputs of `tpusim run`, or of `tpusim train --config` (a spec's
// "command": "train": one epoch of `images` images on the chip).
struct PointJob {
  std::string command = "run";  // run or train
  config::TpuConfig config;
  std::string model;  // model folder (absolute or relative to the working directory)
  std::string dataset = "mnist";
  std::string data;  // IDX folder; empty: the usual places
  int64_t images = 100;
  int batch = 16;
  std::string engine = "fast";
  bool timing_only = false;
  std::string energy;              // energy table file; empty: the default table
  std::string inputs;              // --inputs FILE.npy instead of the data set (empty: none)
  int64_t synthetic = 0;           // --synthetic N (0: none)
  uint64_t seed = 1;               // --seed of --synthetic
  std::string shard;               // --shard I/K (empty: all the inputs)
  std::string optimizer = "adam";  // train's --optimizer
  std::string arch;                // train's --arch (empty: its own default; or `model`)

  // The identity of the point's result: a hash of everything above.
  std::string Key() const;
  nlohmann::json ToJson() const;
};

struct SweepPoint {
  int64_t index = 0;              // position in the grid
  nlohmann::ordered_json values;  // axis name -> this point's value
  PointJob job;
  std::string key;  // job.Key(), computed once at expansion
};

struct Axis {
  std::string name;
  std::vector<nlohmann::json> values;
};

struct SweepSpec {
  std::string name;
  std::string command = "run";  // what each point runs: run or train
  std::string path;             // the file it was read from
  nlohmann::ordered_json base;
  std::vector<Axis> axes;
  std::vector<std::string> metrics;
  nlohmann::ordered_json source;  // the spec as written, for DIR/sweep.json

  int64_t NumPoints() const;
};

// The commands a point may run.
const std::vector<std::string>& SweepCommands();
// The axes a spec of `command` may name besides the config's fields.
const std::vector<std::string>& RunAxes(const std::string& command = "run");
// The metrics a spec of `command` may keep (default: all of them).
const std::vector<std::string>& KnownMetrics(const std::string& command = "run");

// Reads and checks a spec; throws UsageError naming the file, the axis or key and what
// would be valid (unknown axis or field, empty axis, bad range, unknown metric).
SweepSpec LoadSweepSpec(const std::string& path);
SweepSpec ParseSweepSpec(const nlohmann::ordered_json& j, const std::string& path);
// Every point of the grid, each resolved and validated (UsageError naming the point's
// axis values for a value out of range).
std::vector<SweepPoint> ExpandPoints(const SweepSpec& spec);

}  // namespace tpu::sweep
