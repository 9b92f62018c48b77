// GEMM tiling and the closed-form cycle count (host/gemm/gemm_plan.cc).
#include "host/gemm/gemm_plan.h"

#include <gtest/gtest.h>

#include "host/common/errors.h"

namespace tpu::gemm {
namespace {

TEST(GemmPlanTest, TilesCoverEveryDimension) {
  const GemmPlan p = PlanGemm({100, 33, 17}, 16, 1024);
  EXPECT_EQ(p.k_tiles, 3);
  EXPECT_EQ(p.n_tiles, 2);
  EXPECT_EQ(p.m_chunk, 100);
  EXPECT_EQ(p.m_chunks, 1);
  EXPECT_EQ(p.tiles, 6);
  EXPECT_EQ(p.UsefulMacs(), 100 * 33 * 17);
  EXPECT_EQ(p.IssuedMacs(), 100 * 6 * 256);
}

TEST(GemmPlanTest, RowsBeyondTheAccumulatorsMakeChunks) {
  const GemmPlan p = PlanGemm({2500, 8, 8}, 8, 1024);
  EXPECT_EQ(p.m_chunks, 3);
  EXPECT_EQ(p.RowsInChunk(0), 1024);
  EXPECT_EQ(p.RowsInChunk(2), 452);
}

TEST(GemmPlanTest, FormulaOneTile) {
  // N to load, M rows, 2N + 1 to drain.
  const auto c = PredictCycles(PlanGemm({10, 4, 4}, 4, 1024));
  EXPECT_EQ(c.total, 4u + 10u + 9u);
  EXPECT_EQ(c.load, 4u);
  EXPECT_EQ(c.stream, 10u);
  EXPECT_EQ(c.drain, 9u);
}

TEST(GemmPlanTest, FormulaShortTilesArePacedByWeightLoads) {
  // 3 tiles of M = 2 rows on N = 8: tiles start N apart.
  const auto c = PredictCycles(PlanGemm({2, 24, 8}, 8, 1024));
  EXPECT_EQ(c.total, 3u * 8 + 1 + 2 * 8 + 2);  // 3N + 1 + (T - 1) N + M
}

TEST(GemmPlanTest, FormulaMatchesClosedFormForOneChunk) {
  for (int dim : {4, 8, 16})
    for (int64_t m : {1, 5, 16, 40})
      for (int64_t k : {1, 17, 64})
        for (int64_t n : {1, 16, 33}) {
          const GemmPlan p = PlanGemm({m, k, n}, dim, 1024);
          const uint64_t expect =
              3u * dim + 1 + static_cast<uint64_t>(p.tiles - 1) * std::max<int64_t>(m, dim) + m;
          EXPECT_EQ(PredictCycles(p).total, expect);
        }
}

TEST(GemmPlanTest, BadShapesAreUsageErrors) {
  EXPECT_THROW(PlanGemm({0, 4, 4}, 4, 1024), UsageError);
  EXPECT_THROW(PlanGemm({4, -1, 4}, 4, 1024), UsageError);
  EXPECT_THROW(PlanGemm({4, 4, int64_t{1} << 30}, 4, 1024), UsageError);
  EXPECT_THROW(PlanGemm({1 << 15, 1 << 15, 1 << 15}, 4, 1024), UsageError);  // too many elements
  EXPECT_THROW(PlanGemm({8192, 8192, 8192}, 4, 1024), UsageError);           // too many cycles
}

}  // namespace
}  // namespace tpu::gemm
