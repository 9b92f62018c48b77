// Running a sweep into a folder that survives interruptions (docs/sweeps.md):
//
//   DIR/sweep.json          the spec, as given (a DIR holds one sweep)
//   DIR/points/KEY.json     one record per finished point, written atomically: status, the
//                           error of a failed point, the job (full config, engine, ...) and
//                           the whole `tpusim run` report (with tpusim's revision)
//   DIR/results.csv, .json  the table, rebuilt from the records
//   DIR/plots/              the figures (scripts/plot-sweep)
//
// Each point runs as its own `tpusim run` process, so an RTL point (one SystemC system per
// process) and a crashing point cannot take the sweep with them. A rerun skips every
// point that already has a record of success.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "host/sweep/sweep_spec.h"

namespace tpu::sweep {

struct SweepOptions {
  std::string dir;
  int jobs = 1;        // points run at once
  bool fresh = false;  // forget the records of an earlier run of this DIR
  int shard = 0;       // run only the points with index % shards == shard
  int shards = 1;
  bool quiet = false;
  std::string tpusim;  // the executable that runs the points
};

struct SweepStatus {
  int64_t points = 0, ok = 0, failed = 0, missing = 0;
  std::vector<std::string> failures;  // "point 3 (array_dim=4): the error"
};

// Creates DIR for the spec, or checks that DIR holds this same sweep (UsageError
// otherwise, nothing touched); with `fresh`, removes the earlier records first.
void PrepareSweepDir(const SweepSpec& spec, const std::string& dir, bool fresh);
// Runs every point of the shard that has no record of success; returns the status of the
// shard's points afterwards.
SweepStatus RunSweep(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                     const SweepOptions& options);
// Reads DIR/sweep.json back (UsageError if DIR holds no sweep).
SweepSpec LoadSweepDir(const std::string& dir);
// The status of every point (of the shard `shard` of `shards`) from the records in DIR.
SweepStatus ReadStatus(const std::vector<SweepPoint>& points, const std::string& dir, int shard = 0,
                       int shards = 1);
// Rebuilds DIR/results.csv and DIR/results.json from the records.
SweepStatus WriteResults(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                         const std::string& dir);
// Draws DIR/plots/ from DIR/results.json with scripts/plot-sweep (RuntimeError on failure).
void DrawPlots(const std::string& dir);

}  // namespace tpu::sweep
