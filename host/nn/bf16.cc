// The bfloat16 reference kernels (see bf16.h, docs/bf16.md).
#include "host/nn/bf16.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

namespace tpu::nn {
namespace {

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
  // first), every product and sum flushed.
  std::vector<float> psum(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(psum.begin(), psum.end(), 0.0f);
    for (int64_t r = 0; r < k; ++r) {
      const float x = FloatOfBits(Fp32OfBf16(a[i * lda + r]));
      const float* w = b + r * ldb;
      for (int64_t j = 0; j < n; ++j) psum[j] = Flush(psum[j] + Flush(x * w[j]));
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

}  // namespace tpu::nn
