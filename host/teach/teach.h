// `tpusim teach`: a weight-stationary systolic matrix multiply shown cycle by cycle from the
// RTL's own signals. RecordTeachRun runs the GEMM on a teaching model of the matrix
// subsystem (sim/teach_registry.h) and samples every PE through VPI in every cycle
// (sim/mxu_probe.h); the formatters turn the recording into terminal frames or a
// self-contained HTML page.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "host/common/npy.h"
#include "host/gemm/gemm_plan.h"
#include "sim/mxu_counters.h"
#include "sim/mxu_probe.h"

namespace tpu::teach {

struct TeachCycle {
  uint64_t cycle = 0;  // sampled during this cycle, before its clock edge
  sim::ArrayState state;
  uint64_t rows_in = 0;      // activation rows that have entered the array so far
  uint64_t tiles = 0;        // weight tiles switched in so far
  uint64_t results_out = 0;  // result rows that have left so far
};

struct TeachRun {
  int dim = 0;
  Matrix<int8_t> a, b;
  Matrix<int32_t> c;  // what the RTL computed
  bool matches_reference = false;
  gemm::GemmPlan plan;
  gemm::PredictedCycles predicted;
  sim::MxuCounters counters;
  std::vector<TeachCycle> cycles;
};

// Throws UsageError when no teaching model of this size is built.
TeachRun RecordTeachRun(const Matrix<int8_t>& a, const Matrix<int8_t>& b, int dim);

// Columns a terminal frame needs for an array of this size.
int TeachFrameWidth(int dim);
// The problem, the mapping onto the array and how to read the frames.
std::string FormatTeachIntro(const TeachRun& run, bool color);
// One cycle: every PE's weights, activation and partial sum, what enters and leaves.
std::string FormatTeachCycle(const TeachRun& run, size_t index, bool color);
// Cycles against the formula, MACs, utilization, the result.
std::string FormatTeachSummary(const TeachRun& run, bool color);
// Everything the HTML page shows, as data.
nlohmann::json TeachJson(const TeachRun& run);
// One self-contained page (no network): the recording and a player for it.
std::string TeachHtml(const TeachRun& run);

}  // namespace tpu::teach
