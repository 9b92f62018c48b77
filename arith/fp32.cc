// See fp32.h. Built with -ffp-contract=off (arith/CMakeLists.txt): every product and sum
// below is its own rounding, as the vector unit's.
#include "arith/fp32.h"

#include <vector>

namespace tpu::arith {
namespace {

uint32_t Bits(float f) { return BitsOfFloat(f); }

// Cody and Waite's split of ln 2 (as Cephes' expf): ln2_hi has 9 significant bits, so n
// ln2_hi is exact for |n| < 2^15; ln2_hi + ln2_lo is ln 2 to about 2^-32.
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
// 1 / k! for k = 7 down to 0, each rounded to float32.
constexpr float kTaylor[] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24,
                             1.0f / 6,    0.5f,       1.0f,       1.0f};

// 2^k for -126 <= k <= 127.
uint32_t Pow2(int k) { return static_cast<uint32_t>(k + 127) << 23; }

}  // namespace

uint32_t Fp32Exp(uint32_t x) {
  x = Fp32Canonical(x);
  if (Fp32IsNan(x)) return kFp32Nan;
  const float f = FloatOfBits(x);
  if (f > 89.0f) return kFp32Inf;
  if (f < -104.0f) return 0;
  const float n = std::nearbyint(FloatOfBits(Fp32Mul(x, Bits(kLog2e))));
  uint32_t r = Fp32Sub(x, Fp32Mul(Bits(n), Bits(kLn2Hi)));
  r = Fp32Sub(r, Fp32Mul(Bits(n), Bits(kLn2Lo)));
  uint32_t p = Bits(kTaylor[0]);
  for (int k = 1; k < 8; ++k) p = Fp32Add(Fp32Mul(p, r), Bits(kTaylor[k]));
  const int ni = static_cast<int>(n), h = ni / 2;
  return Fp32Mul(Fp32Mul(p, Pow2(h)), Pow2(ni - h));
}

namespace {

template <class Join>
uint32_t Tree(const uint32_t* v, int n, Join join) {
  std::vector<uint32_t> level(v, v + n);
  for (int width = n; width > 1; width /= 2)
    for (int i = 0; i < width / 2; ++i)
      level[static_cast<size_t>(i)] =
          join(level[static_cast<size_t>(2 * i)], level[static_cast<size_t>(2 * i + 1)]);
  return Fp32Canonical(level[0]);
}

}  // namespace

uint32_t Fp32TreeSum(const uint32_t* v, int n) { return Tree(v, n, Fp32Add); }
uint32_t Fp32TreeMax(const uint32_t* v, int n) { return Tree(v, n, Fp32Max); }

}  // namespace tpu::arith
