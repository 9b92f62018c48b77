// The vector unit's float32 arithmetic (arith/fp32.h) against values worked out from the
// rules of docs/vpu.md ("Float32 arithmetic"), and its exponential against double-precision
// e^x: a dense sample in the fast suite, every float32 input in the slow one.
#include "arith/fp32.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "arith/vector.h"

namespace tpu::arith {
namespace {

uint32_t F(float f) { return BitsOfFloat(f); }

TEST(Fp32Test, OperationsRoundOnceAndFlushSubnormals) {
  EXPECT_EQ(Fp32Sub(F(1), F(1)), 0u);                   // x - x is +0
  EXPECT_EQ(Fp32Sub(F(-0.0f), F(0)), 0x80000000u);      // -0 - +0 is -0
  EXPECT_EQ(Fp32Mul(F(1.5f), F(-2)), F(-3));            //
  EXPECT_EQ(Fp32Mul(F(0x1p-70f), F(0x1p-70f)), 0u);     // 2^-140: flushed
  EXPECT_EQ(Fp32Mul(0, kFp32Inf), kFp32Nan);            // 0 x infinity
  EXPECT_EQ(Fp32Mul(F(1 + 0x1p-23f), F(1 + 0x1p-23f)),  // 1 + 2^-22 + 2^-46: rounds
            F(1 + 0x1p-22f));                           // to 1 + 2^-22
  EXPECT_EQ(Fp32Div(F(1), F(3)), F(1.0f / 3));          // correctly rounded
  EXPECT_EQ(Fp32Div(F(1), 0x00000001u), kFp32Inf);      // a subnormal divisor is zero
  EXPECT_EQ(Fp32Div(F(-1), 0), 0xff800000u);            // -1 / +0 = -infinity
  EXPECT_EQ(Fp32Div(0, 0), kFp32Nan);                   //
  EXPECT_EQ(Fp32Div(F(1), F(0x1p127f)), 0u);            // 2^-127: flushed to +0
  EXPECT_EQ(Fp32Sqrt(F(2)), F(std::sqrt(2.0f)));        //
  EXPECT_EQ(Fp32Sqrt(0x80000000u), 0x80000000u);        // sqrt(-0) = -0
  EXPECT_EQ(Fp32Sqrt(F(-1)), kFp32Nan);                 //
  EXPECT_EQ(Fp32Neg(0xffc00000u), kFp32Nan);            // any NaN: the canonical one
  EXPECT_EQ(Fp32Add(F(1), 0xff800001u), kFp32Nan);
}

TEST(Fp32Test, ComparisonsGiveMasksThatSelect) {
  EXPECT_EQ(Fp32Less(F(1), F(2)), kFp32One);
  EXPECT_EQ(Fp32Less(F(2), F(1)), 0u);
  EXPECT_EQ(Fp32Less(kFp32Nan, F(1)), 0u);
  EXPECT_EQ(Fp32Equal(0x80000000u, 0u), kFp32One);  // -0 == +0
  EXPECT_EQ(Fp32Equal(kFp32Nan, kFp32Nan), 0u);
  EXPECT_EQ(Fp32Equal(0x00000001u, 0u), kFp32One);  // a subnormal is a zero
  EXPECT_EQ(Fp32Select(kFp32One, F(5), F(7)), F(5));
  EXPECT_EQ(Fp32Select(0x80000000u, F(5), F(7)), F(7));  // -0 selects b
  // A ReLU's mask times the gradient: dY where Y > 0.
  EXPECT_EQ(Fp32Mul(Fp32Less(0, F(0.5f)), F(-3)), F(-3));
  EXPECT_EQ(Fp32Mul(Fp32Less(0, F(-0.5f)), F(-3)), 0x80000000u);
}

// The tree's order is not left to right: 2^24 + 1 + 1 + 1 is 2^24 + 2 as (2^24 + 1) + (1 +
// 1), but 2^24 added left to right (each + 1 a tie, to even).
TEST(Fp32Test, TreeReductionsAddPairsLevelByLevel) {
  const uint32_t w[4] = {F(0x1p24f), F(1), F(1), F(1)};
  EXPECT_EQ(Fp32TreeSum(w, 4), F(0x1p24f + 2));
  EXPECT_EQ(Fp32Add(Fp32Add(Fp32Add(w[0], w[1]), w[2]), w[3]), F(0x1p24f));
  const uint32_t m[4] = {F(-1), F(3), F(2), kFp32Nan};
  EXPECT_EQ(Fp32TreeMax(m, 4), kFp32Nan);
  EXPECT_EQ(Fp32TreeMax(m, 2), F(3));
}

// A row of lanes not a power of two: the last odd value passes up a level as it is.
TEST(Fp32Test, TreeOfAnOddWidthPassesTheLastValueUp) {
  const uint32_t w[3] = {F(0x1p24f), F(1), F(1)};  // (2^24 + 1) + 1: 2^24, then 2^24
  EXPECT_EQ(Fp32TreeSum(w, 3), F(0x1p24f));
  const uint32_t v[5] = {F(1), F(2), F(3), F(4), F(5)};  // ((1 + 2) + (3 + 4)) + 5
  EXPECT_EQ(Fp32TreeSum(v, 5), F(15));
  EXPECT_EQ(Fp32TreeMax(v, 5), F(5));
}

// Products and quotients below 2^-126 round on the subnormal grid first, as IEEE 754 does,
// and are flushed unless that rounding reached 2^-126 (the RTL's Fp32Pack does the same).
TEST(Fp32Test, ResultsJustBelowTheNormalRangeRoundBeforeTheyFlush) {
  // (1 - 2^-24) x 2^-126 rounds to 2^-126 on the subnormal grid (spacing 2^-149).
  EXPECT_EQ(Fp32Mul(F(1 - 0x1p-24f), F(0x1p-126f)), F(0x1p-126f));
  EXPECT_EQ(Fp32Mul(F(0.75f), F(0x1p-126f)), 0u);  // 0.75 x 2^-126: a zero
  // 2^-126 / (1 + 2^-23) = 2^-126 - 2^-149 + 2^-172: the grid's 2^-126 - 2^-149, a zero.
  EXPECT_EQ(Fp32Div(F(0x1p-126f), F(1 + 0x1p-23f)), 0u);
  EXPECT_EQ(Fp32Recip(F(4)), F(0.25f));
  EXPECT_EQ(Fp32Rsqrt(F(4)), F(0.5f));
  EXPECT_EQ(Fp32Rsqrt(0), kFp32Inf);
  EXPECT_EQ(Fp32Rsqrt(0x80000000u), 0xff800000u);  // 1 / sqrt(-0) = 1 / -0
}

// The instruction's reference (arith/vector.h): formats, in place, broadcast, reductions.
TEST(Fp32Test, VectorRunComputesRowsInTheirFormats) {
  constexpr int64_t n = 2;
  // Row 0: a (bf16) = [1, -2]; rows 1-2: b (float32) = [0.5 + 2^-20, 3]; row 3: one row.
  std::vector<uint16_t> ub(16 * n, 0);
  ub[0] = Bf16OfFp32(F(1));
  ub[1] = Bf16OfFp32(F(-2));
  VectorStore(ub.data(), n, 1, 0, 0, true, F(0.5f + 0x1p-20f));
  VectorStore(ub.data(), n, 1, 0, 1, true, F(3));
  VectorRun({hw::VectorOp::kAdd, 0, 1, 4, 1, false, true, true, false}, ub.data(), n);
  EXPECT_EQ(VectorValue(ub.data(), n, 4, 0, 0, true), F(1.5f + 0x1p-20f));  // float32 kept
  VectorRun({hw::VectorOp::kAdd, 0, 1, 6, 1, false, true, false, false}, ub.data(), n);
  EXPECT_EQ(ub[6 * n], Bf16OfFp32(F(1.5f + 0x1p-20f)));  // rounded to bfloat16: 1.5
  EXPECT_EQ(ub[6 * n + 1], Bf16OfFp32(F(1)));
  // lane_max of a row: in every lane; row_sum of rows 4-5 (one float32 row) and row 6.
  VectorRun({hw::VectorOp::kLaneMax, 0, 0, 8, 1, false, false, false, false}, ub.data(), n);
  EXPECT_EQ(ub[8 * n], Bf16OfFp32(F(1)));
  EXPECT_EQ(ub[8 * n + 1], Bf16OfFp32(F(1)));
  VectorRun({hw::VectorOp::kRowSum, 6, 0, 9, 3, false, false, true, false}, ub.data(), n);
  EXPECT_EQ(VectorValue(ub.data(), n, 9, 0, 1, true), F(1 + 1 + 0));  // rows 6, 7, 8
}

// VectorRun's row loops (one per operation, written to vectorize) give every lane what the
// lane function VectorLane gives, for each lane-wise operation, on edge values (zeros of
// both signs, subnormals, infinities, NaNs with payloads) and random bits, float32 rows.
TEST(Fp32Test, VectorRunRowsEqualTheLaneFunction) {
  using hw::VectorOp;
  constexpr int64_t n = 37;
  const uint32_t edges[] = {0u,          0x80000000u, 1u,          0x807fffffu, 0x7f800000u,
                            0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, F(1),
                            F(-1),       F(6),        F(0.25f)};
  uint64_t seed = 77;
  auto next = [&seed] {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(seed >> 32);
  };
  for (const VectorOp op :
       {VectorOp::kAdd, VectorOp::kSub, VectorOp::kMul, VectorOp::kMax, VectorOp::kMin,
        VectorOp::kLess, VectorOp::kEqual, VectorOp::kSelect, VectorOp::kCopy, VectorOp::kExp,
        VectorOp::kRecip, VectorOp::kRsqrt, VectorOp::kLog}) {
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<uint16_t> ub(8 * n, 0);  // a: rows 0-1, b: rows 2-3, out: rows 4-5
      for (int64_t l = 0; l < n; ++l)
        for (const uint64_t row : {0, 2, 4}) {
          const uint32_t v = next() % 3 ? next() : edges[next() % std::size(edges)];
          VectorStore(ub.data(), n, row, 0, l, true, v);
        }
      std::vector<uint32_t> want(n);
      for (int64_t l = 0; l < n; ++l) {
        want[l] = VectorLane(op, VectorValue(ub.data(), n, 0, 0, l, true),
                             VectorValue(ub.data(), n, 2, 0, l, true),
                             VectorValue(ub.data(), n, 4, 0, l, true));
      }
      VectorRun({op, 0, 2, 4, 1, true, true, true, false}, ub.data(), n);
      for (int64_t l = 0; l < n; ++l)
        ASSERT_EQ(VectorValue(ub.data(), n, 4, 0, l, true), want[l])
            << "operation " << static_cast<int>(op) << ", lane " << l;
    }
  }
}

TEST(Fp32Test, ExpAtItsEdges) {
  EXPECT_EQ(Fp32Exp(0), kFp32One);
  EXPECT_EQ(Fp32Exp(0x80000000u), kFp32One);
  EXPECT_EQ(Fp32Exp(kFp32Nan), kFp32Nan);
  EXPECT_EQ(Fp32Exp(kFp32Inf), kFp32Inf);
  EXPECT_EQ(Fp32Exp(0xff800000u), 0u);
  EXPECT_EQ(Fp32Exp(F(88.8f)), kFp32Inf);             // e^88.8 > the largest float32
  EXPECT_LT(Fp32Exp(F(88.72f)), kFp32Inf);            // e^88.72 < it
  EXPECT_EQ(Fp32Exp(F(-88.0f)), 0u);                  // e^-88 < 2^-126: flushed
  EXPECT_NE(Fp32Exp(F(-87.0f)), 0u);                  // e^-87 > 2^-126
  EXPECT_EQ(Fp32Exp(F(1)), F(2.71828182845904523f));  // e, to the nearest float32
}

// The distance of `got` (a float32 bit pattern) from `want` in units in the last place of
// want's float32 binade (0 where both are 0).
double Ulps(uint32_t got, double want) {
  const double g = static_cast<double>(FloatOfBits(got));
  if (want == 0) return g == 0 ? 0 : 1e9;
  return std::fabs(g - want) / std::ldexp(1.0, std::ilogb(want) - 23);
}

// Expects the worst error within `bound` ulps, and prints it (docs/vpu.md quotes the runs).
void ExpectWorst(const char* fn, const char* over, double worst, double bound) {
  EXPECT_LE(worst, bound);
  std::printf("worst error of %s over %s: %.3f ulps\n", fn, over, worst);
}

// Fp32Exp(x)'s error in ulps for x whose e^x is a normal float32 (else -1).
double UlpError(uint32_t x) {
  const double want = std::exp(static_cast<double>(FloatOfBits(x)));
  if (want < 0x1p-126 || want >= 0x1p128) return -1;
  return Ulps(Fp32Exp(x), want);
}

// The largest UlpError over the float32 bit patterns from 0 and from 0x80000000 upwards in
// steps of `stride` (positive and negative x, up to 89 and down to -104).
double WorstExpError(uint32_t stride) {
  double worst = 0;
  for (const uint32_t sign : {0u, 0x80000000u}) {
    const uint32_t last = sign ? F(-104.0f) : F(89.0f);
    for (uint64_t b = sign; b <= last; b += stride) worst = std::max(worst, UlpError(b));
  }
  return worst;
}

// docs/vpu.md states the bound, at most 2 ulps (measured over every input by the slow test).
TEST(Fp32Test, ExpWithinTwoUlpsOnADenseSample) {
  ExpectWorst("Fp32Exp", "every 997th float32", WorstExpError(997), 2.0);
}

TEST(Fp32Test, ExpWithinTwoUlpsOnEveryInput) {
  ExpectWorst("Fp32Exp", "every float32", WorstExpError(1), 2.0);
}

TEST(Fp32Test, LogAtItsEdges) {
  EXPECT_EQ(Fp32Log(kFp32One), 0u);              // ln 1 = +0
  EXPECT_EQ(Fp32Log(0), 0xff800000u);            // -inf
  EXPECT_EQ(Fp32Log(0x80000000u), 0xff800000u);  // -0 too
  EXPECT_EQ(Fp32Log(0x00000001u), 0xff800000u);  // a subnormal is a zero
  EXPECT_EQ(Fp32Log(F(-1)), kFp32Nan);
  EXPECT_EQ(Fp32Log(0xff800000u), kFp32Nan);  // ln -inf
  EXPECT_EQ(Fp32Log(kFp32Nan), kFp32Nan);
  EXPECT_EQ(Fp32Log(kFp32Inf), kFp32Inf);
  EXPECT_EQ(Fp32Log(F(2.71828182845904523f)), F(1));  // ln of e's float32, to the nearest
  EXPECT_EQ(Fp32Log(F(2)), F(0.693147180559945f));
}

// Fp32Log(x)'s error in ulps, for positive normal x.
double LogUlpError(uint32_t x) {
  return Ulps(Fp32Log(x), std::log(static_cast<double>(FloatOfBits(x))));
}

// The largest LogUlpError over the positive normal float32 bit patterns in steps of
// `stride`, and over every 7th (every one, with stride 1) in [1/2, 2), where ln x is
// smallest.
double WorstLogError(uint32_t stride) {
  double worst = 0;
  for (uint64_t b = 0x00800000u; b < 0x7f800000u; b += stride)
    worst = std::max(worst, LogUlpError(static_cast<uint32_t>(b)));
  for (uint32_t b = F(0.5f); b < F(2.0f); b += stride == 1 ? 1 : 7)
    worst = std::max(worst, LogUlpError(b));
  return worst;
}

// docs/vpu.md states the bound, at most 1 ulp (over every input by the slow test).
TEST(Fp32Test, LogWithinOneUlpOnADenseSample) {
  ExpectWorst("Fp32Log", "every 997th positive float32", WorstLogError(997), 1.0);
}

TEST(Fp32Test, LogWithinOneUlpOnEveryInput) {
  ExpectWorst("Fp32Log", "every positive float32", WorstLogError(1), 1.0);
}

}  // namespace
}  // namespace tpu::arith
