// The bfloat16 reference kernels (see bf16.h, docs/bf16.md).
#include "arith/bf16.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

namespace tpu::arith {
namespace {

#if defined(__SSE2__)
// Flush-to-zero and denormals-are-zero in this thread's SSE control register for a scope:
// the CPU then turns subnormal results and inputs into zeros of their sign, rule 1 of
// docs/bf16.md, and the tile product's inner loop is a plain multiply and add (the product
// of two bfloat16 values is exact, and a product below 2^-126 is flushed before the add,
// as the chip does: the two are separate instructions, never fused; the build compiles
// this file with -ffp-contract=off). On x86 a result is flushed when it is below 2^-126
// after rounding; no sum of normal floats and no bf16 product rounds up to 2^-126 from
// below, so that is the chip's rule exactly.
class FlushMode {
 public:
  FlushMode() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }  // FTZ | DAZ
  ~FlushMode() { _mm_setcsr(saved_); }
  FlushMode(const FlushMode&) = delete;
  FlushMode& operator=(const FlushMode&) = delete;

 private:
  unsigned saved_;
};
constexpr bool kHardwareFlush = true;
#else
struct FlushMode {};
constexpr bool kHardwareFlush = false;
#endif

// Flush to zero as the chip does (a subnormal becomes a zero of its sign), written so that
// the compiler vectorizes it: NaN and the normal values pass, NaN payloads are made
// canonical when a value is stored.
inline float Flush(float v) { return std::fabs(v) < FLT_MIN ? std::copysign(0.0f, v) : v; }

}  // namespace

void WidenBf16(int64_t k, int64_t n, const uint16_t* b, int64_t ldb, float* out) {
  for (int64_t r = 0; r < k; ++r)
    for (int64_t j = 0; j < n; ++j) out[r * n + j] = FloatOfBits(Fp32OfBf16(b[r * ldb + j]));
}

void Bf16TileProductF(int64_t m, int64_t n, int64_t k, int64_t array_rows, const uint16_t* a,
                      int64_t lda, const float* b, int64_t ldb, uint32_t* c, int64_t ldc,
                      bool accumulate) {
  // Each row's column sums in float, added in the array's order (down the column, r = 0
  // first), every product and sum flushed: by the CPU where it can, else by Flush.
  std::vector<float> psum(static_cast<size_t>(n));
  const FlushMode flush_mode;
  for (int64_t i = 0; i < m; ++i) {
    std::fill(psum.begin(), psum.end(), 0.0f);
    float* p = psum.data();
    for (int64_t r = 0; r < k; ++r) {
      const float x = FloatOfBits(Fp32OfBf16(a[i * lda + r]));
      const float* w = b + r * ldb;
      if (kHardwareFlush) {
        for (int64_t j = 0; j < n; ++j) p[j] += x * w[j];
      } else {
        for (int64_t j = 0; j < n; ++j) p[j] = Flush(p[j] + Flush(x * w[j]));
      }
    }
    // The rows below K add +0 (only a -0 sum changes).
    if (k < array_rows)
      for (int64_t j = 0; j < n; ++j) psum[j] += 0.0f;
    uint32_t* row = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) {
      const uint32_t s = Fp32Canonical(BitsOfFloat(psum[j]));
      row[j] = accumulate ? Fp32Add(row[j], s) : s;
    }
  }
}

void Bf16TileProduct(int64_t m, int64_t n, int64_t k, int64_t array_rows, const uint16_t* a,
                     int64_t lda, const uint16_t* b, int64_t ldb, uint32_t* c, int64_t ldc,
                     bool accumulate) {
  std::vector<float> bf(static_cast<size_t>(k * n));
  WidenBf16(k, n, b, ldb, bf.data());
  Bf16TileProductF(m, n, k, array_rows, a, lda, bf.data(), n, c, ldc, accumulate);
}

void Bf16Gemm(int64_t m, int64_t n, int64_t k, int64_t tile, const uint16_t* a, const uint16_t* b,
              uint32_t* c) {
  std::fill(c, c + m * n, 0u);
  for (int64_t k0 = 0; k0 < k; k0 += tile) {
    const int64_t kt = std::min(tile, k - k0);
    Bf16TileProduct(m, n, kt, tile, a + k0, k, b + k0 * n, n, c, n, /*accumulate=*/k0 > 0);
  }
}

void Bf16GemmSkippingZeroTiles(int64_t m, int64_t n, int64_t k, int64_t tile, const uint16_t* a,
                               const uint16_t* b, uint32_t* c) {
  for (int64_t j0 = 0; j0 < n; j0 += tile) {
    const int64_t nb = std::min(tile, n - j0);
    bool taken = false;
    for (int64_t k0 = 0; k0 < k; k0 += tile) {
      const int64_t kt = std::min(tile, k - k0);
      bool zero = !(k0 + kt == k && !taken);  // the block's last tile, none before: taken
      for (int64_t r = 0; r < kt && zero; ++r) {
        const uint16_t* w = b + (k0 + r) * n + j0;
        zero = std::all_of(w, w + nb, [](uint16_t v) { return v == 0; });
      }
      if (zero) continue;
      Bf16TileProduct(m, nb, kt, tile, a + k0, k, b + k0 * n + j0, n, c + j0, n, taken);
      taken = true;
    }
  }
}

}  // namespace tpu::arith
