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
// Fp32Canonical (written with masks) against its rule, on every exponent and sign with
// fractions at both ends and random ones between.
TEST(Bf16Test, CanonicalFollowsTheRule) {
  auto rule = [](uint32_t x) -> uint32_t {
    if ((x & 0x7fffffffu) > 0x7f800000u) return arith::kFp32Nan;
    if ((x & 0x7f800000u) == 0) return x & 0x80000000u;
    return x;
  };
  std::mt19937 rng(7);
  for (uint32_t top = 0; top < 512; ++top) {  // sign and exponent
    for (uint32_t frac : {0u, 1u, 0x7fffffu, 0x400000u, static_cast<uint32_t>(rng()) & 0x7fffffu}) {
      const uint32_t x = top << 23 | frac;
      ASSERT_EQ(arith::Fp32Canonical(x), rule(x)) << std::hex << x;
    }
  }
}

// Fp32Max and Fp32Min (written with masks) against the rule: NaN if either is, else the
// larger (smaller) number, +0 above -0; on edge values and random patterns.
TEST(Bf16Test, MaxAndMinFollowTheRule) {
  auto larger = [](uint32_t a, uint32_t b, bool max) -> uint32_t {
    a = arith::Fp32Canonical(a);
    b = arith::Fp32Canonical(b);
    if (arith::Fp32IsNan(a) || arith::Fp32IsNan(b)) return arith::kFp32Nan;
    const float x = arith::FloatOfBits(a), y = arith::FloatOfBits(b);
    if (x == y) return (a == 0x80000000u) == max ? b : a;  // +0 above -0
    return (x > y) == max ? a : b;
  };
  std::mt19937 rng(9);
  const std::vector<uint32_t> edges = {0u,          0x80000000u, 0x00000001u, 0x807fffffu,
                                       0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
                                       F(1.0f),     F(-1.0f),    F(6.0f),     0xff7fffffu};
  for (int i = 0; i < 200000; ++i) {
    const uint32_t a = i < 144 ? edges[i % 12] : rng(), b = i < 144 ? edges[i / 12] : rng();
    ASSERT_EQ(arith::Fp32Max(a, b), larger(a, b, true)) << std::hex << a << ", " << b;
    ASSERT_EQ(arith::Fp32Min(a, b), larger(a, b, false)) << std::hex << a << ", " << b;
  }
}

// The activate, written with masks (arith::Bf16Activate), against the rule written with
// branches, on random bit patterns and on the values at the edges (zeros, subnormals, the
// largest, infinities, NaNs, ties), with and without ReLU and an upper bound.
TEST(Bf16Test, MaskedActivateFollowsTheRule) {
  auto round = [](uint32_t x) -> uint16_t {  // Bf16OfFp32 as the rule says it
    x = arith::Fp32Canonical(x);
    if (arith::Fp32IsNan(x)) return arith::kBf16Nan;
    if ((x & 0x7f800000u) == 0x7f800000u) return static_cast<uint16_t>(x >> 16);
    const uint32_t lsb = (x >> 16) & 1u;
    return static_cast<uint16_t>((x + 0x7fffu + lsb) >> 16);
  };
  auto activate = [&](uint32_t sum, bool relu, uint32_t hi) -> uint16_t {
    uint32_t y = arith::Fp32Canonical(sum);
    if (relu && !arith::Fp32IsNan(y) && ((y & 0x80000000u) || (y & 0x7fffffffu) == 0)) y = 0;
    return round(arith::Fp32Min(y, hi));
  };
  const std::vector<uint32_t> edges = {
      0u,          0x80000000u, 0x00000001u, 0x807fffffu, 0x00800000u, 0x7f7fffffu, 0xff7fffffu,
      0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc12345u, 0x7f800001u, 0x3f808000u, 0x3f818000u,
      0xbf808000u, F(6.0f),     F(-6.0f),    0x7f7f8000u, 0x7f7f7fffu, 0x00ffffffu};
  auto check = [&](uint32_t acc, uint32_t bias, uint32_t hi) {
    const uint32_t sum = arith::Fp32Add(acc, bias);
    ASSERT_EQ(arith::Bf16OfFp32(sum), round(sum)) << std::hex << sum;
    for (const bool relu : {false, true})
      ASSERT_EQ(arith::Bf16Activate(sum, relu, hi), activate(sum, relu, hi))
          << std::hex << acc << " + " << bias << ", at most " << hi << (relu ? ", ReLU" : "");
  };
  std::mt19937 rng(5);
  for (uint32_t a : edges)
    for (uint32_t b : edges)
      for (uint32_t h : edges) check(a, b, h);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t a = rng(), b = rng() % 4 ? rng() : edges[rng() % edges.size()];
    check(a, b, rng() % 2 ? arith::kFp32Inf : rng() % 2 ? F(6.0f) : rng());
  }
  // A row at a time (Bf16ActivateRow: the same loop, compiled for the CPU's widest vector
  // unit), rows of 1 to 300 lanes, every lane against the rule.
  for (int i = 0; i < 3000; ++i) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 300);
    std::vector<uint32_t> acc(static_cast<size_t>(n));
    std::vector<arith::Bf16Channel> ch(static_cast<size_t>(n));
    std::vector<uint16_t> y(static_cast<size_t>(n));
    auto value = [&]() -> uint32_t { return rng() % 4 ? rng() : edges[rng() % edges.size()]; };
    for (int64_t l = 0; l < n; ++l) {
      acc[static_cast<size_t>(l)] = value();
      ch[static_cast<size_t>(l)] = {value(), rng() % 2 ? arith::kFp32Inf : value()};
    }
    const bool relu = rng() % 2;
    arith::Bf16ActivateRow(acc.data(), ch.data(), relu, y.data(), n);
    for (int64_t l = 0; l < n; ++l) {
      const auto& c = ch[static_cast<size_t>(l)];
      const uint32_t sum = arith::Fp32Add(acc[static_cast<size_t>(l)], c.bias);
      ASSERT_EQ(y[static_cast<size_t>(l)], activate(sum, relu, c.hi))
          << "lane " << l << " of " << n;
    }
  }
}

// A tile whose non-zero weights fill the box [r0, r1) x [c0, c1) (some zeros inside), or
// with `sparse` a span of one to three columns in some rows; outside them +0, -0 or a
// subnormal (a zero once widened).
std::vector<uint16_t> TileWithZeros(std::mt19937& rng, int64_t k, int64_t n, bool sparse) {
  const std::vector<float> ws = {1.0f, -1.0f, 0.5f, -0.0f, 0.0f};
  const uint16_t zeros[] = {0x0000u, 0x8000u, 0x0001u, 0x8003u};
  std::vector<uint16_t> b(static_cast<size_t>(k * n));
  for (auto& v : b) v = zeros[rng() % 4];
  const int64_t r0 = rng() % k, r1 = r0 + 1 + rng() % (k - r0);
  const int64_t c0 = rng() % n, c1 = c0 + 1 + rng() % (n - c0);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t lo = sparse ? static_cast<int64_t>(rng() % n) : c0;
    const int64_t hi = sparse ? std::min(n, lo + 1 + static_cast<int64_t>(rng() % 3)) : c1;
    if (sparse && rng() % 4 == 0) continue;
    for (int64_t j = lo; j < hi; ++j) b[r * n + j] = B(ws[rng() % ws.size()]);
  }
  return b;
}

// The fast engine's product of the non-zero weights only against the whole tile's, on
// values chosen to make -0 sums (tiny products flushed), on dense boxes, sparse rows and
// permutations, with infinities and NaNs in the activations and in the weights, and rows of
// activations with one non-zero (a transpose's).
TEST(Bf16Test, SparseProductEqualsTheWholeTiles) {
  std::mt19937 rng(11);
  const std::vector<float> xs = {0x1p-126f, -0x1.8p-126f, 0x1.4p-126f, 1.0f, -2.0f, 0.0f, -0.0f};
  const int64_t m = 8, n = 12, rows = 16;
  int negative_zeros = 0, nans = 0, by_rows = 0, layered = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int64_t k = trial % 2 ? rows : rows - 3;
    std::vector<uint16_t> a(m * k);
    for (auto& v : a) v = B(xs[rng() % xs.size()]);
    if (trial % 4 == 3) {  // a transpose's rows: one non-zero activation each, zeros of both signs
      for (auto& v : a) v = rng() % 2 ? 0x0000u : 0x8000u;
      for (int64_t i = 0; i < m; ++i) a[i * k + (i + trial) % k] = B(xs[3 + rng() % 2]);
    }
    if (trial % 5 == 0) a[rng() % a.size()] = trial % 10 ? 0x7f80u : 0xffc0u;
    std::vector<uint16_t> b = TileWithZeros(rng, k, n, trial % 3 == 1);
    if (trial % 7 == 3) b[rng() % b.size()] = trial % 2 ? 0x7f80u : 0xffc1u;  // a weight inf, NaN
    if (trial % 3 == 2) {  // a permutation of the columns, -1 and 1
      std::fill(b.begin(), b.end(), 0);
      for (int64_t r = 0; r < std::min(k, n); ++r)
        b[r * n + (r * 5 + trial) % n] = B(r % 2 ? -1.0f : 1.0f);
    }
    std::vector<float> wide(k * n);
    arith::WidenBf16(k, n, b.data(), n, wide.data());
    const arith::TileNonZeros nz = arith::NonZerosOf(k, n, wide.data(), n);
    by_rows += nz.by_rows;
    layered += nz.depth > 0;
    std::vector<uint32_t> start(m * n);
    for (auto& v : start) v = F(xs[rng() % xs.size()]);
    for (const bool accumulate : {false, true}) {
      std::vector<uint32_t> whole = start, sparse = start;
      arith::Bf16TileProductF(m, n, k, rows, a.data(), k, wide.data(), n, whole.data(), n,
                              accumulate);
      arith::Bf16TileProductSparse(m, n, k, rows, a.data(), k, wide.data(), n, nz, sparse.data(), n,
                                   accumulate);
      ASSERT_EQ(sparse, whole) << "trial " << trial << (accumulate ? ", accumulating" : "");
      for (uint32_t v : whole) {
        negative_zeros += v == 0x80000000u;
        nans += arith::Fp32IsNan(v);
      }
    }
  }
  // The cases the sparse product must take care of did occur.
  EXPECT_GT(negative_zeros, 0);
  EXPECT_GT(nans, 0);
  EXPECT_GT(by_rows, 100);
  EXPECT_GT(layered, 100);  // the products over layers of weights (TileNonZeros::depth)
}

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
