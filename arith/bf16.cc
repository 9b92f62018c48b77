// The bfloat16 reference kernels (see bf16.h, docs/bf16.md).
#include "arith/bf16.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "arith/clones.h"

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

TPU_VECTOR_CLONES
void Bf16ActivateRow(const uint32_t* __restrict acc, const Bf16Channel* __restrict ch, bool relu,
                     uint16_t* __restrict y, int64_t n) {
  for (int64_t l = 0; l < n; ++l) y[l] = Bf16Activate(Fp32Add(acc[l], ch[l].bias), relu, ch[l].hi);
}

void WidenBf16(int64_t k, int64_t n, const uint16_t* b, int64_t ldb, float* out) {
  for (int64_t r = 0; r < k; ++r)
    for (int64_t j = 0; j < n; ++j) out[r * n + j] = FloatOfBits(Fp32OfBf16(b[r * ldb + j]));
}

namespace {

// p[j0..j0+B) += x_r w[r][j0..j0+B) for r in [r0, r1), the B sums held in registers
// across the rows (the order of each column's adds is the array's).
template <int64_t B>
inline void AddRowsBlock(const uint16_t* x, const float* b, int64_t ldb, int64_t r0, int64_t r1,
                         int64_t j0, float* p) {
  float acc[B];
  for (int64_t j = 0; j < B; ++j) acc[j] = p[j0 + j];
  for (int64_t r = r0; r < r1; ++r) {
    const float v = FloatOfBits(Fp32OfBf16(x[r]));
    const float* w = b + r * ldb + j0;
    for (int64_t j = 0; j < B; ++j) acc[j] += v * w[j];
  }
  for (int64_t j = 0; j < B; ++j) p[j0 + j] = acc[j];
}

// One row's column sums over weight rows [r0, r1) and columns [c0, c1): p[j] += x_r w[r][j],
// down the column, every product and sum flushed (by the CPU where it can, else by Flush).
// Compiled also for the wider vector units, chosen at run time: the same products and sums
// lane by lane (no fused multiply-add: -ffp-contract=off; the flush mode rules them all).
TPU_VECTOR_CLONES
void AddRows(const uint16_t* x, const float* b, int64_t ldb, int64_t r0, int64_t r1, int64_t c0,
             int64_t c1, float* p) {
  int64_t j0 = c0;
  if (kHardwareFlush)
    for (; j0 + 64 <= c1; j0 += 64) AddRowsBlock<64>(x, b, ldb, r0, r1, j0, p);
  for (int64_t r = r0; r < r1; ++r) {
    const float v = FloatOfBits(Fp32OfBf16(x[r]));
    const float* w = b + r * ldb;
    if (kHardwareFlush) {
      for (int64_t j = j0; j < c1; ++j) p[j] += v * w[j];
    } else {
      for (int64_t j = j0; j < c1; ++j) p[j] = Flush(p[j] + Flush(v * w[j]));
    }
  }
}

// The rows' spans of non-zero weights one after another (TileNonZeros::by_rows).
void AddSpans(const uint16_t* x, const float* b, int64_t ldb, const TileNonZeros& nz, float* p) {
  for (int64_t r = nz.row_lo; r < nz.row_hi; ++r) {
    const int64_t lo = nz.lo[static_cast<size_t>(r)], hi = nz.hi[static_cast<size_t>(r)];
    if (lo == hi) continue;
    const float v = FloatOfBits(Fp32OfBf16(x[r]));
    const float* w = b + r * ldb;
    for (int64_t j = lo; j < hi; ++j)
      p[j] = kHardwareFlush ? p[j] + v * w[j] : Flush(p[j] + Flush(v * w[j]));
  }
}

// The same sums as AddSpans over a tile's layers of weights (TileNonZeros::depth): the row's
// activations widened once, then each layer's products added into the columns, layer by
// layer, so each column's in the order of its rows (the array's). A padding weight +0 adds a
// zero, which leaves a sum unchanged (sums from +0 are never -0; the activations are finite).
TPU_VECTOR_CLONES
void AddLayers(const uint16_t* x, const TileNonZeros& nz, float* xf, float* p) {
  for (int64_t r = nz.row_lo; r < nz.row_hi; ++r) xf[r] = FloatOfBits(Fp32OfBf16(x[r]));
  const int64_t cols = nz.col_hi - nz.col_lo;
  float* pc = p + nz.col_lo;
  for (int64_t d = 0; d < nz.depth; ++d) {
    const int32_t* rows = nz.rows.data() + d * cols;
    const float* w = nz.w.data() + d * cols;
    if (kHardwareFlush) {
      for (int64_t c = 0; c < cols; ++c) pc[c] = pc[c] + xf[rows[c]] * w[c];
    } else {
      for (int64_t c = 0; c < cols; ++c) pc[c] = Flush(pc[c] + Flush(xf[rows[c]] * w[c]));
    }
  }
}

// The column sums stored into (or added to) the accumulators' row.
TPU_VECTOR_CLONES
void StoreSums(const float* psum, int64_t n, uint32_t* row, bool accumulate) {
  if (!accumulate) {
    for (int64_t j = 0; j < n; ++j) row[j] = Fp32Canonical(BitsOfFloat(psum[j]));
    return;
  }
  for (int64_t j = 0; j < n; ++j) row[j] = Fp32Add(row[j], Fp32Canonical(BitsOfFloat(psum[j])));
}

// Whether no activation is an infinity or NaN (one pass, no early exit: it vectorizes).
bool AllFinite(const uint16_t* x, int64_t k) {
  unsigned bad = 0;
  for (int64_t r = 0; r < k; ++r) bad |= (x[r] & 0x7f80u) == 0x7f80u;
  return bad == 0;
}

}  // namespace

TPU_VECTOR_CLONES
void Bf16TileProductF(int64_t m, int64_t n, int64_t k, int64_t array_rows, const uint16_t* a,
                      int64_t lda, const float* b, int64_t ldb, uint32_t* c, int64_t ldc,
                      bool accumulate) {
  // Each row's column sums in float, added in the array's order (down the column, r = 0
  // first).
  std::vector<float> psum(static_cast<size_t>(n));
  const FlushMode flush_mode;
  for (int64_t i = 0; i < m; ++i) {
    std::fill(psum.begin(), psum.end(), 0.0f);
    AddRows(a + i * lda, b, ldb, 0, k, 0, n, psum.data());
    // The rows below K add +0 (only a -0 sum changes).
    if (k < array_rows)
      for (int64_t j = 0; j < n; ++j) psum[j] += 0.0f;
    StoreSums(psum.data(), n, c + i * ldc, accumulate);
  }
}

namespace {

// TileNonZeros::depth, rows and w of a tile whose spans (lo, hi) are found, where its
// columns hold at most kMaxDepth weights each.
void Layers(const float* b, int64_t ldb, TileNonZeros* nz) {
  const int64_t cols = nz->col_hi - nz->col_lo;
  std::vector<int64_t> count(static_cast<size_t>(cols), 0);
  for (int64_t r = nz->row_lo; r < nz->row_hi; ++r)
    for (int64_t j = nz->lo[static_cast<size_t>(r)]; j < nz->hi[static_cast<size_t>(r)]; ++j)
      if (b[r * ldb + j] != 0.0f) ++count[static_cast<size_t>(j - nz->col_lo)];
  const int64_t depth = *std::max_element(count.begin(), count.end());
  if (depth > TileNonZeros::kMaxDepth) return;
  nz->depth = depth;
  nz->rows.assign(static_cast<size_t>(depth * cols), static_cast<int32_t>(nz->row_lo));
  nz->w.assign(static_cast<size_t>(depth * cols), 0.0f);
  std::fill(count.begin(), count.end(), 0);
  for (int64_t r = nz->row_lo; r < nz->row_hi; ++r)
    for (int64_t j = nz->lo[static_cast<size_t>(r)]; j < nz->hi[static_cast<size_t>(r)]; ++j) {
      const float v = b[r * ldb + j];
      if (v == 0.0f) continue;
      int64_t& d = count[static_cast<size_t>(j - nz->col_lo)];
      const size_t at = static_cast<size_t>(d++ * cols + (j - nz->col_lo));
      nz->rows[at] = static_cast<int32_t>(r);
      nz->w[at] = v;
    }
}

TPU_VECTOR_CLONES
bool AllFiniteWeights(int64_t k, int64_t n, const float* b, int64_t ldb) {
  unsigned bad = 0;
  for (int64_t r = 0; r < k; ++r)
    for (int64_t j = 0; j < n; ++j) bad |= (BitsOfFloat(b[r * ldb + j]) & kFp32Inf) == kFp32Inf;
  return bad == 0;
}

// The rows in [r0, r1) where the activations are not zeros (zeros and subnormals widen to
// zeros), into *rows, when they are at most `most`; false when there are more.
bool FewNonZeros(const uint16_t* x, int64_t r0, int64_t r1, int64_t most,
                 std::vector<int64_t>* rows) {
  rows->clear();
  for (int64_t r = r0; r < r1; ++r) {
    if ((x[r] & 0x7f80u) == 0) continue;
    if (static_cast<int64_t>(rows->size()) == most) return false;
    rows->push_back(r);
  }
  return true;
}

}  // namespace

TileNonZeros NonZerosOf(int64_t k, int64_t n, const float* b, int64_t ldb) {
  TileNonZeros nz;
  nz.row_lo = k;
  nz.col_lo = n;
  nz.lo.assign(static_cast<size_t>(k), 0);
  nz.hi.assign(static_cast<size_t>(k), 0);
  int64_t spans = 0;
  for (int64_t r = 0; r < k; ++r) {
    const float* w = b + r * ldb;
    int64_t lo = 0, hi = n;
    while (lo < n && w[lo] == 0.0f) ++lo;  // NaN is not a zero
    while (hi > lo && w[hi - 1] == 0.0f) --hi;
    if (lo == hi) continue;
    nz.lo[static_cast<size_t>(r)] = lo;
    nz.hi[static_cast<size_t>(r)] = hi;
    spans += hi - lo;
    nz.row_lo = std::min(nz.row_lo, r);
    nz.row_hi = r + 1;
    nz.col_lo = std::min(nz.col_lo, lo);
    nz.col_hi = std::max(nz.col_hi, hi);
  }
  if (nz.row_hi == 0) nz.row_lo = nz.col_lo = 0;
  nz.by_rows = 2 * spans < (nz.row_hi - nz.row_lo) * (nz.col_hi - nz.col_lo);
  if (nz.by_rows) Layers(b, ldb, &nz);
  nz.finite = AllFiniteWeights(k, n, b, ldb);
  return nz;
}

TPU_VECTOR_CLONES
void Bf16TileProductSparse(int64_t m, int64_t n, int64_t k, int64_t array_rows, const uint16_t* a,
                           int64_t lda, const float* b, int64_t ldb, const TileNonZeros& nz,
                           uint32_t* c, int64_t ldc, bool accumulate) {
  std::vector<float> psum(static_cast<size_t>(n)), xf(static_cast<size_t>(k));
  std::vector<int64_t> live;
  const FlushMode flush_mode;
  for (int64_t i = 0; i < m; ++i) {
    const uint16_t* x = a + i * lda;
    if (!AllFinite(x, k)) {  // an infinity or NaN times a zero weight is NaN: the full sums
      Bf16TileProductF(1, n, k, array_rows, x, lda, b, ldb, c + i * ldc, ldc, accumulate);
      continue;
    }
    std::fill(psum.begin(), psum.end(), 0.0f);
    float* p = psum.data();
    if (nz.depth > 0) {
      AddLayers(x, nz, xf.data(), p);
    } else if (nz.by_rows) {
      AddSpans(x, b, ldb, nz, p);
    } else if (nz.finite &&
               FewNonZeros(x, nz.row_lo, nz.row_hi, (nz.row_hi - nz.row_lo) / 8, &live)) {
      // A transpose's identity row: the non-zero activations' weight rows alone, in order
      // (the rows left out add zeros, which leave the sums unchanged: they are never -0).
      for (const int64_t r : live) AddRows(x, b, ldb, r, r + 1, nz.col_lo, nz.col_hi, p);
    } else {
      AddRows(x, b, ldb, nz.row_lo, nz.row_hi, nz.col_lo, nz.col_hi, p);
    }
    for (int64_t j = nz.col_lo; j < nz.col_hi; ++j) {
      if (BitsOfFloat(p[j]) != 0x80000000u) continue;
      p[j] = 0.0f;
      AddRows(x, b, ldb, 0, k, j, j + 1, p);
      if (k < array_rows) p[j] += 0.0f;
    }
    StoreSums(p, n, c + i * ldc, accumulate);
  }
}

void Bf16TileProduct(int64_t m, int64_t n, int64_t k, int64_t array_rows, const uint16_t* a,
                     int64_t lda, const uint16_t* b, int64_t ldb, uint32_t* c, int64_t ldc,
                     bool accumulate) {
  std::vector<float> bf(static_cast<size_t>(k * n));
  WidenBf16(k, n, b, ldb, bf.data());
  // The products of the non-zero weights alone: the same sums (Bf16TileProductSparse).
  Bf16TileProductSparse(m, n, k, array_rows, a, lda, bf.data(), n, NonZerosOf(k, n, bf.data(), n),
                        c, ldc, accumulate);
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
