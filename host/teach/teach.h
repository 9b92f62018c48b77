// `tpusim teach`: a systolic matrix multiply shown cycle by cycle from the RTL's own
// signals, in two dataflows. Weight-stationary (the chip's): RecordTeachRun runs the GEMM
// on a teaching model of the matrix subsystem and samples every PE through VPI in every
// cycle (sim/teach/mxu_probe.h). Output-stationary (rtl/tpu_os_top.sv, teaching only):
// RecordOsTeachRun does the same on the OS array (sim/teach/os_probe.h). The formatters turn
// the recordings into terminal frames, a comparison, or a self-contained HTML page.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "host/common/npy.h"
#include "host/gemm/gemm_plan.h"
#include "sim/mxu/mxu_counters.h"
#include "sim/teach/mxu_probe.h"
#include "sim/teach/os_array_engine.h"
#include "sim/teach/os_probe.h"

namespace tpu::teach {

// The two dataflows tpusim teaches: weight-stationary (the chip's: B stays in the PEs) and
// output-stationary (C stays in the PEs).
enum class Dataflow { kWeightStationary, kOutputStationary };
inline constexpr Dataflow kDataflows[] = {Dataflow::kWeightStationary, Dataflow::kOutputStationary};
// "ws" and "os": the names on the command line, in answers (ws.cycles) and in the JSON.
inline const char* DataflowName(Dataflow d) {
  return d == Dataflow::kWeightStationary ? "ws" : "os";
}

// The data a dataflow moves, counted over the run from the RTL's signals (docs/teaching.md
// "Two dataflows" says how each is counted).
struct Movement {
  uint64_t reads_in = 0;        // operand values entering the array at its edges
  uint64_t operand_writes = 0;  // PE registers written with an A or B value
  uint64_t sum_writes = 0;      // partial-sum / accumulator registers written
  uint64_t passes = 0;          // values handed from one PE to its neighbour
  uint64_t writes_out = 0;      // result values leaving the array
};

// C as it fills in: each element's value so far (what has left the array for it), and
// whether it is final.
struct CProgress {
  std::vector<int32_t> value;  // m x n
  std::vector<uint8_t> seen;   // 0 nothing yet, 1 partial, 2 final
};

struct TeachCycle {
  uint64_t cycle = 0;  // sampled during this cycle, before its clock edge
  sim::ArrayState state;
  std::vector<uint8_t> active;  // dim x dim: the PE holds a real activation (the wavefront)
  uint64_t rows_in = 0;         // activation rows that have entered the array so far
  uint64_t tiles = 0;           // weight tiles switched in so far
  uint64_t results_out = 0;     // result rows that have left so far
  CProgress c;                  // C after this cycle's edge
};

struct TeachRun {
  int dim = 0;
  Matrix<int8_t> a, b;
  Matrix<int32_t> c;  // what the RTL computed
  bool matches_reference = false;
  gemm::GemmPlan plan;
  gemm::PredictedCycles predicted;
  sim::MxuCounters counters;
  Movement moved;
  std::vector<TeachCycle> cycles;
};

struct OsTeachCycle {
  uint64_t cycle = 0;
  sim::OsArrayState state;
  uint64_t beats_in = 0;     // input beats (a column of A and a row of B) so far
  uint64_t macs = 0;         // multiply-accumulates done so far (valid PEs)
  uint64_t results_out = 0;  // result rows drained so far
  CProgress c;
};

struct OsTeachRun {
  int dim = 0;
  Matrix<int8_t> a, b;
  Matrix<int32_t> c;
  bool matches_reference = false;
  gemm::PredictedOsCycles predicted;
  sim::OsCounters counters;
  uint64_t macs = 0;  // multiply-accumulates the PEs did (padding lanes included)
  Movement moved;
  std::vector<OsTeachCycle> cycles;
};

// Both throw UsageError when no teaching model of this size is built.
TeachRun RecordTeachRun(const Matrix<int8_t>& a, const Matrix<int8_t>& b, int dim);
OsTeachRun RecordOsTeachRun(const Matrix<int8_t>& a, const Matrix<int8_t>& b, int dim);

// Columns a terminal frame needs for an array of this size.
int TeachFrameWidth(int dim);
// Weight-stationary: the problem, the mapping and how to read the frames; one cycle;
// cycles against the formula, MACs, utilization, data moved, the result.
std::string FormatTeachIntro(const TeachRun& run, bool color);
std::string FormatTeachCycle(const TeachRun& run, size_t index, bool color);
std::string FormatTeachSummary(const TeachRun& run, bool color);
// Output-stationary: the same three.
std::string FormatOsIntro(const OsTeachRun& run, bool color);
std::string FormatOsCycle(const OsTeachRun& run, size_t index, bool color);
std::string FormatOsSummary(const OsTeachRun& run, bool color);
// The two dataflows on the same A and B, side by side.
std::string FormatComparison(const TeachRun& ws, const OsTeachRun& os, bool color);

// The numbers an exercise can ask for (docs/teaching.md), by name: cycles, macs,
// utilization (percent, one decimal), reads_in, operand_writes, sum_writes, passes,
// writes_out.
std::vector<std::string> AnswerKeys();
double AnswerValue(const TeachRun& run, const std::string& key);
double AnswerValue(const OsTeachRun& run, const std::string& key);

// Everything the HTML page shows, as data.
nlohmann::json TeachJson(const TeachRun& run);
nlohmann::json OsTeachJson(const OsTeachRun& run);
// One self-contained page (no network): the recording(s) and a player; ws or os may be
// null (not both): with both, the two arrays side by side on one time axis.
std::string TeachHtml(const TeachRun* ws, const OsTeachRun* os);

}  // namespace tpu::teach
