// The output-stationary teaching array (rtl/tpu_os_top.sv): C equals Eigen's product for
// random shapes, tiles included, on every built teaching size, and the RTL's cycle
// counters equal the closed form (host/gemm/gemm_plan.h PredictOsCycles) exactly.
#include <gtest/gtest.h>

#include <random>

#include "host/gemm/gemm_plan.h"
#include "host/gemm/gemm_runner.h"
#include "sim/teach/teach_registry.h"

namespace tpu {
namespace {

sim::OsOperands Operands(const Matrix<int8_t>& a, const Matrix<int8_t>& b) {
  return {a.rows, a.cols, b.cols, a.data, b.data};
}

void ExpectExactAndOnTime(int dim, int64_t m, int64_t k, int64_t n, uint64_t seed) {
  SCOPED_TRACE(testing::Message() << dim << " x " << dim << " array, " << m << " x " << k << " by "
                                  << k << " x " << n << ", seed " << seed);
  const auto a = gemm::RandomInt8(m, k, seed);
  const auto b = gemm::RandomInt8(k, n, seed + 1);
  uint64_t sampled = 0;
  const sim::OsRunResult r =
      sim::MakeOsTeachEngine(dim)->Run(Operands(a, b), [&](uint64_t) { ++sampled; });
  EXPECT_EQ(r.c, gemm::ReferenceGemm(a, b).data);
  const gemm::PredictedOsCycles p = gemm::PredictOsCycles(m, k, n, dim);
  EXPECT_EQ(r.counters.cycles, p.total);
  EXPECT_EQ(r.counters.beat_cycles, p.beats);
  EXPECT_EQ(r.counters.flush_cycles, p.flush);
  EXPECT_EQ(r.counters.drain_cycles, p.drain);
  EXPECT_EQ(r.tiles, p.tiles);
  EXPECT_EQ(sampled, p.total);  // one call per cycle
}

TEST(TpuOsArrayTest, RandomShapesAndTilingMatchEigenAndTheClosedForm) {
  std::mt19937_64 rng(7);
  for (int dim : sim::BuiltTeachDims()) {
    std::uniform_int_distribution<int64_t> size(1, 3 * dim + 1);
    for (int i = 0; i < 12; ++i) ExpectExactAndOnTime(dim, size(rng), size(rng), size(rng), rng());
    // One tile exactly, one row, one column, K = 1, and the extremes of int8.
    ExpectExactAndOnTime(dim, dim, dim, dim, 1);
    ExpectExactAndOnTime(dim, 1, 1, 1, 2);
    ExpectExactAndOnTime(dim, 1, 40, dim + 1, 3);
  }
}

TEST(TpuOsArrayTest, LongestDotProductsDoNotOverflow) {
  const Matrix<int8_t> a{2, 600, std::vector<int8_t>(1200, -128)};
  const Matrix<int8_t> b{600, 3, std::vector<int8_t>(1800, -128)};
  const sim::OsRunResult r = sim::MakeOsTeachEngine(2)->Run(Operands(a, b), nullptr);
  for (int32_t c : r.c) EXPECT_EQ(c, 600 * 128 * 128);
}

TEST(TpuOsArrayTest, UnbuiltSizeSaysHowToBuildIt) {
  try {
    sim::MakeOsTeachEngine(5);
    FAIL() << "no teaching model of size 5 is built";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("TPUSIM_TEACH_DIMS"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tpu
