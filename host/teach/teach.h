// `tpusim teach`: a systolic matrix multiply shown cycle by cycle from the RTL's own
// signals, in two dataflows (ws_recording.h, os_recording.h). Record runs a GEMM on one
// dataflow's teaching array; the rest works on any recording: the summary, the comparison
// of two, the exercises' answers, the data and the self-contained HTML page.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "host/teach/os_recording.h"
#include "host/teach/recording.h"
#include "host/teach/ws_recording.h"

namespace tpu::teach {

// Throws UsageError when no teaching model of this size is built. bfloat16 operands (bit
// patterns) run on the weight-stationary array only.
std::unique_ptr<Recording> Record(Dataflow d, const Matrix<int8_t>& a, const Matrix<int8_t>& b,
                                  int dim);
std::unique_ptr<Recording> Record(Dataflow d, const Matrix<uint16_t>& a, const Matrix<uint16_t>& b,
                                  int dim);
// The longest lesson: a lesson, not a benchmark.
constexpr uint64_t kMaxTeachCycles = 2000;
// The cycles a dataflow's formula predicts, without running it (to refuse long lessons).
uint64_t PredictTeachCycles(Dataflow d, int64_t m, int64_t k, int64_t n, int dim);

// Columns a terminal frame needs for an array of this size.
int TeachFrameWidth(int dim);
// Cycles against the formula, the phases, MACs, utilization, data moved, the result.
std::string FormatSummary(const Recording& run, bool color);
// Two dataflows on the same A and B, side by side.
std::string FormatComparison(const Recording& left, const Recording& right, bool color);

// The numbers an exercise can ask for (docs/teaching.md), by name: cycles, macs,
// utilization (percent, one decimal), reads_in, operand_writes, sum_writes, passes,
// writes_out.
std::vector<std::string> AnswerKeys();
double AnswerValue(const Recording& run, const std::string& key);

// Everything the HTML page shows, as data.
nlohmann::json TeachJson(const Recording& run);
// One self-contained page (no network) with the recordings (one or more) and a player;
// with several, the arrays side by side on one time axis.
std::string TeachHtml(const std::vector<const Recording*>& runs);

}  // namespace tpu::teach
