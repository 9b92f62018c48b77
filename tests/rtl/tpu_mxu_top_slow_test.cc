// Larger workloads on the matrix-subsystem RTL (label `slow`: `make test-slow`): many
// M-chunks, thousands of tiles, and the SystemC engine on a big GEMM.
#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace tpu {
namespace {

TEST(MxuSlowTest, ManyChunksAndTilesOnEveryBuiltArray) {
  const auto b = gemm::RandomInt8(300, 200, 22);
  for (int dim : sim::BuiltArrayDims()) {
    SCOPED_TRACE(dim);
    // Three M-chunks of the model's accumulator depth, the last one short.
    const int acc_depth = sim::MakeMxuEngine(dim, sim::EngineKind::kVerilator)->Params().acc_depth;
    const auto a = gemm::RandomInt8(3 * acc_depth - 72, 300, 21);
    const auto r = test::RunOnRtl(a, b, dim);
    EXPECT_EQ(r.plan.m_chunks, 3);
    EXPECT_TRUE(r.matches_reference);
    EXPECT_EQ(r.counters.cycles, r.predicted.total);
  }
}

TEST(MxuSlowTest, SystemCEngineOnALargeGemm) {
  const auto a = gemm::RandomInt8(700, 200, 23), b = gemm::RandomInt8(200, 150, 24);
  const auto sc = test::RunOnRtl(a, b, 16, sim::EngineKind::kSystemC);
  EXPECT_TRUE(sc.matches_reference);
  EXPECT_EQ(sc.counters.cycles, sc.predicted.total);
}

}  // namespace
}  // namespace tpu
