// The bfloat16 rules of a transformer's operations (host/nn/ops/transformer_bf16.cc), each
// against what it must give: exact values where the arithmetic is exact (products of small
// integers, a softmax of equal values, a LayerNorm of two values, the rows picked by an
// embedding), and derived bounds elsewhere (a softmax's sum, GELU and its erf).
#include <gtest/gtest.h>

#include <cmath>

#include "arith/bf16.h"
#include "host/common/errors.h"
#include "host/nn/bf16_net.h"
#include "host/nn/ops/transformer_ops.h"
#include "tests/host/nn/nn_test_util.h"

namespace tpu::nn {
namespace {

float V(uint16_t b) { return arith::FloatOfBits(arith::Fp32OfBf16(b)); }

Layer Of(LayerType t, std::vector<int> inputs) {
  Layer l = test::MakeLayer(t);
  l.inputs = std::move(inputs);
  return l;
}

// Model m's bf16 output for input x, on an array of `array` rows (lanes).
std::vector<float> Bf16Of(Model m, const std::vector<float>& x, int array = 2) {
  m.name = "t";
  m.preprocess = m.dataset = "none";
  InferShapes(&m);
  const std::vector<std::vector<uint16_t>> outs = Bf16Net(m, array).Forward(x.data());
  std::vector<float> y;
  for (const uint16_t b : outs.back()) y.push_back(V(b));
  return y;
}

TEST(TransformerBf16Test, AMatmulOfSmallIntegersIsExactHeadByHead) {
  Model m;
  m.input = {2, 2, 3};  // 2 heads of 2 x 3; the second input: the same, transposed
  Layer mm = Of(LayerType::kMatMul, {kModelInput, kModelInput});
  mm.transpose_b = true;
  mm.scale = 0.5f;
  m.layers = {mm};
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, -1, 0, 2, 3, 1, -2};
  const std::vector<float> y = Bf16Of(m, x);
  ASSERT_EQ(y.size(), 8u);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        float s = 0;
        for (int k = 0; k < 3; ++k) s += x[h * 6 + i * 3 + k] * x[h * 6 + j * 3 + k];
        EXPECT_EQ(y[static_cast<size_t>(h * 4 + i * 2 + j)], 0.5f * s) << h << i << j;
      }
}

TEST(TransformerBf16Test, SoftmaxAcrossRowsOfLanes) {
  Model m;
  m.input = {1, 2, 5};  // 5 values a position: three rows of 2 lanes
  m.layers = {Of(LayerType::kSoftmax, {kModelInput})};
  const std::vector<float> y = Bf16Of(m, {3, 3, 3, 3, 3, -2, 0.5f, 7, 1, -4});
  // Equal values: exp(0) = 1 each, their sum 5 (2 + 2 + 1 over the rows), y = 1 x (1 / 5).
  const float fifth = V(arith::Bf16OfFp32(arith::BitsOfFloat(0.2f)));
  for (int k = 0; k < 5; ++k) EXPECT_EQ(y[static_cast<size_t>(k)], fifth) << k;
  // Each value rounded to bfloat16 (relative error at most 2^-9) of float32 values that sum to
  // 1 within a few float32 roundings: the sum within 2^-9 + 2^-20 of 1.
  float sum = 0;
  for (int k = 5; k < 10; ++k) sum += y[static_cast<size_t>(k)];
  EXPECT_NEAR(sum, 1.0f, std::ldexp(1.0f, -9) + std::ldexp(1.0f, -20));
  EXPECT_GT(y[7], y[8]);
}

TEST(TransformerBf16Test, LayerNormOfTwoValues) {
  Model m;
  m.input = {1, 1, 2};
  Layer ln = Of(LayerType::kLayerNorm, {kModelInput});
  ln.weights.shape = {2};
  ln.weights.data = {2, 2};
  ln.bias.shape = {2};
  ln.bias.data = {0.5f, 0.5f};
  m.layers = {ln};
  // mean 2, variance 1: (-1, 1) rsqrt(1 + 1e-5) 2 + 0.5 = -1.49999, 2.49999: -1.5, 2.5 in bf16.
  EXPECT_EQ(Bf16Of(m, {1, 3}), (std::vector<float>{-1.5f, 2.5f}));
}

// Abramowitz and Stegun 7.1.26 is within 1.5e-7 of erf; its 13 float32 operations on values
// of at most 2 round by at most 2^-23 each: within 1.5e-7 + 13 x 2^-23 (1.7e-6) of erf.
TEST(TransformerBf16Test, GeluFollowsErfWithinItsDerivedBound) {
  double worst = 0;
  for (float x = -4; x <= 4; x += 1.0f / 64)
    worst = std::max(worst,
                     std::abs(double{arith::FloatOfBits(ops::Bf16RuleErf(arith::BitsOfFloat(x)))} -
                              std::erf(double{x})));
  EXPECT_LE(worst, 1.5e-7 + 13 * std::ldexp(1.0, -23));
  Model m;
  m.input = {1, 1, 64};
  m.layers = {Of(LayerType::kGelu, {kModelInput})};
  std::vector<float> x;
  for (int i = 0; i < 64; ++i) x.push_back(-4 + 0.125f * static_cast<float>(i));
  const std::vector<float> y = Bf16Of(m, x);
  // The float32 result within 2e-6 |x| of GELU, then rounded: within one bf16 step of GELU
  // rounded (2^-7 of its magnitude), or 2^-126 near 0.
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = x[i] * (std::erf(x[i] / std::sqrt(2.0)) + 1) / 2;
    EXPECT_LE(std::abs(y[i] - want), std::max(std::abs(want) * std::ldexp(1.0, -8), 1e-6)) << x[i];
  }
}

TEST(TransformerBf16Test, EmbeddingsPrependAndAddConstantPickTheirBf16Rows) {
  Model m;
  m.input = {1, 2, 1};
  Layer e = Of(LayerType::kEmbedding, {kModelInput}), p = Of(LayerType::kPrepend, {0}),
        a = Of(LayerType::kAddConstant, {1});
  e.start = 3;
  e.out = {1, 1, 2};
  e.weights = {{3, 2}, {0, 1, 10, 11, 20, 21}};
  e.bias.shape = {0};
  p.start = 1;
  p.weights = {{1, 1, 2}, {-1, -2}};
  p.bias.shape = {0};
  a.weights = {{1, 3, 2}, {0.5f, 0.5f, 1, 1, 2, 2}};
  a.bias.shape = {0};
  m.layers = {e, p, a};
  EXPECT_EQ(Bf16Of(m, {2, 1}), (std::vector<float>{-0.5f, -1.5f, 21, 22, 12, 13}));
  m.layers[0].start = 300;
  m.layers[0].weights = {{300, 2}, std::vector<float>(600, 0)};
  try {
    Bf16Of(m, {2, 1});
    ADD_FAILURE() << "a vocabulary of 300 ran in bf16";
  } catch (const UsageError& err) {
    EXPECT_NE(std::string(err.what()).find("the integers to 256 only"), std::string::npos);
  }
}

}  // namespace
}  // namespace tpu::nn
