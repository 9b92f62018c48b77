// The bfloat16 network reference (host/nn/bf16_net.h) against one multiply-add at a time in
// the order of docs/bf16.md, and its refusals and NaN reporting.
#include "host/nn/bf16_net.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "arith/bf16.h"
#include "host/common/errors.h"
#include "tests/host/nn/nn_test_util.h"

namespace tpu::nn {
namespace {

// Output channel `oc` of pixel (oh, ow) of a conv layer, MAC by MAC: K in (kernel row,
// kernel column, channel) order, tiles of n rows each summed from +0 down the column (zero
// rows past K included), tile sums added in order, then the bias, ReLU and one rounding.
uint16_t ConvByHand(const Layer& l, const std::vector<uint16_t>& x, int oh, int ow, int oc, int n) {
  std::vector<uint16_t> col, w;
  for (int kh = 0; kh < l.kernel_h; ++kh)
    for (int kw = 0; kw < l.kernel_w; ++kw)
      for (int ic = 0; ic < l.in.c; ++ic) {
        const int ih = oh * l.stride + kh - l.pad_top, iw = ow * l.stride + kw - l.pad_left;
        const bool in = ih >= 0 && ih < l.in.h && iw >= 0 && iw < l.in.w;
        col.push_back(in ? x[static_cast<size_t>((ih * l.in.w + iw) * l.in.c + ic)] : 0);
        w.push_back(arith::Bf16OfFp32(arith::BitsOfFloat(l.weights.data[static_cast<size_t>(
            ((kh * l.kernel_w + kw) * l.in.c + ic) * l.out.c + oc)])));
      }
  uint32_t acc = 0;
  for (size_t k0 = 0; k0 < col.size(); k0 += static_cast<size_t>(n)) {
    uint32_t psum = 0;
    for (size_t r = k0; r < k0 + static_cast<size_t>(n); ++r)
      psum = r < col.size() ? arith::Bf16Mac(psum, col[r], w[r]) : arith::Bf16Mac(psum, 0, 0);
    acc = k0 == 0 ? psum : arith::Fp32Add(acc, psum);
  }
  uint32_t y = arith::Fp32Add(acc, arith::BitsOfFloat(l.bias.data[static_cast<size_t>(oc)]));
  if (arith::Fp32IsNan(y)) return arith::kBf16Nan;
  if ((y & 0x80000000u) || (y & 0x7fffffffu) == 0) y = 0;
  return arith::Bf16OfFp32(y);
}

TEST(Bf16NetTest, LenetLayersEqualMacsByHand) {
  Model m = MakeLenet5(3);
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  for (Layer& l : m.layers)
    for (float& b : l.bias.data) b = normal(rng);  // non-zero biases
  std::vector<float> input(static_cast<size_t>(m.input.Size()));
  for (float& v : input) v = std::uniform_real_distribution<float>(0, 1)(rng);
  for (int n : {4, 16, 128}) {
    const Bf16Net net(m, n);
    const auto outs = net.Forward(input.data());
    ASSERT_EQ(outs.size(), m.layers.size());
    std::vector<uint16_t> x;
    for (float v : input) x.push_back(arith::Bf16OfFp32(arith::BitsOfFloat(v)));
    const Layer& conv1 = m.layers[0];
    ASSERT_EQ(conv1.type, LayerType::kConv2d);
    for (int oh : {0, 7, conv1.out.h - 1})
      for (int oc = 0; oc < conv1.out.c; ++oc) {
        const auto at = static_cast<size_t>((oh * conv1.out.w + 5) * conv1.out.c + oc);
        ASSERT_EQ(outs[0][at], ConvByHand(conv1, x, oh, 5, oc, n)) << n << " " << oh << " " << oc;
      }
    // The second conv reads the first pooling's output.
    const Layer& conv2 = m.layers[2];
    for (int oc = 0; oc < conv2.out.c; ++oc) {
      const auto at = static_cast<size_t>((2 * conv2.out.w + 3) * conv2.out.c + oc);
      ASSERT_EQ(outs[2][at], ConvByHand(conv2, outs[1], 2, 3, oc, n)) << n << " " << oc;
    }
    // Average pooling: the float32 sum in window order, times 1/4, rounded once.
    const Layer& pool = m.layers[1];
    const auto v = [&](int h, int w) {
      return arith::Fp32OfBf16(outs[0][static_cast<size_t>((h * pool.in.w + w) * pool.in.c)]);
    };
    const uint32_t sum =
        arith::Fp32Add(arith::Fp32Add(arith::Fp32Add(v(2, 4), v(2, 5)), v(3, 4)), v(3, 5));
    EXPECT_EQ(outs[1][static_cast<size_t>((1 * pool.out.w + 2) * pool.out.c)],
              arith::Bf16OfFp32(arith::BitsOfFloat(arith::FloatOfBits(sum) * 0.25f)));
  }
}

// Where the K tiles split a sum reaches the bfloat16 output: x = (1, 2^-8, six 2^-24) times
// ones. Added in one column, each 2^-24 is half an ulp of 1 + 2^-8 and rounds back (to even),
// leaving 1 + 2^-8, a bf16 tie that rounds to 1. In tiles of 2 or 4 rows, the small ones
// first sum to 2^-23 or more, which survives, and the result rounds up to 1 + 2^-7.
TEST(Bf16NetTest, TileBoundariesReachTheOutput) {
  Model m;
  m.name = "dot";
  m.preprocess = "none";
  m.input = {1, 1, 8};
  Layer dense;
  dense.name = "dot";
  dense.type = LayerType::kDense;
  dense.inputs = {kModelInput};
  dense.in = {1, 1, 8};
  dense.out = {1, 1, 1};
  dense.weights.shape = {8, 1};
  dense.weights.data.assign(8, 1.0f);
  dense.bias.shape = {1};
  dense.bias.data = {0.0f};
  m.layers.push_back(dense);
  const std::vector<float> x = {1.0f,     0x1p-8f,  0x1p-24f, 0x1p-24f,
                                0x1p-24f, 0x1p-24f, 0x1p-24f, 0x1p-24f};
  const std::vector<std::pair<int, uint16_t>> want = {
      {2, 0x3f81}, {4, 0x3f81}, {8, 0x3f80}, {16, 0x3f80}};
  for (const auto& [n, bits] : want) {
    EXPECT_EQ(Bf16Net(m, n).Forward(x.data()).back()[0], bits) << "N = " << n;
  }
}

TEST(Bf16NetTest, FirstNonFiniteNamesLayerAndIndex) {
  Model m = MakeLenet5(6);
  m.layers[2].weights.data[0] = std::numeric_limits<float>::infinity();
  std::vector<float> input(static_cast<size_t>(m.input.Size()), 0.5f);
  const auto outs = Bf16Net(m, 16).Forward(input.data());
  const NonFinite f = FirstNonFinite(outs);
  EXPECT_EQ(f.layer, 2);
  EXPECT_EQ(f.index, 0);  // channel 0 of pixel (0, 0) reads the infinite weight first
  EXPECT_EQ(FirstNonFinite(Bf16Net(MakeLenet5(6), 16).Forward(input.data())).layer, -1);
}

// Max pooling of any window, an add and a concatenation, value by value as docs/bf16.md
// ("Networks", items 6 to 8) says: the maximum of the window's values with padding never
// winning, the residual add, and each value as it leaves the array (a -0 becomes +0).
TEST(Bf16NetTest, MaxPoolAddAndConcatFollowTheChip) {
  Model m;
  m.name = "joins";
  m.input = {4, 4, 2};
  Layer pool = test::MakeLayer(LayerType::kMaxPool2d);
  pool.pool_h = pool.pool_w = 3;
  pool.pool_stride = 1;
  pool.padding = "explicit";
  pool.pad_top = pool.pad_left = pool.pad_bottom = pool.pad_right = 1;
  pool.inputs = {kModelInput};
  Layer add = test::MakeLayer(LayerType::kAdd);
  add.inputs = {0, kModelInput};
  Layer cat = test::MakeLayer(LayerType::kConcat);
  cat.inputs = {1, kModelInput};
  m.layers = {pool, add, cat};
  m = test::Randomize(m, 1);
  std::mt19937 rng(2);
  std::normal_distribution<float> d;
  std::vector<float> x(32);
  for (float& v : x) v = -std::abs(d(rng));  // all negative: padding must not win
  x[0] = -0.0f;
  const auto outs = Bf16Net(m, 4).Forward(x.data());
  auto bf = [](float v) { return arith::Bf16OfFp32(arith::BitsOfFloat(v)); };
  for (int h = 0; h < 4; ++h)
    for (int w = 0; w < 4; ++w)
      for (int c = 0; c < 2; ++c) {
        float mx = -INFINITY;
        for (int y = std::max(h - 1, 0); y <= std::min(h + 1, 3); ++y)
          for (int z = std::max(w - 1, 0); z <= std::min(w + 1, 3); ++z)
            mx = std::max(mx, arith::FloatOfBits(arith::Fp32OfBf16(
                                  bf(x[static_cast<size_t>((y * 4 + z) * 2 + c)]))));
        const size_t j = static_cast<size_t>((h * 4 + w) * 2 + c);
        const uint16_t want_pool = mx == 0.0f ? 0 : bf(mx);
        EXPECT_EQ(outs[0][j], want_pool) << h << " " << w << " " << c;
        EXPECT_EQ(outs[1][j], arith::Bf16ResidualAdd(want_pool, bf(x[j]), false));
        const size_t p = static_cast<size_t>(h * 4 + w);
        EXPECT_EQ(outs[2][p * 4 + static_cast<size_t>(c)], outs[1][j]);
        EXPECT_EQ(outs[2][p * 4 + 2 + static_cast<size_t>(c)], x[j] == 0.0f ? 0 : bf(x[j]));
      }
  EXPECT_EQ(outs[0][0], 0);  // the window of pixel (0, 0) has the -0: its maximum, as +0
  EXPECT_EQ(outs[2][2], 0);  // the -0 itself, concatenated
}

// An add ending in ReLU6 is refused (the chip's residual add has ReLU only); an average
// pooling of any window runs (as a depthwise convolution, as the chip runs it).
TEST(Bf16NetTest, AnAddWithRelu6IsRefused) {
  Model m = MakeLenet5(7);
  m.layers[1].pool_h = m.layers[1].pool_w = 3;
  m.layers[1].type = LayerType::kAvgPool2d;
  EXPECT_NO_THROW(Bf16Net(m, 16));
  Model g;
  g.name = "g";
  g.input = {4, 4, 2};
  Layer add = test::MakeLayer(LayerType::kAdd);
  add.inputs = {kModelInput, kModelInput};
  add.activation = Activation::kRelu6;
  g.layers = {add};
  g = test::Randomize(g, 1);
  try {
    Bf16Net net(g, 16);
    FAIL() << "expected an error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("ends in ReLU6"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tpu::nn
