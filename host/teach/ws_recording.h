// Weight-stationary teaching (the chip's dataflow): the GEMM runs on a teaching model of
// the matrix subsystem and every PE is sampled through VPI in every cycle
// (sim/teach/mxu_probe.h).
#pragma once

#include "host/gemm/gemm_plan.h"
#include "host/teach/recording.h"
#include "sim/mxu/mxu_counters.h"
#include "sim/teach/mxu_probe.h"

namespace tpu::teach {

struct WsCycle {
  uint64_t cycle = 0;  // sampled during this cycle, before its clock edge
  sim::ArrayState state;
  std::vector<uint8_t> active;  // dim x dim: the PE holds a real activation (the wavefront)
  uint64_t rows_in = 0;         // activation rows that have entered the array so far
  uint64_t tiles = 0;           // weight tiles switched in so far
  uint64_t results_out = 0;     // result rows that have left so far
  CProgress c;                  // C after this cycle's edge
};

struct WsRecording final : Recording {
  template <class T>
  WsRecording(const Matrix<T>& a, const Matrix<T>& b, int dim, hw::Dtype dtype)
      : Recording(Dataflow::kWeightStationary, a, b, dim, dtype) {}
  size_t Frames() const override { return frames.size(); }
  std::string Intro(bool color) const override;
  std::string Frame(size_t index, bool color) const override;
  SummaryParts Summary() const override;
  nlohmann::json FramesJson() const override;

  gemm::GemmPlan plan;
  gemm::PredictedCycles predicted;
  sim::MxuCounters counters;
  std::vector<WsCycle> frames;  // one per cycle
};

// Throws UsageError when no teaching model of this size is built. int8 operands, or
// bfloat16 bit patterns on the bf16 teaching model (float32 partial sums).
WsRecording RecordWeightStationary(const Matrix<int8_t>& a, const Matrix<int8_t>& b, int dim);
WsRecording RecordWeightStationary(const Matrix<uint16_t>& a, const Matrix<uint16_t>& b, int dim);

}  // namespace tpu::teach
