// The bfloat16 arithmetic of a bf16 chip (docs/bf16.md), bit for bit as the RTL does it:
// values are bit patterns (uint16_t for bfloat16, uint32_t for float32), so that every
// rule about rounding, zeros, subnormals, infinities and NaN is explicit and the reference
// cannot drift with compiler flags.
//
// The rules, in short: subnormal inputs count as zeros of their sign, subnormal results
// become zeros of their sign (flush to zero); every rounding is IEEE round to nearest,
// ties to even; a NaN result is always the one quiet NaN 0x7fc00000 (bf16 0x7fc0).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace tpu::arith {

inline constexpr uint32_t kFp32Nan = 0x7fc00000u;
inline constexpr uint16_t kBf16Nan = 0x7fc0u;
// The most negative finite bfloat16, -(2 - 2^-7) x 2^127: what `set_window pad_min` pads
// with on a bf16 chip (rtl/tpu_pkg.sv PadMin).
inline constexpr uint16_t kBf16Lowest = 0xff7fu;

inline float FloatOfBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline uint32_t BitsOfFloat(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

inline bool Fp32IsNan(uint32_t x) { return (x & 0x7fffffffu) > 0x7f800000u; }

// A float32 as the chip holds it: subnormals become zeros of their sign, every NaN the
// canonical one.
// Written with masks, not branches, so that loops of it run on the CPU's vector unit.
inline uint32_t MaskOf(bool c) { return 0u - static_cast<uint32_t>(c); }  // all ones if c
inline uint32_t Fp32Canonical(uint32_t x) {
  const uint32_t sub = MaskOf((x & 0x7f800000u) == 0), nan = MaskOf(Fp32IsNan(x));
  return (kFp32Nan & nan) | (x & ~nan & ~(sub & 0x7fffffffu));
}

// A bfloat16 widened to float32 (exact), subnormals flushed.
inline uint32_t Fp32OfBf16(uint16_t b) { return Fp32Canonical(uint32_t{b} << 16); }

// float32 to bfloat16: round to nearest even; a result below the smallest normal bfloat16
// becomes a zero of its sign; above the largest, an infinity; NaN the canonical one.
// Rounding carries into the exponent when it must; it cannot make a normal value
// subnormal, and it may reach infinity (exponent 0xff, fraction 0), the right answer
// there. An infinity (fraction 0) stays one, and the canonical NaN 0x7fc00000 rounds to
// the canonical 0x7fc0, so no case needs a branch (the loops of it vectorize).
inline uint16_t Bf16OfFp32(uint32_t x) {
  x = Fp32Canonical(x);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// The exact product of two bfloat16 values as a float32 (16 significant bits always fit):
// overflow gives an infinity, a product below the smallest normal float32 a zero of its
// sign; 0 x infinity and any NaN give NaN.
inline uint32_t Bf16Mul(uint16_t a, uint16_t b) {
  const float p = FloatOfBits(Fp32OfBf16(a)) * FloatOfBits(Fp32OfBf16(b));
  return Fp32Canonical(BitsOfFloat(p));
}

// float32 addition, round to nearest even, with the chip's zero, subnormal and NaN rules
// (x + (-x) is +0; -0 + -0 is -0; infinity - infinity is NaN).
inline uint32_t Fp32Add(uint32_t a, uint32_t b) {
  const float s = FloatOfBits(Fp32Canonical(a)) + FloatOfBits(Fp32Canonical(b));
  return Fp32Canonical(BitsOfFloat(s));
}

// The float32 bit patterns in the order of the numbers they stand for (-0 below +0).
inline uint32_t Fp32OrderKey(uint32_t x) { return x ^ ((0u - (x >> 31)) | 0x80000000u); }

// The larger of two float32 values (matmul max): NaN when either is NaN; +0 is larger
// than -0. (With masks, as Fp32Canonical.)
inline uint32_t Fp32Max(uint32_t a, uint32_t b) {
  a = Fp32Canonical(a);
  b = Fp32Canonical(b);
  const uint32_t nan = MaskOf(Fp32IsNan(a) | Fp32IsNan(b));
  const uint32_t first = MaskOf(Fp32OrderKey(a) >= Fp32OrderKey(b));
  return (kFp32Nan & nan) | (((a & first) | (b & ~first)) & ~nan);
}

// The smaller of two float32 values: NaN when either is NaN; -0 is smaller than +0.
inline uint32_t Fp32Min(uint32_t a, uint32_t b) {
  a = Fp32Canonical(a);
  b = Fp32Canonical(b);
  const uint32_t nan = MaskOf(Fp32IsNan(a) | Fp32IsNan(b));
  const uint32_t first = MaskOf(Fp32OrderKey(a) <= Fp32OrderKey(b));
  return (kFp32Nan & nan) | (((a & first) | (b & ~first)) & ~nan);
}

// x / 4: exact, or a zero of its sign below the smallest normal (average pooling).
inline uint32_t Fp32Quarter(uint32_t x) {
  return Fp32Canonical(BitsOfFloat(FloatOfBits(Fp32Canonical(x)) * 0.25f));
}

// The float32 vector unit's value step (docs/bf16.md, "Networks"; rtl/tpu_pkg.sv
// Bf16Activate): the biased sum, ReLU (y > 0 ? y : +0, NaN stays NaN) when `relu`, then at
// most `hi` (float32 bits: +infinity for no bound, 6 for ReLU6), rounded to bfloat16.
inline uint16_t Bf16Activate(uint32_t sum, bool relu, uint32_t hi) {
  uint32_t y = Fp32Canonical(sum);
  // ReLU: a value below zero or a zero becomes +0 (canonical: a zero is 0 or the sign bit).
  // With masks, as Fp32Canonical: the fast engine's loops over a row's lanes vectorize.
  y &= ~(MaskOf(relu & !Fp32IsNan(y)) & MaskOf(((y >> 31) | (y == 0)) != 0));
  return Bf16OfFp32(Fp32Min(y, hi));
}
inline constexpr uint32_t kFp32Inf = 0x7f800000u;

// One output channel's vector-unit parameters (float32 bits): the bias, and the upper
// bound the activate clamps at (+inf: none; ReLU6's 6). A lane beyond the channels: bias 0,
// bound 0.
struct Bf16Channel {
  uint32_t bias = 0, hi = 0;
};

// A row of n lanes activated: y[l] = Bf16Activate(Fp32Add(acc[l], ch[l].bias), relu,
// ch[l].hi), on the CPU's widest vector unit (bf16.cc).
void Bf16ActivateRow(const uint32_t* acc, const Bf16Channel* ch, bool relu, uint16_t* y, int64_t n);

// 2 x 2 pooling of four bfloat16 values in window order (top left, top right, bottom left,
// bottom right): the maximum, or the float32 sum in that order times 1/4, rounded.
inline uint16_t Bf16Pool(const uint16_t v[4], bool avg) {
  uint32_t acc = Fp32OfBf16(v[0]);
  for (int q = 1; q < 4; ++q)
    acc = avg ? Fp32Add(acc, Fp32OfBf16(v[q])) : Fp32Max(acc, Fp32OfBf16(v[q]));
  return Bf16OfFp32(avg ? Fp32Quarter(acc) : acc);
}

// The float32 vector unit's residual add (stage 3, docs/bf16.md "Networks"; rtl/tpu_vpu.sv):
// the layer's bfloat16 output y plus the residual r in float32, y's zero (or subnormal)
// taken as +0 as the array's columns give it, ReLU when `relu`, rounded to bfloat16. With
// y's zero made +0 the sum is the same whichever input came through the array.
inline uint16_t Bf16ResidualAdd(uint16_t y, uint16_t r, bool relu) {
  return Bf16Activate(Fp32Add(Fp32Add(0, Fp32OfBf16(y)), Fp32OfBf16(r)), relu, kFp32Inf);
}

// One processing element's step: psum + a x w, the product exact, one rounding.
inline uint32_t Bf16Mac(uint32_t psum, uint16_t a, uint16_t w) {
  return Fp32Add(psum, Bf16Mul(a, w));
}

// The matrix unit's product of one tile, in its order: C[i][j] = the sum over the array's
// `array_rows` rows of A[i][r] x B[r][j], added down the column from r = 0 starting at +0,
// one rounding per add (docs/bf16.md); rows k and below hold zero weights and see zero
// activations (their +0 products still pass the sum: -0 + +0 is +0). A: m x k, B: k x n,
// C: m x n float32 bit patterns, row-major with the given row strides. With `accumulate`,
// the column sum is then added to C (the accumulators' add); otherwise it replaces C.
void Bf16TileProduct(int64_t m, int64_t n, int64_t k, int64_t array_rows, const uint16_t* a,
                     int64_t lda, const uint16_t* b, int64_t ldb, uint32_t* c, int64_t ldc,
                     bool accumulate);

// B (k x n, row stride ldb) widened to float32 values, subnormals flushed: out is k x n,
// dense. A tile that many rows multiply is widened once (Bf16TileProductF).
void WidenBf16(int64_t k, int64_t n, const uint16_t* b, int64_t ldb, float* out);

// Bf16TileProduct with B already widened (WidenBf16; row stride ldb in floats).
void Bf16TileProductF(int64_t m, int64_t n, int64_t k, int64_t array_rows, const uint16_t* a,
                      int64_t lda, const float* b, int64_t ldb, uint32_t* c, int64_t ldc,
                      bool accumulate);

// Where a widened tile's (WidenBf16) weights other than zeros lie: the box of rows
// [row_lo, row_hi) and columns [col_lo, col_hi) that holds them all (an all-zero tile: an
// empty box at 0), and each row's columns [lo[r], hi[r]) (lo == hi: none). `by_rows` when
// the rows' spans cover under half the box (an identity or a permutation covers 1/N of it).
struct TileNonZeros {
  int64_t row_lo = 0, row_hi = 0, col_lo = 0, col_hi = 0;
  std::vector<int64_t> lo, hi;
  bool by_rows = false;
  // With by_rows, where each column holds few weights (a permutation: one; the poolings'
  // quarters: four) and at most kMaxDepth: the weights column by column in `depth` layers,
  // layer d holding each column's d-th weight from the top (rows[d C + c], w[d C + c] for
  // column col_lo + c, C = col_hi - col_lo); a column with fewer holds +0 at row row_lo in
  // the rest. 0: none.
  static constexpr int64_t kMaxDepth = 8;
  int64_t depth = 0;
  std::vector<int32_t> rows;
  std::vector<float> w;
  // Whether every weight is finite: then a row of activations with few non-zeros takes only
  // their weight rows (a zero times a finite weight is a zero; Bf16TileProductSparse).
  bool finite = true;
};
TileNonZeros NonZerosOf(int64_t k, int64_t n, const float* b, int64_t ldb);

// Bf16TileProductF, bit for bit, multiplying only the weights `nz` (NonZerosOf b) marks: a
// product of a zero weight and a finite activation is a zero, and leaving zeros out of a
// sum changes at most a +0 result into -0. So a row of A holding an infinity or NaN takes
// the whole tile, and a column whose sum comes out -0 is summed again over every row. The
// fast engine's product.
void Bf16TileProductSparse(int64_t m, int64_t n, int64_t k, int64_t array_rows, const uint16_t* a,
                           int64_t lda, const float* b, int64_t ldb, const TileNonZeros& nz,
                           uint32_t* c, int64_t ldc, bool accumulate);

// C = A x B as a chip with an array of `tile` x `tile` computes it: K in tiles of `tile`
// rows, each tile's column sums (Bf16TileProduct) added into C tile by tile, from the
// first K tile to the last. A: m x k, B: k x n, C: m x n, all dense row-major.
void Bf16Gemm(int64_t m, int64_t n, int64_t k, int64_t tile, const uint16_t* a, const uint16_t* b,
              uint32_t* c);

// Bf16Gemm as a network's layer runs on the chip (docs/bf16.md, "Networks"): per block of
// `tile` output columns, its K tiles in order, a tile whose weights are all +0 (bit pattern
// 0) left out unless it is the block's last and none came before; the first tile taken
// replaces C, the others add to it. With finite activations the result is Bf16Gemm's (a
// tile of +0 weights adds +0, and no column sum is -0); an infinity or NaN spreads only
// through the tiles taken.
void Bf16GemmSkippingZeroTiles(int64_t m, int64_t n, int64_t k, int64_t tile, const uint16_t* a,
                               const uint16_t* b, uint32_t* c);

}  // namespace tpu::arith
