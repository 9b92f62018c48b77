// The SystemC form of the RTL (Verilator --sc under sc_clock) computes the same results
// in the same number of cycles as the C++ model. The SystemC kernel elaborates once per
// process; ctest runs every test in a process of its own.
#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace tpu {
namespace {

void ExpectSameAsCpp(int dim, int m, int k, int n) {
  const auto a = gemm::RandomInt8(m, k, 11);
  const auto b = gemm::RandomInt8(k, n, 12);
  const auto sc = test::RunOnRtl(a, b, dim, sim::EngineKind::kSystemC);
  const auto cpp = test::RunOnRtl(a, b, dim, sim::EngineKind::kVerilator);
  EXPECT_EQ(sc.engine, "systemc");
  EXPECT_TRUE(sc.matches_reference);
  EXPECT_EQ(sc.c.data, cpp.c.data);
  EXPECT_EQ(sc.counters.cycles, cpp.counters.cycles);
  EXPECT_EQ(sc.counters.cycles, sc.predicted.total);
  EXPECT_EQ(sc.counters.stream_cycles, cpp.counters.stream_cycles);
  EXPECT_EQ(sc.counters.load_cycles, cpp.counters.load_cycles);
  EXPECT_EQ(sc.counters.drain_cycles, cpp.counters.drain_cycles);
  EXPECT_EQ(sc.params.array_dim, dim);
}

TEST(SystemCMxuEngineTest, Array4MatchesCppModel) { ExpectSameAsCpp(4, 9, 10, 11); }
TEST(SystemCMxuEngineTest, Array8MatchesCppModel) { ExpectSameAsCpp(8, 20, 17, 9); }
TEST(SystemCMxuEngineTest, Array16MatchesCppModel) { ExpectSameAsCpp(16, 33, 40, 18); }

TEST(SystemCMxuEngineTest, KernelRunsOncePerProcess) {
  const auto a = gemm::RandomInt8(2, 2, 1);
  test::RunOnRtl(a, a, 4, sim::EngineKind::kSystemC);
  EXPECT_THROW(test::RunOnRtl(a, a, 4, sim::EngineKind::kSystemC), std::logic_error);
}

}  // namespace
}  // namespace tpu
