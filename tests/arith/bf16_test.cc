// The bfloat16 reference (arith/bf16.h) against values worked out by hand from the rules
// of docs/bf16.md, and its tile product against a plain loop of single MACs.
#include "arith/bf16.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace tpu::nn {
namespace {

uint32_t F(float f) { return arith::BitsOfFloat(f); }
uint16_t B(float f) {
  return static_cast<uint16_t>(arith::BitsOfFloat(f) >> 16);
}  // exact ones only

TEST(Bf16Test, RoundsToNearestEvenAndOverflowsToInfinity) {
  EXPECT_EQ(arith::Bf16OfFp32(0x3f808000u), 0x3f80u);  // 1 + 2^-8: a tie, to even (down)
  EXPECT_EQ(arith::Bf16OfFp32(0x3f818000u), 0x3f82u);  // 1 + 3 x 2^-8: a tie, to even (up)
  EXPECT_EQ(arith::Bf16OfFp32(0x3f808001u), 0x3f81u);  // just above the tie: up
  EXPECT_EQ(arith::Bf16OfFp32(0xbf808001u), 0xbf81u);  // the same magnitude, negative
  EXPECT_EQ(arith::Bf16OfFp32(0x3fffffffu), 0x4000u);  // carries into the exponent
  EXPECT_EQ(arith::Bf16OfFp32(0x7f7fffffu), 0x7f80u);  // the largest float32: infinity
  EXPECT_EQ(arith::Bf16OfFp32(0xff7f8000u), 0xff80u);  // a tie above the largest bfloat16
  EXPECT_EQ(arith::Bf16OfFp32(0x7f7f7fffu), 0x7f7fu);  // below the tie: the largest bfloat16
}

TEST(Bf16Test, SubnormalsAreZerosOfTheirSign) {
  EXPECT_EQ(arith::Bf16OfFp32(0x00000001u), 0x0000u);
  EXPECT_EQ(arith::Bf16OfFp32(0x807fffffu), 0x8000u);
  EXPECT_EQ(arith::Fp32OfBf16(0x0001u), 0x00000000u);
  EXPECT_EQ(arith::Fp32OfBf16(0x8040u), 0x80000000u);
  // 2^-100 x 2^-30 = 2^-130: below the smallest normal, a zero of the product's sign.
  EXPECT_EQ(arith::Bf16Mul(B(0x1p-100f), B(-0x1p-30f)), 0x80000000u);
  // 1.5 x 2^-126 - 2^-126 = 2^-127: subnormal, flushed.
  EXPECT_EQ(arith::Fp32Add(F(0x1.8p-126f), F(-0x1p-126f)), 0x00000000u);
  EXPECT_EQ(arith::Fp32Add(F(-0x1.8p-126f), F(0x1p-126f)), 0x80000000u);
  // A subnormal input counts as zero: 2^-149 + 0 is +0, not 2^-149.
  EXPECT_EQ(arith::Fp32Add(0x00000001u, 0x00000000u), 0x00000000u);
}

TEST(Bf16Test, ProductsAreExact) {
  // (1 + 127/128)^2 needs 16 significant bits, which float32 holds.
  const uint16_t x = 0x3fffu;  // 1.9921875
  EXPECT_EQ(arith::FloatOfBits(arith::Bf16Mul(x, x)), 1.9921875f * 1.9921875f);
  EXPECT_EQ(arith::Bf16Mul(B(3.0f), B(-0.5f)), F(-1.5f));
  EXPECT_EQ(arith::Bf16Mul(B(0x1p100f), B(0x1p100f)), 0x7f800000u);  // overflow: infinity
}

TEST(Bf16Test, ZerosInfinitiesAndNan) {
  EXPECT_EQ(arith::Fp32Add(F(1.0f), F(-1.0f)), 0x00000000u);             // x + (-x) = +0
  EXPECT_EQ(arith::Fp32Add(0x80000000u, 0x80000000u), 0x80000000u);      // -0 + -0 = -0
  EXPECT_EQ(arith::Fp32Add(0x80000000u, 0x00000000u), 0x00000000u);      // -0 + +0 = +0
  EXPECT_EQ(arith::Bf16Mul(B(-2.0f), 0x0000u), 0x80000000u);             // -2 x +0 = -0
  EXPECT_EQ(arith::Fp32Add(0x7f800000u, 0xff800000u), arith::kFp32Nan);  // inf - inf
  EXPECT_EQ(arith::Bf16Mul(0x7f80u, 0x0000u), arith::kFp32Nan);          // inf x 0
  EXPECT_EQ(arith::Bf16Mul(0x7f80u, B(-1.0f)), 0xff800000u);             // inf x -1 = -inf
  EXPECT_EQ(arith::Fp32Add(0xffc12345u, F(1.0f)), arith::kFp32Nan);  // any NaN: the canonical one
  EXPECT_EQ(arith::Bf16OfFp32(0xffc12345u), arith::kBf16Nan);
  EXPECT_EQ(arith::Fp32Add(F(3.0e38f), F(3.0e38f)), 0x7f800000u);  // overflow: infinity
}

TEST(Bf16Test, MaxOrdersSignedZerosAndPropagatesNan) {
  EXPECT_EQ(arith::Fp32Max(0x80000000u, 0x00000000u), 0x00000000u);
  EXPECT_EQ(arith::Fp32Max(F(-3.0f), F(-2.0f)), F(-2.0f));
  EXPECT_EQ(arith::Fp32Max(F(-3.0f), F(2.0f)), F(2.0f));
  EXPECT_EQ(arith::Fp32Max(0xff800000u, F(-1e30f)), F(-1e30f));
  EXPECT_EQ(arith::Fp32Max(F(1.0f), 0x7fc00001u), arith::kFp32Nan);
}

TEST(Bf16Test, MinOrdersSignedZerosAndPropagatesNan) {
  EXPECT_EQ(arith::Fp32Min(0x80000000u, 0u), 0x80000000u);  // -0 < +0
  EXPECT_EQ(arith::Fp32Min(F(7.0f), F(6.0f)), F(6.0f));
  EXPECT_EQ(arith::Fp32Min(F(-7.0f), F(6.0f)), F(-7.0f));
  EXPECT_EQ(arith::Fp32Min(F(5.0f), arith::kFp32Inf), F(5.0f));
  EXPECT_EQ(arith::Fp32Min(0x7fc00001u, F(1.0f)), arith::kFp32Nan);
}

TEST(Bf16Test, QuarterIsExactOrFlushed) {
  EXPECT_EQ(arith::Fp32Quarter(F(10.0f)), F(2.5f));
  EXPECT_EQ(arith::Fp32Quarter(0x01800000u), 0x00800000u);  // 2^-124 / 4: the smallest normal
  EXPECT_EQ(arith::Fp32Quarter(0x01000000u), 0x00000000u);  // 2^-125 / 4: subnormal, so +0
  EXPECT_EQ(arith::Fp32Quarter(0x80800000u), 0x80000000u);  // -2^-126 / 4: subnormal, so -0
  EXPECT_EQ(arith::Fp32Quarter(0xff800000u), 0xff800000u);
}

// The vector unit's step (docs/bf16.md, "The chip in bf16"): ReLU, the bound, one rounding.
TEST(Bf16Test, VectorUnitStep) {
  EXPECT_EQ(arith::Bf16Activate(0x80000000u, true, arith::kFp32Inf), 0x0000u);  // ReLU(-0) = +0
  EXPECT_EQ(arith::Bf16Activate(0x80000000u, false, arith::kFp32Inf), 0x8000u);
  EXPECT_EQ(arith::Bf16Activate(F(-3.0f), true, arith::kFp32Inf), 0x0000u);
  EXPECT_EQ(arith::Bf16Activate(0xffc00000u, true, arith::kFp32Inf),
            arith::kBf16Nan);                                                    // NaN stays NaN
  EXPECT_EQ(arith::Bf16Activate(F(7.0f), true, F(6.0f)), B(6.0f));               // ReLU6
  EXPECT_EQ(arith::Bf16Activate(0x3f808001u, false, arith::kFp32Inf), 0x3f81u);  // rounded once, up
  EXPECT_EQ(arith::Bf16Activate(F(-7.0f), false, F(6.0f)), B(-7.0f));
}

TEST(Bf16Test, PoolingAddsInWindowOrderThenQuarters) {
  const uint16_t v[4] = {B(1.0f), B(2.0f), B(3.0f), B(4.0f)};
  EXPECT_EQ(arith::Bf16Pool(v, true), B(2.5f));
  EXPECT_EQ(arith::Bf16Pool(v, false), B(4.0f));
  // 256 + 1 + 1 + 1 = 259 exactly in float32, / 4 = 64.75: bfloat16's step at 64 is 0.5,
  // so a tie between 64.5 (odd fraction) and 65 (even): 65. (Rounding each partial sum to
  // bfloat16 would give 256 + 1 = 256 three times, 64.)
  const uint16_t w[4] = {B(256.0f), B(1.0f), B(1.0f), B(1.0f)};
  EXPECT_EQ(arith::Bf16Pool(w, true), B(65.0f));
  const uint16_t nan[4] = {B(1.0f), arith::kBf16Nan, B(3.0f), B(4.0f)};
  EXPECT_EQ(arith::Bf16Pool(nan, false), arith::kBf16Nan);
  EXPECT_EQ(arith::Bf16Pool(nan, true), arith::kBf16Nan);
}

TEST(Bf16Test, AdditionOrderIsDownTheColumn) {
  // 1 + 2^-24 + 2^-24: added in order, each 2^-24 is a tie that rounds back to 1; added the
  // other way round, 2^-23 survives. The column order is the first.
  const std::vector<uint16_t> a = {B(1.0f), B(0x1p-24f), B(0x1p-24f)};
  const std::vector<uint16_t> w = {B(1.0f), B(1.0f), B(1.0f)};
  uint32_t c = 0;
  arith::Bf16TileProduct(1, 1, 3, 3, a.data(), 3, w.data(), 1, &c, 1, /*accumulate=*/false);
  EXPECT_EQ(c, F(1.0f));
  const std::vector<uint16_t> reversed = {B(0x1p-24f), B(0x1p-24f), B(1.0f)};
  arith::Bf16TileProduct(1, 1, 3, 3, reversed.data(), 3, w.data(), 1, &c, 1, false);
  EXPECT_EQ(c, F(1.0f + 0x1p-23f));
}

TEST(Bf16Test, PaddingRowsTurnANegativeZeroSumPositive) {
  // -2^-126 x 1.5 + 2^-126 x 1 ... is -2^-127 exactly: flushed to -0. A K-short tile's
  // zero rows then add +0, and -0 + +0 = +0.
  const std::vector<uint16_t> a = {B(-0x1.8p-126f), B(0x1p-126f)};
  const std::vector<uint16_t> w = {B(1.0f), B(1.0f)};
  uint32_t c = 1;
  arith::Bf16TileProduct(1, 1, 2, 2, a.data(), 2, w.data(), 1, &c, 1, false);
  EXPECT_EQ(c, 0x80000000u);  // the full tile: the sum stays -0
  arith::Bf16TileProduct(1, 1, 2, 4, a.data(), 2, w.data(), 1, &c, 1, false);
  EXPECT_EQ(c, 0x00000000u);  // two padding rows below
}

// The tile product and the GEMM against one MAC at a time, in the order of docs/bf16.md.
TEST(Bf16Test, GemmEqualsScalarMacsInTheArraysOrder) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t m = 5, k = 23, n = 7, tile = 8;
  std::vector<uint16_t> a(m * k), b(k * n);
  for (auto& v : a) v = arith::Bf16OfFp32(F(normal(rng)));
  for (auto& v : b) v = arith::Bf16OfFp32(F(normal(rng)));
  a[3] = 0x7f80u;  // an infinity, and a NaN in B: they must travel the same way
  b[40] = 0x7fc1u;
  std::vector<uint32_t> c(m * n);
  arith::Bf16Gemm(m, n, k, tile, a.data(), b.data(), c.data());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      uint32_t acc = 0;
      for (int64_t k0 = 0; k0 < k; k0 += tile) {
        uint32_t psum = 0;
        for (int64_t r = 0; r < tile; ++r) {
          const bool in = k0 + r < k;
          psum = arith::Bf16Mac(psum, in ? a[i * k + k0 + r] : 0, in ? b[(k0 + r) * n + j] : 0);
        }
        acc = k0 == 0 ? psum : arith::Fp32Add(acc, psum);
      }
      ASSERT_EQ(c[i * n + j], acc) << i << ", " << j;
    }
  }
}

// Layers skip their weight tiles of zeros (the blocks of 8 output columns and 8 K rows here):
// with finite activations the result is the whole GEMM's, bit for bit; a column block of
// zeros only keeps its last K tile; an infinity spreads only through the tiles taken.
TEST(Bf16Test, SkippingZeroTilesKeepsFiniteResultsAndConfinesInfinities) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t m = 4, k = 20, n = 19, tile = 8;  // K tiles 8, 8, 4; column blocks 8, 8, 3
  std::vector<uint16_t> a(m * k), b(k * n);
  for (auto& v : a) v = arith::Bf16OfFp32(F(normal(rng)));
  for (int64_t r = 0; r < k; ++r)
    for (int64_t j = 0; j < n; ++j) {
      // Block (K tile 0, columns 8-15) and the whole column block 16-18 are zeros.
      const bool zero = (r < 8 && j >= 8 && j < 16) || j >= 16;
      b[r * n + j] = zero ? 0 : arith::Bf16OfFp32(F(normal(rng)));
    }
  std::vector<uint32_t> whole(m * n), skipping(m * n);
  arith::Bf16Gemm(m, n, k, tile, a.data(), b.data(), whole.data());
  arith::Bf16GemmSkippingZeroTiles(m, n, k, tile, a.data(), b.data(), skipping.data());
  EXPECT_EQ(whole, skipping);
  a[1] = 0x7f80u;  // row 0, K row 1 (tile 0): an infinity
  arith::Bf16Gemm(m, n, k, tile, a.data(), b.data(), whole.data());
  arith::Bf16GemmSkippingZeroTiles(m, n, k, tile, a.data(), b.data(), skipping.data());
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_TRUE(arith::Fp32IsNan(whole[j]) || whole[j] == 0x7f800000u || whole[j] == 0xff800000u)
        << j;
    // Columns 8-15 skip K tile 0, the zero block; 16-18 take only their last K tile.
    EXPECT_EQ(j < 8, arith::Fp32IsNan(skipping[j]) || (skipping[j] & 0x7fffffffu) == 0x7f800000u)
        << j;
  }
  for (int64_t i = 1; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) EXPECT_EQ(whole[i * n + j], skipping[i * n + j]);
}

}  // namespace
}  // namespace tpu::nn
