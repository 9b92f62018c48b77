// The matrix-subsystem RTL (rtl/tpu_mxu_top.sv): exact results against Eigen, the
// closed-form cycle count of docs/mxu.md, no bubbles between tiles, the counters.
#include <gtest/gtest.h>

#include <random>
#include <tuple>

#include "host/config/tpu_config.h"
#include "tests/test_util.h"

namespace tpu {
namespace {

using test::RunOnRtl;

void ExpectExactAndOnFormula(const gemm::GemmRunResult& r) {
  EXPECT_TRUE(r.matches_reference)
      << r.mismatches << " mismatches, first at C[" << r.first_mismatch.row << "]["
      << r.first_mismatch.col << "]: RTL " << r.first_mismatch.got << ", Eigen "
      << r.first_mismatch.want;
  EXPECT_EQ(r.counters.cycles, r.predicted.total);
  EXPECT_EQ(r.counters.stream_cycles, r.predicted.stream);
  EXPECT_EQ(r.counters.load_cycles, r.predicted.load);
  EXPECT_EQ(r.counters.drain_cycles, r.predicted.drain);
  EXPECT_EQ(r.counters.stall_cycles, 0u);
  const auto& c = r.counters;
  EXPECT_EQ(c.stream_cycles + c.load_cycles + c.stall_cycles + c.drain_cycles + c.idle_cycles,
            c.cycles);
  EXPECT_EQ(c.tiles, static_cast<uint64_t>(r.plan.tiles));
  EXPECT_EQ(c.weight_rows, static_cast<uint64_t>(r.plan.tiles * r.plan.array_dim));
  EXPECT_EQ(c.acc_reads, static_cast<uint64_t>(r.plan.shape.m * r.plan.n_tiles));
}

// (array N, M, K, N of the GEMM)
class MxuGemmTest : public ::testing::TestWithParam<std::tuple<int, int, int, int>> {};

TEST_P(MxuGemmTest, RandomOperandsBitExactAndOnFormula) {
  const auto [dim, m, k, n] = GetParam();
  const uint64_t seed = static_cast<uint64_t>(dim * 1000003 + m * 1009 + k * 31 + n);
  const auto a = gemm::RandomInt8(m, k, seed);
  const auto b = gemm::RandomInt8(k, n, seed + 1);
  ExpectExactAndOnFormula(RunOnRtl(a, b, dim));
}

INSTANTIATE_TEST_SUITE_P(Shapes, MxuGemmTest,
                         ::testing::Combine(::testing::Values(4, 8, 16),
                                            ::testing::Values(1, 3, 16, 37),   // M
                                            ::testing::Values(1, 5, 16, 33),   // K
                                            ::testing::Values(1, 7, 16, 40)),  // N
                         [](const auto& info) {
                           return "array" + std::to_string(std::get<0>(info.param)) + "_m" +
                                  std::to_string(std::get<1>(info.param)) + "_k" +
                                  std::to_string(std::get<2>(info.param)) + "_n" +
                                  std::to_string(std::get<3>(info.param));
                         });

TEST(MxuTest, AllMinus128AtLargestSafeKIsExact) {
  // (-128) * (-128) * 131071 = 2147467264, the largest sum int32 holds for any K.
  const int64_t k = gemm::kMaxSafeK;
  for (int dim : {4, 16}) {
    const auto r = RunOnRtl(test::Filled(2, k, -128), test::Filled(k, 3, -128), dim);
    ExpectExactAndOnFormula(r);
    for (int32_t v : r.c.data) EXPECT_EQ(v, 2147467264);
  }
}

TEST(MxuTest, BeyondSafeKWrapsLikeTwosComplement) {
  const int64_t k = gemm::kMaxSafeK + 1;  // 131072 * 16384 = 2^31 wraps to -2^31
  const auto r = RunOnRtl(test::Filled(1, k, -128), test::Filled(k, 1, -128), 16);
  EXPECT_TRUE(r.matches_reference);
  EXPECT_EQ(r.c.data[0], INT32_MIN);
}

TEST(MxuTest, ExtremeOperandMixIsExact) {
  // Every sign combination of the int8 extremes.
  Matrix<int8_t> a = test::Filled(8, 8, 0), b = test::Filled(8, 8, 0);
  const int8_t values[] = {-128, 127, -1, 1, 0, -128, 127, -127};
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      a.at(i, j) = values[(i + j) % 8];
      b.at(i, j) = values[(3 * i + j) % 8];
    }
  ExpectExactAndOnFormula(RunOnRtl(a, b, 4));
}

TEST(MxuTest, BackToBackTilesHaveNoBubble) {
  // M >= N: after the first tile's weights, every cycle until the drain streams a row.
  for (int dim : {4, 8, 16}) {
    const int m = dim, k = 4 * dim, n = 3 * dim;  // 12 tiles of dim rows
    const auto r = RunOnRtl(gemm::RandomInt8(m, k, 1), gemm::RandomInt8(k, n, 2), dim);
    ExpectExactAndOnFormula(r);
    EXPECT_EQ(r.counters.load_cycles, static_cast<uint64_t>(dim)) << "only the first load";
    EXPECT_EQ(r.counters.stream_cycles, static_cast<uint64_t>(12 * m));
    EXPECT_EQ(r.counters.cycles, static_cast<uint64_t>(dim + 12 * m + 2 * dim + 1));
  }
}

TEST(MxuTest, ShortTilesWaitForTheirWeights) {
  // M < N: a tile's weights take N cycles, so tiles start N cycles apart.
  const int dim = 8, m = 3, k = 2 * dim, n = dim;  // 2 tiles
  const auto r = RunOnRtl(gemm::RandomInt8(m, k, 3), gemm::RandomInt8(k, n, 4), dim);
  ExpectExactAndOnFormula(r);
  EXPECT_EQ(r.counters.cycles, static_cast<uint64_t>(dim + dim + m + 2 * dim + 1));
}

TEST(MxuTest, RowsBeyondTheAccumulatorsAreChunked) {
  // M > 1024 accumulator rows: the GEMM runs in M-chunks.
  const auto r = RunOnRtl(gemm::RandomInt8(2100, 9, 5), gemm::RandomInt8(9, 6, 6), 4);
  EXPECT_EQ(r.plan.m_chunks, 3);
  ExpectExactAndOnFormula(r);
}

TEST(MxuTest, CyclesEqualFormulaForRandomShapes) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> dim_pick(0, 2), size(1, 70);
  for (int i = 0; i < 40; ++i) {
    const int dim = 4 << dim_pick(rng);
    const int m = size(rng), k = size(rng), n = size(rng);
    SCOPED_TRACE(testing::Message() << "array " << dim << " M " << m << " K " << k << " N " << n);
    ExpectExactAndOnFormula(
        RunOnRtl(gemm::RandomInt8(m, k, i), gemm::RandomInt8(k, n, i + 99), dim));
  }
}

// Each model's accumulator depth is that of the preset of its size (configs/ is the one
// home of buffer sizes); sizes without a preset get small-16's.
TEST(MxuTest, ParametersReadBackFromTheModel) {
  for (int dim : sim::BuiltArrayDims()) {
    int want = config::LoadConfig("small-16").acc_depth_rows;
    for (const std::string& name : config::PresetNames()) {
      const config::TpuConfig c = config::LoadConfig(name);
      if (c.array_dim == dim) want = c.acc_depth_rows;
    }
    const auto p = sim::MakeMxuEngine(dim, sim::EngineKind::kVerilator)->Params();
    EXPECT_EQ(p.array_dim, dim);
    EXPECT_EQ(p.acc_depth, want) << "array " << dim;
  }
}

TEST(MxuTest, UnbuiltArraySizeIsAClearError) {
  try {
    sim::MakeMxuEngine(12, sim::EngineKind::kVerilator);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("TPUSIM_ARRAY_DIMS"), std::string::npos) << e.what();
  }
}

// A workload that promises one more result than it produces: the RTL never delivers it.
class NeverFinishing final : public sim::MxuWorkload {
 public:
  int ArrayDim() const override { return 4; }
  int64_t NumTiles() const override { return 1; }
  int RowsInTile(int64_t) const override { return 1; }
  void WeightRow(int64_t, int, int8_t* out) const override { std::fill(out, out + 4, 1); }
  void ActRow(int64_t, int, int8_t* out, sim::RowTag* tag) const override {
    std::fill(out, out + 4, 1);
    *tag = sim::RowTag{0, false, true, 0};
  }
  void TakeResult(int64_t, const int32_t*) override {}
  int64_t NumResults() const override { return 2; }
};

TEST(MxuTest, WatchdogStopsARunThatMakesNoProgress) {
  NeverFinishing w;
  sim::RunOptions options;
  options.watchdog_cycles = 500;
  auto engine = sim::MakeMxuEngine(4, sim::EngineKind::kVerilator);
  try {
    engine->Run(w, options);
    FAIL() << "expected the watchdog to fire";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("watchdog"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1 result row(s) never came out"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tpu
