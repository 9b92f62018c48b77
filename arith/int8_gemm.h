// The int8 x int8 -> int32 matrix product that the CPU int8 backend and the fast chip
// engine share. Exact: each block of up to kExactK products is summed in fp32, where every
// partial sum is an integer of magnitude at most kExactK x 128 x 128 = 2^24 and therefore
// exactly representable, so the fast vectorized float kernels of Eigen give the exact
// integer result; blocks are then added in int32 with two's-complement wrap-around, as the
// hardware's accumulators do.
#pragma once

#include <cstdint>

namespace tpu::arith {

inline constexpr int64_t kExactK = 1024;

// C[m x n] = A[m x k] x B[k x n] (or C += A x B with `accumulate`), all row-major with the
// given row strides (in elements). Sums wrap modulo 2^32.
void GemmInt8(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* b,
              int64_t ldb, int32_t* c, int64_t ldc, bool accumulate);

// The same with B already widened to float (k x n, row stride ldb): for a B used many times.
void GemmInt8F(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const float* b,
               int64_t ldb, int32_t* c, int64_t ldc, bool accumulate);

// The same with A too already in float (each value an int8, -128..127): for a caller that
// forms A in float anyway (the CPU int8 backend's im2col), which saves converting it block
// by block.
void GemmInt8FF(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                int64_t ldb, int32_t* c, int64_t ldc, bool accumulate);

}  // namespace tpu::arith
