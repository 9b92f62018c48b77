// See fp32.h. Built with -ffp-contract=off (arith/CMakeLists.txt): every product and sum
// below is its own rounding, as the vector unit's.
#include "arith/fp32.h"

#include <vector>

#include "contract/tpu_contract.h"

namespace tpu::arith {
namespace {

// The constants are the contract's ([fp32_exp]), as the RTL's: log2(e), Cody and Waite's
// split of ln 2 (ln2_hi has 9 significant bits, so n ln2_hi is exact for |n| < 2^15), the
// Taylor coefficients 1 / k! for k = 7 down to 0.
constexpr uint32_t kTaylor[] = {hw::kFp32ExpTaylor0, hw::kFp32ExpTaylor1, hw::kFp32ExpTaylor2,
                                hw::kFp32ExpTaylor3, hw::kFp32ExpTaylor4, hw::kFp32ExpTaylor5,
                                hw::kFp32ExpTaylor6, hw::kFp32ExpTaylor7};

// 2^k for -126 <= k <= 127.
uint32_t Pow2(int k) { return static_cast<uint32_t>(k + 127) << 23; }

}  // namespace

uint32_t Fp32Exp(uint32_t x) {
  x = Fp32Canonical(x);
  if (Fp32IsNan(x)) return kFp32Nan;
  const float f = FloatOfBits(x);
  if (f > 89.0f) return kFp32Inf;
  if (f < -104.0f) return 0;
  const uint32_t n = BitsOfFloat(std::nearbyint(FloatOfBits(Fp32Mul(x, hw::kFp32ExpLog2e))));
  uint32_t r = Fp32Sub(x, Fp32Mul(n, hw::kFp32ExpLn2Hi));
  r = Fp32Sub(r, Fp32Mul(n, hw::kFp32ExpLn2Lo));
  uint32_t p = kTaylor[0];
  for (int k = 1; k < 8; ++k) p = Fp32Add(Fp32Mul(p, r), kTaylor[k]);
  const int ni = static_cast<int>(FloatOfBits(n)), h = ni / 2;
  return Fp32Mul(Fp32Mul(p, Pow2(h)), Pow2(ni - h));
}

uint32_t Fp32Log(uint32_t x) {
  x = Fp32Canonical(x);
  if (Fp32IsNan(x) || (x >> 31 != 0 && (x & 0x7fffffffu) != 0)) return kFp32Nan;
  if ((x & 0x7fffffffu) == 0) return kFp32Inf | 0x80000000u;
  if (x == kFp32Inf) return kFp32Inf;
  int e = static_cast<int>(x >> 23) - 127;
  uint32_t m = (x & 0x007fffffu) | kFp32One;  // [1, 2)
  if (m > hw::kFp32LogSqrt2) {                // to [sqrt(2) / 2, 1)
    m -= 0x00800000u;
    ++e;
  }
  const uint32_t f = Fp32Sub(m, kFp32One);
  const uint32_t s = Fp32Div(f, Fp32Add(m, kFp32One));
  const uint32_t z = Fp32Mul(s, s);
  constexpr uint32_t kSeries[] = {hw::kFp32LogSeries0, hw::kFp32LogSeries1, hw::kFp32LogSeries2,
                                  hw::kFp32LogSeries3, hw::kFp32LogSeries4};
  uint32_t p = kSeries[0];
  for (int k = 1; k < 5; ++k) p = Fp32Add(Fp32Mul(p, z), kSeries[k]);
  const uint32_t r = Fp32Mul(z, p);                           // 2 s^2 / 3 + ...
  const uint32_t hfsq = Fp32Mul(Fp32Mul(f, f), 0x3f000000u);  // f^2 / 2
  const uint32_t en = BitsOfFloat(static_cast<float>(e));
  const uint32_t t = Fp32Add(Fp32Mul(s, Fp32Add(hfsq, r)), Fp32Mul(en, hw::kFp32ExpLn2Lo));
  return Fp32Sub(Fp32Mul(en, hw::kFp32ExpLn2Hi), Fp32Sub(Fp32Sub(hfsq, t), f));
}

namespace {

template <class Join>
uint32_t Tree(const uint32_t* v, int n, Join join) {
  std::vector<uint32_t> level(v, v + n);
  for (int width = n; width > 1; width = (width + 1) / 2) {
    for (int i = 0; i < width / 2; ++i)
      level[static_cast<size_t>(i)] =
          join(level[static_cast<size_t>(2 * i)], level[static_cast<size_t>(2 * i + 1)]);
    if (width % 2 == 1)
      level[static_cast<size_t>(width / 2)] = level[static_cast<size_t>(width - 1)];
  }
  return Fp32Canonical(level[0]);
}

}  // namespace

uint32_t Fp32TreeSum(const uint32_t* v, int n) { return Tree(v, n, Fp32Add); }
uint32_t Fp32TreeMax(const uint32_t* v, int n) { return Tree(v, n, Fp32Max); }

}  // namespace tpu::arith
