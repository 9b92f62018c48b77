// Exact int8 GEMM through fp32 blocks (see int8_gemm.h).
#include "arith/int8_gemm.h"

#include <Eigen/Core>
#include <algorithm>
#include <vector>

namespace tpu::arith {
namespace {

using FloatMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<Eigen::Dynamic>;

// Rows of A handled per block: keeps the float copies of A and C in cache.
constexpr int64_t kRowBlock = 256;

// Small products are faster as plain integer loops than through Eigen's kernels.
bool Small(int64_t m, int64_t n, int64_t k) { return m * n * k < 4096 || n < 4 || k < 4; }

void GemmScalar(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* b,
                int64_t ldb, int32_t* c, int64_t ldc, bool accumulate) {
  std::vector<uint32_t> row(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), 0u);
    const int8_t* ai = a + i * lda;
    for (int64_t p = 0; p < k; ++p) {
      const int32_t x = ai[p];
      if (x == 0) continue;
      const int8_t* bp = b + p * ldb;
      for (int64_t j = 0; j < n; ++j) row[j] += static_cast<uint32_t>(x * int32_t{bp[j]});
    }
    int32_t* ci = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) {
      ci[j] = static_cast<int32_t>(row[j] + (accumulate ? static_cast<uint32_t>(ci[j]) : 0u));
    }
  }
}

// The float product's rows into int32 C (exact: they hold integers below 2^24), or added
// to it with two's-complement wrap-around.
void Store(const FloatMat& cf, int32_t* c, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < cf.rows(); ++i) {
    int32_t* ci = c + i * ldc;
    const float* src = cf.data() + i * cf.cols();
    if (accumulate) {
      for (int64_t j = 0; j < cf.cols(); ++j) {
        ci[j] = static_cast<int32_t>(static_cast<uint32_t>(ci[j]) +
                                     static_cast<uint32_t>(static_cast<int32_t>(src[j])));
      }
    } else {
      for (int64_t j = 0; j < cf.cols(); ++j) ci[j] = static_cast<int32_t>(src[j]);
    }
  }
}

// C (+)= A x Bf for k <= kExactK.
void GemmBlock(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const float* bf,
               int64_t ldb, int32_t* c, int64_t ldc, bool accumulate) {
  Eigen::Map<const FloatMat, 0, Stride> eb(bf, k, n, Stride(ldb));
  FloatMat af(std::min(m, kRowBlock), k), cf(std::min(m, kRowBlock), n);
  for (int64_t i0 = 0; i0 < m; i0 += kRowBlock) {
    const int64_t rows = std::min(kRowBlock, m - i0);
    if (af.rows() != rows) {
      af.resize(rows, k);
      cf.resize(rows, n);
    }
    for (int64_t i = 0; i < rows; ++i) {
      const int8_t* ai = a + (i0 + i) * lda;
      float* dst = af.data() + i * k;
      for (int64_t p = 0; p < k; ++p) dst[p] = ai[p];
    }
    cf.noalias() = af * eb;
    Store(cf, c + i0 * ldc, ldc, accumulate);
  }
}

// C (+)= A x B in float, exactly (k <= kExactK), then into int32.
void GemmBlockFF(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* bf,
                 int64_t ldb, int32_t* c, int64_t ldc, bool accumulate) {
  Eigen::Map<const FloatMat, 0, Stride> ea(a, m, k, Stride(lda));
  Eigen::Map<const FloatMat, 0, Stride> eb(bf, k, n, Stride(ldb));
  Store(ea * eb, c, ldc, accumulate);
}

// C (+)= A x B for any k: blocks of kExactK summed exactly in float by `block`, then
// added in int32 (wrapping, as the accumulators do).
template <typename A, typename Block>
void ByKBlocks(int64_t m, int64_t n, int64_t k, const A* a, int64_t lda, const float* b,
               int64_t ldb, int32_t* c, int64_t ldc, bool accumulate, Block block) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0);
    return;
  }
  for (int64_t p0 = 0; p0 < k; p0 += kExactK) {
    const int64_t kb = std::min(kExactK, k - p0);
    block(m, n, kb, a + p0, lda, b + p0 * ldb, ldb, c, ldc, accumulate || p0 > 0);
  }
}

}  // namespace

void GemmInt8FF(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                int64_t ldb, int32_t* c, int64_t ldc, bool accumulate) {
  ByKBlocks(m, n, k, a, lda, b, ldb, c, ldc, accumulate, GemmBlockFF);
}

void GemmInt8F(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const float* b,
               int64_t ldb, int32_t* c, int64_t ldc, bool accumulate) {
  ByKBlocks(m, n, k, a, lda, b, ldb, c, ldc, accumulate, GemmBlock);
}

void GemmInt8(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* b,
              int64_t ldb, int32_t* c, int64_t ldc, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || Small(m, n, k)) {
    GemmScalar(m, n, std::max<int64_t>(k, 0), a, lda, b, ldb, c, ldc, accumulate);
    return;
  }
  std::vector<float> bf(static_cast<size_t>(k * n));
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) bf[static_cast<size_t>(p * n + j)] = b[p * ldb + j];
  GemmInt8F(m, n, k, a, lda, bf.data(), n, c, ldc, accumulate);
}

}  // namespace tpu::arith
