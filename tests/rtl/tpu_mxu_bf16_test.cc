// The bfloat16 matrix subsystem (rtl/tpu_mxu_top.sv built for the bf16 format, docs/bf16.md): bit
// for bit the reference that adds in the array's order, on the RTL, under SystemC and on the
// fast engine, with the int8 array's cycles; a workload of the other format is refused.
#include <gtest/gtest.h>

#include <tuple>

#include "arith/bf16.h"
#include "fast/fast_mxu_engine.h"
#include "host/config/tpu_config.h"
#include "tests/test_util.h"

namespace tpu {
namespace {

gemm::GemmRunResult RunBf16(const Matrix<uint16_t>& a, const Matrix<uint16_t>& b, int dim,
                            sim::MxuEngine& engine) {
  const gemm::GemmPlan plan = gemm::PlanGemm({a.rows, a.cols, b.cols}, dim, test::kAccDepth);
  return gemm::RunGemm(plan, a, b, engine, {});
}

std::unique_ptr<sim::MxuEngine> Rtl(int dim, sim::EngineKind kind = sim::EngineKind::kVerilator) {
  return sim::MakeMxuEngine(dim, kind, /*input_bits=*/16);
}

void ExpectExact(const gemm::GemmRunResult& r) {
  EXPECT_TRUE(r.matches_reference)
      << r.engine << ": " << r.mismatches << " mismatches, first at C[" << r.first_mismatch.row
      << "][" << r.first_mismatch.col << "]: " << std::hex << r.first_mismatch.got
      << " vs reference " << r.first_mismatch.want;
  EXPECT_EQ(r.counters.cycles, r.predicted.total);  // the int8 array's formula (docs/mxu.md)
  EXPECT_EQ(r.params.input_bits, 16);
}

// (array N, M, K, N of the GEMM)
class MxuBf16GemmTest : public ::testing::TestWithParam<std::tuple<int, int, int, int>> {};

TEST_P(MxuBf16GemmTest, RtlAndFastEngineEqualTheReference) {
  const auto [dim, m, k, n] = GetParam();
  const auto seed = static_cast<uint64_t>(dim * 7919 + m * 101 + k * 13 + n);
  const auto a = gemm::RandomBf16(m, k, seed);
  const auto b = gemm::RandomBf16(k, n, seed + 1);
  const gemm::GemmRunResult rtl = RunBf16(a, b, dim, *Rtl(dim));
  fast::FastMxuEngine fast(dim, test::kAccDepth, 16);
  const gemm::GemmRunResult f = RunBf16(a, b, dim, fast);
  ExpectExact(rtl);
  ExpectExact(f);
  EXPECT_EQ(rtl.c.data, f.c.data);
  EXPECT_EQ(rtl.counters.cycles, f.counters.cycles);
  EXPECT_EQ(rtl.counters.stream_cycles, f.counters.stream_cycles);
  EXPECT_EQ(rtl.counters.acc_writes, f.counters.acc_writes);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MxuBf16GemmTest,
                         ::testing::Combine(::testing::Values(4, 16),
                                            ::testing::Values(1, 19),      // M
                                            ::testing::Values(3, 16, 37),  // K
                                            ::testing::Values(5, 33)),     // N
                         [](const auto& info) {
                           return "array" + std::to_string(std::get<0>(info.param)) + "_m" +
                                  std::to_string(std::get<1>(info.param)) + "_k" +
                                  std::to_string(std::get<2>(info.param)) + "_n" +
                                  std::to_string(std::get<3>(info.param));
                         });

// Infinities, NaN, signed zeros and sums that cancel travel through the array and the
// accumulators as the reference says.
TEST(MxuBf16Test, SpecialValuesMatchTheReference) {
  auto a = gemm::RandomBf16(9, 20, 5);
  auto b = gemm::RandomBf16(20, 6, 6);
  a.at(0, 0) = 0x7f80;  // +inf
  a.at(1, 3) = 0xff80;  // -inf
  a.at(2, 7) = 0x8000;  // -0
  b.at(9, 2) = 0x7fc0;  // NaN
  b.at(3, 1) = 0x0000;  // +0 against the infinity of row 1: NaN there
  a.at(3, 1) = 0x0001;  // a subnormal: zero
  for (int64_t j = 0; j < 20; ++j) a.at(4, j) = static_cast<uint16_t>(j % 2 ? 0x3f80 : 0xbf80);
  for (int64_t r = 0; r < 20; ++r) b.at(r, 3) = 0x3f80;  // row 4 x column 3 cancels to +0
  for (int dim : {4, 16}) {
    const auto rtl = RunBf16(a, b, dim, *Rtl(dim));
    ExpectExact(rtl);
    fast::FastMxuEngine fast(dim, test::kAccDepth, 16);
    EXPECT_EQ(RunBf16(a, b, dim, fast).c.data, rtl.c.data);
    EXPECT_EQ(static_cast<uint32_t>(rtl.c.at(4, 3)), 0u);
    EXPECT_EQ(static_cast<uint32_t>(rtl.c.at(0, 2)), arith::kFp32Nan);
  }
}

// A column sum of -0 (a tiny negative sum flushed) stays -0 through a full tile, and
// becomes +0 when the tile has padding rows below K: those PEs add their +0 products.
TEST(MxuBf16Test, PaddingRowsAddPositiveZeros) {
  for (int64_t k : {4, 2}) {
    Matrix<uint16_t> a{1, k, std::vector<uint16_t>(static_cast<size_t>(k), 0)};
    Matrix<uint16_t> b{k, 1, std::vector<uint16_t>(static_cast<size_t>(k), 0x3f80)};  // 1.0
    a.at(0, k - 2) = 0x80c0;  // -1.5 x 2^-126
    a.at(0, k - 1) = 0x0080;  // 2^-126: the sum is -2^-127, flushed to -0
    const auto rtl = RunBf16(a, b, 4, *Rtl(4));
    ExpectExact(rtl);
    EXPECT_EQ(static_cast<uint32_t>(rtl.c.at(0, 0)), k == 4 ? 0x80000000u : 0u) << "K " << k;
  }
}

TEST(MxuBf16Test, SystemCEngineAgrees) {
  const auto a = gemm::RandomBf16(21, 18, 11);
  const auto b = gemm::RandomBf16(18, 9, 12);
  const auto sc = RunBf16(a, b, 4, *Rtl(4, sim::EngineKind::kSystemC));
  ExpectExact(sc);
  EXPECT_EQ(sc.c.data, RunBf16(a, b, 4, *Rtl(4)).c.data);
}

TEST(MxuBf16Test, TheOtherFormatIsRefused) {
  const auto a = gemm::RandomBf16(2, 4, 1);
  const auto b = gemm::RandomBf16(4, 4, 2);
  const gemm::GemmPlan plan = gemm::PlanGemm({2, 4, 4}, 4, test::kAccDepth);
  const auto int8_model = sim::MakeMxuEngine(4, sim::EngineKind::kVerilator);
  try {
    gemm::RunGemm(plan, a, b, *int8_model, {});
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("built for int8"), std::string::npos) << e.what();
  }
  fast::FastMxuEngine fast_int8(4, test::kAccDepth);
  EXPECT_THROW(gemm::RunGemm(plan, a, b, fast_int8, {}), std::exception);
  try {
    sim::MakeMxuEngine(12, sim::EngineKind::kVerilator, 16);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("TPUSIM_BF16_ARRAY_DIMS"), std::string::npos) << e.what();
  }
}

// Each bf16 model has the accumulator depth of the bf16 preset of its size (tpu-v2's at
// 128), else small-16's, so that `tpusim gemm --config tpu-v2` runs on the RTL.
TEST(MxuBf16Test, BuiltSizesAreListedWithTheirPresetsDepths) {
  for (int dim : sim::BuiltArrayDims(16)) {
    int want = config::LoadConfig("small-16").acc_depth_rows;
    for (const std::string& name : config::PresetNames()) {
      const config::TpuConfig c = config::LoadConfig(name);
      if (c.array_dim == dim && c.dtype == hw::Dtype::kBf16) want = c.acc_depth_rows;
    }
    const auto p = Rtl(dim)->Params();
    EXPECT_EQ(p.input_bits, 16) << dim;
    EXPECT_EQ(p.acc_depth, want) << dim;
  }
  EXPECT_EQ(sim::MakeMxuEngine(4, sim::EngineKind::kVerilator)->Params().input_bits, 8);
}

}  // namespace
}  // namespace tpu
