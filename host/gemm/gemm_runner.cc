// Tiled GEMM on the RTL, checked against the format's reference product (see gemm_runner.h).
#include "host/gemm/gemm_runner.h"

#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <random>
#include <stdexcept>
#include <type_traits>

#include "arith/bf16.h"
#include "arith/format.h"
#include "host/common/errors.h"
#include "host/gemm/gemm_workload.h"

namespace tpu::gemm {

template <class T>
Matrix<int32_t> ReferenceGemm(const Matrix<T>& a, const Matrix<T>& b, int tile) {
  using F = arith::FormatOf<T>;
  if constexpr (std::is_same_v<F, arith::Bf16Format>) {
    if (tile < 1) throw std::invalid_argument("ReferenceGemm: a bf16 product needs the tile");
  }
  Matrix<int32_t> c;
  c.rows = a.rows;
  c.cols = b.cols;
  c.data.resize(static_cast<size_t>(c.rows * c.cols));
  F::Gemm(a.rows, b.cols, a.cols, tile, a.data.data(), b.data.data(),
          reinterpret_cast<typename F::Accumulator*>(c.data.data()));
  return c;
}

template Matrix<int32_t> ReferenceGemm(const Matrix<int8_t>&, const Matrix<int8_t>&, int);
template Matrix<int32_t> ReferenceGemm(const Matrix<uint16_t>&, const Matrix<uint16_t>&, int);

Matrix<int8_t> RandomInt8(int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> dist(-128, 127);
  Matrix<int8_t> m;
  m.rows = rows;
  m.cols = cols;
  m.data.resize(static_cast<size_t>(rows * cols));
  for (auto& v : m.data) v = static_cast<int8_t>(dist(rng));
  return m;
}

Matrix<uint16_t> RandomBf16(int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Matrix<uint16_t> m;
  m.rows = rows;
  m.cols = cols;
  m.data.resize(static_cast<size_t>(rows * cols));
  for (auto& v : m.data) v = arith::Bf16OfFp32(arith::BitsOfFloat(dist(rng)));
  return m;
}

namespace {

// Runs the workload and compares C with `want`.
template <class T>
GemmRunResult RunAndCheck(const GemmPlan& plan, const Matrix<T>& a, const Matrix<T>& b,
                          sim::MxuEngine& engine, const sim::RunOptions& options,
                          const std::function<Matrix<int32_t>()>& reference) {
  if (a.rows != plan.shape.m || a.cols != plan.shape.k || b.rows != plan.shape.k ||
      b.cols != plan.shape.n) {
    throw std::invalid_argument("RunGemm: operands do not match the plan's shape");
  }
  GemmRunResult r;
  r.plan = plan;
  r.engine = engine.Name();
  r.predicted = PredictCycles(plan);
  r.bf16 = sizeof(T) == 2;
  GemmWorkloadOf<T> workload(plan, a, b, &r.c);
  const auto start = std::chrono::steady_clock::now();
  sim::MxuRunResult run;
  try {
    run = engine.Run(workload, options);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  } catch (const std::runtime_error& e) {
    throw RuntimeError(e.what());
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.counters = run.counters;
  r.params = run.params;
  if (run.params.array_dim != plan.array_dim || run.params.acc_depth != plan.acc_depth_rows) {
    throw RuntimeError(
        "the RTL model was built with ArrayDim=" + std::to_string(run.params.array_dim) +
        ", AccDepth=" + std::to_string(run.params.acc_depth) + " but the configuration asks for " +
        std::to_string(plan.array_dim) + " and " + std::to_string(plan.acc_depth_rows));
  }
  const Matrix<int32_t> want = reference();
  for (int64_t i = 0; i < want.rows * want.cols; ++i) {
    if (r.c.data[i] != want.data[i]) {
      if (r.mismatches == 0) {
        r.first_mismatch = {i / want.cols, i % want.cols, r.c.data[i], want.data[i]};
      }
      ++r.mismatches;
    }
  }
  r.matches_reference = (r.mismatches == 0);
  return r;
}

}  // namespace

template <class T>
GemmRunResult RunGemm(const GemmPlan& plan, const Matrix<T>& a, const Matrix<T>& b,
                      sim::MxuEngine& engine, const sim::RunOptions& options) {
  return RunAndCheck(plan, a, b, engine, options,
                     [&] { return ReferenceGemm(a, b, plan.array_dim); });
}

template GemmRunResult RunGemm(const GemmPlan&, const Matrix<int8_t>&, const Matrix<int8_t>&,
                               sim::MxuEngine&, const sim::RunOptions&);
template GemmRunResult RunGemm(const GemmPlan&, const Matrix<uint16_t>&, const Matrix<uint16_t>&,
                               sim::MxuEngine&, const sim::RunOptions&);

}  // namespace tpu::gemm
