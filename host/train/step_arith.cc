// See step_arith.h.
#include "host/train/step_arith.h"

#include <algorithm>

#include "arith/bf16.h"
#include "arith/fp32.h"
#include "host/isa/program_builder.h"

namespace tpu::train::chip {

using arith::Fp32Add;
using arith::Fp32Mul;
using arith::Fp32OfBf16;
using arith::Fp32Sub;

Half Activate(const Bits& acc, bool relu, uint32_t hi) {
  Half out(acc.size());
  for (size_t i = 0; i < acc.size(); ++i)
    out[i] = arith::Bf16Activate(Fp32Add(acc[i], 0), relu, hi);
  return out;
}

uint16_t CoreSum(uint16_t a, uint16_t b) {
  return arith::Bf16OfFp32(Fp32Add(Fp32OfBf16(a), Fp32OfBf16(b)));
}

Half Transposed(const Half& a, int64_t rows, int64_t cols) {
  Half t(a.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      t[c * rows + r] = arith::Bf16OfFp32(Fp32Add(0, Fp32OfBf16(a[r * cols + c])));
  return t;
}

Bits Product(const Half& a, const Half& b, int64_t m, int64_t k, int64_t cols, int n) {
  Bits c(static_cast<size_t>(m * cols));
  arith::Bf16Gemm(m, cols, k, n, a.data(), b.data(), c.data());
  return c;
}

uint32_t SoftmaxRow(const uint16_t* logits, int classes, int label, int n, uint32_t inv_batch,
                    uint16_t* dz) {
  const uint32_t neg_inf = 0xff800000u;
  const int lanes = (classes + n - 1) / n * n;  // the blocks' lanes
  Bits d(static_cast<size_t>(lanes)), e(static_cast<size_t>(lanes)),
      pick(static_cast<size_t>(n), 0);
  for (int j = 0; j < lanes; ++j)
    d[j] = Fp32Add(j < classes ? Fp32OfBf16(logits[j]) : 0, j < classes ? 0 : neg_inf);
  uint32_t m = arith::Fp32TreeMax(d.data(), n);
  for (int k = n; k < lanes; k += n) m = arith::Fp32Max(m, arith::Fp32TreeMax(&d[k], n));
  for (int j = 0; j < lanes; ++j) {
    d[j] = Fp32Sub(d[j], m);
    if (j == label) pick[j % n] = arith::Fp32Canonical(d[j]);
    e[j] = arith::Fp32Exp(d[j]);
  }
  const uint32_t picked = arith::Fp32TreeSum(pick.data(), n);
  uint32_t s = arith::Fp32TreeSum(e.data(), n);
  for (int k = n; k < lanes; k += n) s = Fp32Add(s, arith::Fp32TreeSum(&e[k], n));
  const uint32_t r = arith::Fp32Recip(s);
  for (int j = 0; j < classes; ++j) {
    const uint32_t p = Fp32Mul(e[j], r);
    dz[j] = arith::Bf16OfFp32(Fp32Mul(Fp32Sub(p, j == label ? arith::kFp32One : 0), inv_batch));
  }
  return Fp32Sub(arith::Fp32Log(s), picked);
}

std::vector<float> BatchNormConstants(double epsilon, double momentum, int64_t m) {
  const double md = static_cast<double>(m);
  std::vector<float> k(kBnConstants);
  k[kBnInvM] = static_cast<float>(1.0 / md);
  k[kBnEps] = static_cast<float>(epsilon);
  k[kBnMomentum] = static_cast<float>(momentum);
  k[kBnKeep] = static_cast<float>(1.0 - momentum);
  k[kBnUnbiased] = static_cast<float>(md / (md - 1.0));
  return k;
}

Bits RowSum(const Bits& v, int64_t rows, int64_t lanes) {
  const int64_t piece = static_cast<int64_t>(isa::ProgramBuilder::kMaxLength);
  Bits total(static_cast<size_t>(lanes), 0);
  for (int64_t r0 = 0; r0 < rows; r0 += piece) {
    for (int64_t l = 0; l < lanes; ++l) {
      uint32_t sum = v[static_cast<size_t>(r0 * lanes + l)];
      for (int64_t r = r0 + 1; r < std::min(rows, r0 + piece); ++r)
        sum = Fp32Add(sum, v[static_cast<size_t>(r * lanes + l)]);
      uint32_t& t = total[static_cast<size_t>(l)];
      t = r0 == 0 ? arith::Fp32Canonical(sum) : Fp32Add(t, sum);
    }
  }
  return total;
}

}  // namespace tpu::train::chip
