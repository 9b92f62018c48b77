// Tiled GEMM on the RTL, checked against Eigen (see gemm_runner.h).
#include "host/gemm/gemm_runner.h"

#include <fmt/format.h>

#include <Eigen/Core>
#include <chrono>
#include <functional>
#include <random>
#include <stdexcept>

#include "arith/bf16.h"
#include "host/common/errors.h"
#include "host/gemm/gemm_workload.h"

namespace tpu::gemm {

Matrix<int32_t> ReferenceGemm(const Matrix<int8_t>& a, const Matrix<int8_t>& b) {
  using RowMajor64 = Eigen::Matrix<int64_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using RowMajor8 = Eigen::Matrix<int8_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const RowMajor8> ea(a.data.data(), a.rows, a.cols);
  Eigen::Map<const RowMajor8> eb(b.data.data(), b.rows, b.cols);
  // int64 cannot overflow for K <= 2^20; the wrap to int32 is what the hardware does.
  const RowMajor64 product = ea.cast<int64_t>() * eb.cast<int64_t>();
  Matrix<int32_t> c;
  c.rows = a.rows;
  c.cols = b.cols;
  c.data.resize(static_cast<size_t>(c.rows * c.cols));
  for (int64_t i = 0; i < c.rows * c.cols; ++i) {
    c.data[i] = static_cast<int32_t>(static_cast<uint32_t>(product.data()[i]));
  }
  return c;
}

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

Matrix<int32_t> ReferenceGemmBf16(const Matrix<uint16_t>& a, const Matrix<uint16_t>& b,
                                  int array_dim) {
  Matrix<int32_t> c;
  c.rows = a.rows;
  c.cols = b.cols;
  c.data.resize(static_cast<size_t>(c.rows * c.cols));
  arith::Bf16Gemm(a.rows, b.cols, a.cols, array_dim, a.data.data(), b.data.data(),
                  reinterpret_cast<uint32_t*>(c.data.data()));
  return c;
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

GemmRunResult RunGemm(const GemmPlan& plan, const Matrix<int8_t>& a, const Matrix<int8_t>& b,
                      sim::MxuEngine& engine, const sim::RunOptions& options) {
  return RunAndCheck(plan, a, b, engine, options, [&] { return ReferenceGemm(a, b); });
}

GemmRunResult RunGemmBf16(const GemmPlan& plan, const Matrix<uint16_t>& a,
                          const Matrix<uint16_t>& b, sim::MxuEngine& engine,
                          const sim::RunOptions& options) {
  return RunAndCheck(plan, a, b, engine, options,
                     [&] { return ReferenceGemmBf16(a, b, plan.array_dim); });
}

}  // namespace tpu::gemm
