// The bfloat16 rules of a transformer's operations (transformer_ops.h; docs/transformers.md,
// "The bfloat16 rules"): what a bf16 chip is to compute, bit for bit. Values between layers
// are bfloat16; the products run on the array (arith::Bf16Gemm: float32 sums in K tiles of
// the array's N rows); softmax, LayerNorm and GELU run on the vector unit in float32, a
// position's c values in rows of N lanes, each row's lanes reduced by the unit's trees
// (arith::Fp32TreeMax, Fp32TreeSum) and the rows' results combined in order.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "arith/bf16.h"
#include "arith/fp32.h"
#include "host/common/errors.h"
#include "host/nn/ops/transformer_ops.h"

namespace tpu::nn::ops {
namespace {

using arith::BitsOfFloat;
using arith::Fp32Add;
using arith::Fp32Mul;
using arith::Fp32Sub;

uint32_t F(uint16_t x) { return arith::Fp32OfBf16(x); }
uint16_t B(uint32_t x) { return arith::Bf16OfFp32(x); }
uint32_t K(float v) { return BitsOfFloat(v); }

// A position's c values reduced as the vector unit does: rows of n lanes (lanes past c
// `pad`), each row's tree (max or sum), the rows' results combined in order.
uint32_t Reduce(const std::vector<uint32_t>& v, int n, bool max) {
  const uint32_t pad = max ? (arith::kFp32Inf | 0x80000000u) : 0u;
  std::vector<uint32_t> lanes(static_cast<size_t>(n));
  uint32_t r = 0;
  for (size_t row = 0; row * static_cast<size_t>(n) < v.size(); ++row) {
    for (size_t l = 0; l < lanes.size(); ++l) {
      const size_t i = row * lanes.size() + l;
      lanes[l] = i < v.size() ? v[i] : pad;
    }
    const uint32_t t =
        max ? arith::Fp32TreeMax(lanes.data(), n) : arith::Fp32TreeSum(lanes.data(), n);
    r = row == 0 ? t : max ? arith::Fp32Max(r, t) : Fp32Add(r, t);
  }
  return r;
}

// Each position's c values through `row` (float32 in, bfloat16 out).
template <typename Row>
Bf16Values ByPosition(const Bf16Layer& p, const Bf16Values& x, Row row) {
  const auto c = static_cast<size_t>(p.layer->in.c);
  Bf16Values y(x.size());
  std::vector<uint32_t> v(c);
  for (size_t at = 0; at < x.size(); at += c) {
    for (size_t k = 0; k < c; ++k) v[k] = F(x[at + k]);
    row(v, &y[at]);
  }
  return y;
}

// softmax: m the largest, e = exp(x - m), y = e (1 / sum e).
Bf16Values Softmax(const Bf16Layer& p, const std::vector<const Bf16Values*>& xs) {
  return ByPosition(p, *xs[0], [&](std::vector<uint32_t>& v, uint16_t* y) {
    const uint32_t m = Reduce(v, p.array_dim, true);
    for (uint32_t& e : v) e = arith::Fp32Exp(Fp32Sub(e, m));
    const uint32_t r = arith::Fp32Recip(Reduce(v, p.array_dim, false));
    for (size_t k = 0; k < v.size(); ++k) y[k] = B(Fp32Mul(v[k], r));
  });
}

// layer_norm: mean = sum x (1/c), d = x - mean, var = sum d d (1/c),
// y = d rsqrt(var + eps) gamma + beta; gamma and beta float32 (p.bias: gamma, then beta).
void LayerNormPrepare(Bf16Layer* p) {
  for (const float g : p->layer->weights.data) p->bias.push_back(arith::Fp32Canonical(K(g)));
  for (const float b : p->layer->bias.data) p->bias.push_back(arith::Fp32Canonical(K(b)));
}

Bf16Values LayerNorm(const Bf16Layer& p, const std::vector<const Bf16Values*>& xs) {
  const auto c = static_cast<size_t>(p.layer->in.c);
  const uint32_t inv_c = K(static_cast<float>(1.0 / static_cast<double>(c)));
  const uint32_t eps = K(p.layer->epsilon);
  return ByPosition(p, *xs[0], [&](std::vector<uint32_t>& v, uint16_t* y) {
    const uint32_t mean = Fp32Mul(Reduce(v, p.array_dim, false), inv_c);
    std::vector<uint32_t> sq(c);
    for (size_t k = 0; k < c; ++k) {
      v[k] = Fp32Sub(v[k], mean);
      sq[k] = Fp32Mul(v[k], v[k]);
    }
    const uint32_t r =
        arith::Fp32Rsqrt(Fp32Add(Fp32Mul(Reduce(sq, p.array_dim, false), inv_c), eps));
    for (size_t k = 0; k < c; ++k)
      y[k] = B(Fp32Add(Fp32Mul(Fp32Mul(v[k], r), p.bias[k]), p.bias[c + k]));
  });
}

}  // namespace

// erf by Abramowitz and Stegun 7.1.26 (|error| <= 1.5e-7), as the vector unit's program
// computes it, each step one instruction with a constant as b: z = max(x, x (-1)),
// t = recip(z p + 1), q = ((((t a5 + a4) t + a3) t + a2) t + a1) t, e = exp((z z) (-1)),
// q = q e - 1 (= -erf), erf = q (-1), and where x < 0 erf = q.
uint32_t Bf16RuleErf(uint32_t x) {
  const uint32_t minus1 = K(-1.0f);
  const uint32_t z = arith::Fp32Max(x, Fp32Mul(x, minus1));
  const uint32_t t = arith::Fp32Recip(Fp32Add(Fp32Mul(z, K(kErfP)), arith::kFp32One));
  uint32_t q = Fp32Mul(t, K(kErfA[4]));
  for (int i = 3; i >= 0; --i) q = Fp32Mul(Fp32Add(q, K(kErfA[i])), t);
  const uint32_t e = arith::Fp32Exp(Fp32Mul(Fp32Mul(z, z), minus1));
  q = Fp32Sub(Fp32Mul(q, e), arith::kFp32One);
  const uint32_t erf = Fp32Mul(q, minus1);
  return arith::Fp32Select(arith::Fp32Less(x, 0), q, erf);
}

namespace {

// gelu: z = x (1/sqrt 2), y = ((erf z + 1) x) 0.5.
Bf16Values Gelu(const Bf16Layer& /*p*/, const std::vector<const Bf16Values*>& xs) {
  Bf16Values y(xs[0]->size());
  for (size_t i = 0; i < y.size(); ++i) {
    const uint32_t x = F((*xs[0])[i]);
    const uint32_t erf = Bf16RuleErf(Fp32Mul(x, K(kInvRoot2)));
    y[i] = B(Fp32Mul(Fp32Mul(Fp32Add(erf, arith::kFp32One), x), K(0.5f)));
  }
  return y;
}

// matmul: each head's product on the array, rounded as the activate rounds it, then times
// the scale in float32 (the vector unit's multiply), rounded again.
Bf16Values MatMul(const Bf16Layer& p, const std::vector<const Bf16Values*>& xs) {
  const Layer& l = *p.layer;
  const int64_t m = l.in.w, k = l.in.c, n = l.out.c, heads = l.in.h;
  Bf16Values y(static_cast<size_t>(l.out.Size())), b(static_cast<size_t>(k * n));
  std::vector<uint32_t> acc(static_cast<size_t>(m * n));
  for (int64_t h = 0; h < heads; ++h) {
    const uint16_t* bh = xs[1]->data() + h * k * n;
    for (int64_t r = 0; r < k; ++r)
      for (int64_t j = 0; j < n; ++j)
        b[static_cast<size_t>(r * n + j)] = l.transpose_b ? bh[j * k + r] : bh[r * n + j];
    arith::Bf16Gemm(m, n, k, p.array_dim, xs[0]->data() + h * m * k, b.data(), acc.data());
    for (int64_t i = 0; i < m * n; ++i) {
      const uint32_t v = acc[static_cast<size_t>(i)];
      y[static_cast<size_t>(h * m * n + i)] =
          l.scale == 1.0f ? B(v) : B(Fp32Mul(F(B(v)), K(l.scale)));
    }
  }
  return y;
}

// embedding: each id's row of the bfloat16 weights. An id is the input's bfloat16 value, so
// a vocabulary past 256 (whose ids bfloat16 does not hold) is refused.
void EmbeddingPrepare(Bf16Layer* p) {
  if (p->layer->start > 257)
    throw UsageError(fmt::format(
        "embedding '{}' has {} tokens; a bf16 model's inputs are bfloat16, which holds the "
        "integers to 256 only: its bf16 rule reads ids up to 256 (docs/transformers.md)",
        p->layer->name, p->layer->start));
  Bf16RoundWeights(p);
}

Bf16Values Embedding(const Bf16Layer& p, const std::vector<const Bf16Values*>& xs) {
  const auto c = static_cast<size_t>(p.layer->out.c);
  Bf16Values y;
  for (const uint16_t id : *xs[0]) {
    const float v = arith::FloatOfBits(F(id));
    if (!(v >= 0 && v < static_cast<float>(p.layer->start)))
      throw UsageError(fmt::format("embedding '{}': token {} is not an id", p.layer->name, v));
    const auto row = static_cast<size_t>(v) * c;
    y.insert(y.end(), p.weights.begin() + static_cast<std::ptrdiff_t>(row),
             p.weights.begin() + static_cast<std::ptrdiff_t>(row + c));
  }
  return y;
}

// prepend: the bfloat16 rows, then the input's.
Bf16Values Prepend(const Bf16Layer& p, const std::vector<const Bf16Values*>& xs) {
  Bf16Values y = p.weights;
  y.insert(y.end(), xs[0]->begin(), xs[0]->end());
  return y;
}

// add_constant: x + the bfloat16 constant, in float32.
Bf16Values AddConstant(const Bf16Layer& p, const std::vector<const Bf16Values*>& xs) {
  Bf16Values y(xs[0]->size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = B(Fp32Add(F((*xs[0])[i]), F(p.weights[i])));
  return y;
}

}  // namespace

void SetTransformerBf16(OpDef* d) {
  struct Rule {
    LayerType type;
    void (*prepare)(Bf16Layer* p);  // null: the weights rounded (Bf16RoundWeights)
    Bf16Values (*bf16)(const Bf16Layer& p, const std::vector<const Bf16Values*>& xs);
  };
  static const Rule kRules[] = {
      {LayerType::kMatMul, nullptr, MatMul},
      {LayerType::kSoftmax, nullptr, Softmax},
      {LayerType::kLayerNorm, LayerNormPrepare, LayerNorm},
      {LayerType::kGelu, nullptr, Gelu},
      {LayerType::kEmbedding, EmbeddingPrepare, Embedding},
      {LayerType::kPrepend, nullptr, Prepend},
      {LayerType::kAddConstant, nullptr, AddConstant},
  };
  for (const Rule& r : kRules) {
    if (r.type != d->type) continue;
    d->bf16_prepare = r.prepare;
    d->bf16 = r.bf16;
    return;
  }
  throw std::logic_error(std::string("SetTransformerBf16: no bfloat16 rule for ") + d->name);
}

}  // namespace tpu::nn::ops
