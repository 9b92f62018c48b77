// The float32 arithmetic of the Cloud TPU core's vector unit (docs/vpu.md, "Float32
// arithmetic"; issue 73), bit for bit: the rules of arith/bf16.h for every operation
// (subnormal inputs and results are zeros of their sign, every rounding is IEEE round to
// nearest, ties to even, a NaN result is the one quiet NaN 0x7fc00000). Add, subtract,
// multiply, divide and square root are IEEE's correctly rounded operations under those
// rules; the exponential is a stated algorithm (Fp32Exp) whose error is measured over every
// float32 input (tests/arith/fp32_test.cc); a reciprocal square root is Fp32Div(1,
// Fp32Sqrt(x)). Values are bit patterns, as in bf16.h.
#pragma once

#include <cmath>
#include <cstdint>

#include "arith/bf16.h"

namespace tpu::arith {

inline constexpr uint32_t kFp32One = 0x3f800000u;

// -a (the canonical NaN stays itself).
inline uint32_t Fp32Neg(uint32_t a) {
  a = Fp32Canonical(a);
  return Fp32IsNan(a) ? kFp32Nan : a ^ 0x80000000u;
}

// a - b: a + (-b), one rounding (x - x is +0).
inline uint32_t Fp32Sub(uint32_t a, uint32_t b) { return Fp32Add(a, Fp32Neg(b)); }

// a x b, one rounding (0 x infinity is NaN).
inline uint32_t Fp32Mul(uint32_t a, uint32_t b) {
  const float p = FloatOfBits(Fp32Canonical(a)) * FloatOfBits(Fp32Canonical(b));
  return Fp32Canonical(BitsOfFloat(p));
}

// a / b, one rounding: x / 0 is an infinity of the quotient's sign (a subnormal b is a
// zero), 0 / 0 and infinity / infinity are NaN.
inline uint32_t Fp32Div(uint32_t a, uint32_t b) {
  const float q = FloatOfBits(Fp32Canonical(a)) / FloatOfBits(Fp32Canonical(b));
  return Fp32Canonical(BitsOfFloat(q));
}

// The square root, one rounding: sqrt(-0) is -0, of anything below zero NaN.
inline uint32_t Fp32Sqrt(uint32_t a) {
  return Fp32Canonical(BitsOfFloat(std::sqrt(FloatOfBits(Fp32Canonical(a)))));
}

// 1 / a, one rounding; 1 / sqrt(a), two (the square root's, then the quotient's).
inline uint32_t Fp32Recip(uint32_t a) { return Fp32Div(kFp32One, a); }
inline uint32_t Fp32Rsqrt(uint32_t a) { return Fp32Div(kFp32One, Fp32Sqrt(a)); }

// Comparisons give a mask: 1.0 where true, +0 where false; false where either is NaN; +0
// and -0 are equal.
inline uint32_t Fp32Less(uint32_t a, uint32_t b) {
  return FloatOfBits(Fp32Canonical(a)) < FloatOfBits(Fp32Canonical(b)) ? kFp32One : 0u;
}
inline uint32_t Fp32Equal(uint32_t a, uint32_t b) {
  return FloatOfBits(Fp32Canonical(a)) == FloatOfBits(Fp32Canonical(b)) ? kFp32One : 0u;
}

// a where the mask is not a zero (a NaN mask selects a), else b.
inline uint32_t Fp32Select(uint32_t mask, uint32_t a, uint32_t b) {
  return (Fp32Canonical(mask) & 0x7fffffffu) != 0 ? Fp32Canonical(a) : Fp32Canonical(b);
}

// e^x by the algorithm docs/vpu.md states, every step one of the operations above: n =
// nearest integer to x log2(e) (ties to even), r = (x - n ln2_hi) - n ln2_lo, p = the Taylor
// polynomial of degree 7 in r by Horner's rule, e^x = p x 2^h x 2^(n - h) with h = n / 2
// (exact scalings, so that a result below the smallest normal float32 is flushed and one
// above the largest is infinity); x above 89 gives infinity, below -104 gives +0 (no normal
// result lies beyond either). At most 2 ulps from e^x wherever e^x is a normal float32.
uint32_t Fp32Exp(uint32_t x);

// ln x by the algorithm docs/vpu.md states ("The logarithm"), every step one of the
// operations above: x = 2^e m with m in [sqrt(2) / 2, sqrt(2)) (m compared with sqrt(2)),
// f = m - 1 (exact), s = f / (m + 1), z = s^2, R = z p(z) with p Horner's rule over 2/11,
// 2/9, 2/7, 2/5, 2/3 (ln m = 2 atanh s = 2 s + s R), h = (f f) / 2, and, as fdlibm's logf
// keeps f exact to the end, ln x = e ln2_hi - ((h - (s (h + R) + e ln2_lo)) - f) (fp32_exp's
// split of ln 2). -inf at +-0 (subnormals are zeros), NaN below 0 and at NaN, +inf at +inf.
uint32_t Fp32Log(uint32_t x);

// The sum of n values (a row's lanes) as the vector unit's reduction tree adds them:
// v[2i] + v[2i + 1] at each level, from the lanes' pairs to the root, a last odd one passed
// up to the next level as it is.
uint32_t Fp32TreeSum(const uint32_t* v, int n);
// The largest of n values the same way (Fp32Max: NaN when any is).
uint32_t Fp32TreeMax(const uint32_t* v, int n);

}  // namespace tpu::arith
