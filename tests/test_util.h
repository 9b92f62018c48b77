// Helpers shared by the tests: running a GEMM on a built RTL model.
#pragma once

#include <memory>

#include "host/gemm/gemm_runner.h"
#include "sim/mxu/mxu_registry.h"

namespace tpu::test {

inline constexpr int kAccDepth = 1024;  // accumulator rows of the default builds

inline gemm::GemmRunResult RunOnRtl(const Matrix<int8_t>& a, const Matrix<int8_t>& b, int dim,
                                    sim::EngineKind kind = sim::EngineKind::kVerilator,
                                    const sim::RunOptions& options = {}) {
  std::unique_ptr<sim::MxuEngine> engine = sim::MakeMxuEngine(dim, kind);
  // The model's own accumulator depth (its preset's); the SystemC engine reports it only
  // after a run, and is built for sizes with the default depth.
  const int acc_depth =
      kind == sim::EngineKind::kVerilator ? engine->Params().acc_depth : kAccDepth;
  const gemm::GemmPlan plan = gemm::PlanGemm({a.rows, a.cols, b.cols}, dim, acc_depth);
  return gemm::RunGemm(plan, a, b, *engine, options);
}

inline Matrix<int8_t> Filled(int64_t rows, int64_t cols, int8_t value) {
  Matrix<int8_t> m;
  m.rows = rows;
  m.cols = cols;
  m.data.assign(static_cast<size_t>(rows * cols), value);
  return m;
}

}  // namespace tpu::test
