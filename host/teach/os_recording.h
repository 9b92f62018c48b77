// Output-stationary teaching (rtl/tpu_os_top.sv, an array beside the chip, for teaching
// only): every PE is sampled through VPI in every cycle (sim/teach/os_probe.h).
#pragma once

#include "host/gemm/gemm_plan.h"
#include "host/teach/recording.h"
#include "sim/teach/os_array_engine.h"
#include "sim/teach/os_probe.h"

namespace tpu::teach {

struct OsCycle {
  uint64_t cycle = 0;  // sampled during this cycle, before its clock edge
  sim::OsArrayState state;
  uint64_t beats_in = 0;     // input beats (a column of A and a row of B) so far
  uint64_t macs = 0;         // multiply-accumulates done so far (valid PEs)
  uint64_t results_out = 0;  // result rows drained so far
  CProgress c;               // C after this cycle's edge
};

struct OsRecording final : Recording {
  OsRecording(const Matrix<int8_t>& a, const Matrix<int8_t>& b, int dim)
      : Recording(Dataflow::kOutputStationary, a, b, dim, hw::Dtype::kInt8) {}
  size_t Frames() const override { return frames.size(); }
  std::string Intro(bool color) const override;
  std::string Frame(size_t index, bool color) const override;
  SummaryParts Summary() const override;
  nlohmann::json FramesJson() const override;

  gemm::PredictedOsCycles predicted;
  sim::OsCounters counters;
  uint64_t macs = 0;            // multiply-accumulates the PEs did (padding lanes included)
  std::vector<OsCycle> frames;  // one per cycle
};

// Throws UsageError when no teaching model of this size is built.
OsRecording RecordOutputStationary(const Matrix<int8_t>& a, const Matrix<int8_t>& b, int dim);

}  // namespace tpu::teach
