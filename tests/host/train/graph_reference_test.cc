// A graph's training step in the chip's arithmetic (host/train/graph_reference.h): graphs
// (residual adds, a concatenation, a stride-2 convolution, global and max pooling) give nn's
// float32 gradients through the chip's ReLU pattern within the goal, 2e-2 of each tensor's
// largest (convnet_reference_test.cc says why through the pattern). The course material's
// CNN is one graph: conv_step_test.cc checks the chip's step against this reference, bit for
// bit.
#include "host/train/graph_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "host/common/errors.h"
#include "host/nn/fp32_net.h"
#include "host/nn/ops/op.h"
#include "host/train/dense_model.h"
#include "tests/host/nn/nn_test_util.h"

namespace tpu::train {
namespace {

using nn::MatrixF;

Batch BatchOf(const data::MnistSet& s) {
  Batch b;
  for (int64_t i = 0; i < s.count * s.image_size; ++i) b.x.push_back(s.pixels[i] / 255.0f);
  b.labels = s.labels;
  return b;
}

// A max pooling's gradient routed as the chip routed it (`tap`: ConvNetGradients::max_tap):
// each output value's to the input value under the tap that took it.
MatrixF RoutedMaxGradient(const nn::Layer& l, const MatrixF& dy, const std::vector<int32_t>& tap) {
  MatrixF dx = MatrixF::Zero(dy.rows(), l.in.Size());
  for (int64_t b = 0; b < dy.rows(); ++b)
    for (int64_t o = 0; o < dy.cols(); ++o) {
      const int32_t t = tap[static_cast<size_t>(b * dy.cols() + o)];
      if (t < 0) continue;
      const int64_t c = o % l.out.c, px = o / l.out.c;
      const int64_t y = px / l.out.w * l.pool_stride + t / l.pool_w - l.pad_top;
      const int64_t x = px % l.out.w * l.pool_stride + t % l.pool_w - l.pad_left;
      dx(b, (y * l.in.w + x) * l.in.c + c) += dy(b, o);
    }
  return dx;
}

// nn's float32 step (the operations' forward and backward passes) with each ReLU's output
// where the chip's passed its value on, else 0 (ReLU6's: 6 where the chip's gave 6), its
// gradient only where the chip's passed, and each max pooling's gradient where the chip
// routed it; the mean loss into *loss.
nn::ParamSet PatternGradients(const nn::Model& m, const data::MnistSet& s,
                              const ConvNetGradients& chip, double* loss) {
  const size_t n = m.layers.size();
  std::vector<MatrixF> acts(n + 1), cols(n), grads(n + 1);
  acts[0] = nn::Fp32Input(s.pixels.data(), s.count, m.input);
  auto pattern = [&](size_t i, MatrixF* v, bool gradient) {
    if (chip.relu_on[i].empty()) return;
    for (int64_t k = 0; k < v->size(); ++k) {
      const uint8_t on = chip.relu_on[i][static_cast<size_t>(k)];
      float& x = v->data()[k];
      x = on == 1 ? x : on == 2 && !gradient ? 6.0f : 0.0f;
    }
  };
  for (size_t i = 0; i < n; ++i) {
    std::vector<const MatrixF*> xs;
    for (int k : m.layers[i].inputs) xs.push_back(&acts[static_cast<size_t>(k + 1)]);
    nn::ops::Op(m.layers[i].type).forward(m.layers[i], xs, &cols[i], &acts[i + 1]);
    pattern(i, &acts[i + 1], false);
  }
  MatrixF& top = grads[n] = acts[n];  // the logits, to dL/dlogits
  *loss = 0;
  for (int64_t b = 0; b < top.rows(); ++b) {
    const double most = top.row(b).maxCoeff();
    const double sum = (top.row(b).array() - static_cast<float>(most)).exp().sum();
    *loss += (std::log(sum) - (top(b, s.labels[static_cast<size_t>(b)]) - most)) / top.rows();
    top.row(b) = (top.row(b).array() - static_cast<float>(most)).exp() / static_cast<float>(sum);
    top(b, s.labels[static_cast<size_t>(b)]) -= 1;
  }
  top /= static_cast<float>(top.rows());
  nn::ParamSet g = nn::ParamSet::ZerosLike(m);
  for (size_t i = n; i-- > 0;) {
    const nn::Layer& l = m.layers[i];
    pattern(i, &grads[i + 1], true);
    std::vector<const MatrixF*> xs;
    std::vector<MatrixF> dxs(l.inputs.size());
    std::vector<MatrixF*> dx;
    for (size_t k = 0; k < l.inputs.size(); ++k) {
      xs.push_back(&acts[static_cast<size_t>(l.inputs[k] + 1)]);
      dx.push_back(&dxs[k]);
    }
    if (l.type == nn::LayerType::kMaxPool2d) {
      dxs[0] = RoutedMaxGradient(l, grads[i + 1], chip.max_tap[i]);
    } else {
      nn::ops::Op(l.type).backward(l,
                                   {xs, acts[i + 1], &cols[i], grads[i + 1], &g.w[i], &g.b[i], dx});
    }
    for (size_t k = 0; k < l.inputs.size(); ++k) {
      MatrixF& sum = grads[static_cast<size_t>(l.inputs[k] + 1)];
      sum = sum.size() ? MatrixF(sum + dxs[k]) : dxs[k];
    }
  }
  return g;
}

// The chip's ReLU pattern is float32's but where a unit's input lies within a few bfloat16
// roundings (2^-9 relative to the terms of its sum) of 0: of the order of 1 % of the units
// for inputs spread over their own size. The check's 5 % is loose against that and tight
// against a ReLU left out (about half the units), which the check through the pattern
// cannot see.
void ExpectFloat32sReluPattern(const nn::Model& m, const data::MnistSet& s,
                               const ConvNetGradients& g) {
  nn::ForwardCache cache;
  nn::Forward(m, nn::Fp32Input(s.pixels.data(), s.count, m.input), &cache);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    if (g.relu_on[i].empty()) continue;
    const MatrixF& y = cache.acts[i + 1];
    int64_t flips = 0;
    for (int64_t k = 0; k < y.size(); ++k) {
      const float v = y.data()[k];
      flips += (v <= 0 ? 0
                : v >= 6 && m.layers[i].activation == nn::Activation::kRelu6
                    ? 2
                    : 1) != g.relu_on[i][static_cast<size_t>(k)];
    }
    EXPECT_LT(flips, y.size() / 20) << m.layers[i].name << ": " << flips << " of " << y.size();
  }
}

// The same for the max poolings' routing: the chip's first tap to equal the bfloat16
// maximum is float32's first maximum but where two taps lie within a bfloat16 rounding of
// each other (about 1 % of the windows here); the 5 % catches a routing by the last
// maximum instead (the ties of zeros after a ReLU).
void ExpectFloat32sMaxRouting(const nn::Model& m, const data::MnistSet& s,
                              const ConvNetGradients& g) {
  nn::ForwardCache cache;
  nn::Forward(m, nn::Fp32Input(s.pixels.data(), s.count, m.input), &cache);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const nn::Layer& l = m.layers[i];
    if (l.type != nn::LayerType::kMaxPool2d) continue;
    const MatrixF& x = cache.acts[static_cast<size_t>(l.inputs[0] + 1)];
    const MatrixF& y = cache.acts[i + 1];
    int64_t moved = 0;
    for (int64_t b = 0; b < y.rows(); ++b)
      for (int64_t o = 0; o < y.cols(); ++o) {
        const int64_t c = o % l.out.c, px = o / l.out.c;
        int32_t first = -1;
        for (int32_t t = 0; t < l.pool_h * l.pool_w && first < 0; ++t) {
          const int64_t yy = px / l.out.w * l.pool_stride + t / l.pool_w - l.pad_top;
          const int64_t xx = px % l.out.w * l.pool_stride + t % l.pool_w - l.pad_left;
          if (yy < 0 || yy >= l.in.h || xx < 0 || xx >= l.in.w) continue;
          if (x(b, (yy * l.in.w + xx) * l.in.c + c) == y(b, o)) first = t;
        }
        moved += first != g.max_tap[i][static_cast<size_t>(b * y.cols() + o)];
      }
    EXPECT_LT(moved, y.size() / 20) << l.name << ": " << moved << " of " << y.size();
  }
}

void ExpectNearPlain(const nn::Model& m, int batch) {
  const data::MnistSet s = test::RandomImages(m, batch, 5);
  const ConvNetGradients g = ReferenceGraphGradients(m, BatchOf(s), batch, 128);
  ExpectFloat32sReluPattern(m, s, g);
  ExpectFloat32sMaxRouting(m, s, g);
  double loss = 0;
  const nn::ParamSet want = PatternGradients(m, s, g, &loss);
  EXPECT_NEAR(g.mean, loss, 1e-2 * loss);
  test::ExpectGradientsNear(m, g, want, 2e-2);
}

TEST(GraphReferenceTest, ResidualCnnGradientsAreThePlainOnesThroughTheSameReluPattern) {
  ExpectNearPlain(nn::MakeResidualCnn(3), 16);
}

// 10 x 10 x 2: conv 4 same (l0), conv 4 of stride 2 same (l1, 5 x 5), a depthwise conv
// same of no ReLU (l2) added to l1 (l3, ReLU), concatenated with l1 (l4: 8 channels, l1
// read three times), a 1 x 1 conv (l5), pooled globally (l6), a hidden dense layer (l7),
// the outputs.
nn::Model BranchyGraph() {
  using nn::LayerType;
  nn::Model m;
  m.name = "branchy";
  m.input = {10, 10, 2};
  nn::Layer add = test::MakeLayer(LayerType::kAdd), cat = test::MakeLayer(LayerType::kConcat),
            gap = test::MakeLayer(LayerType::kAvgPool2d);
  add.inputs = {1, 2};
  add.activation = nn::Activation::kRelu;
  cat.inputs = {3, 1};
  gap.global_pool = true;
  nn::Layer dw = test::MakeLayer(LayerType::kConv2d, 4, 3, 1, "same", nn::Activation::kNone);
  dw.depthwise = true;
  m.layers = {test::MakeLayer(LayerType::kConv2d, 4, 3, 1, "same"),
              test::MakeLayer(LayerType::kConv2d, 4, 3, 2, "same"),
              dw,
              add,
              cat,
              test::MakeLayer(LayerType::kConv2d, 6, 1),
              gap,
              test::MakeLayer(LayerType::kDense, 12),
              test::MakeLayer(LayerType::kDense, 5, 1, 1, "valid", nn::Activation::kSoftmax)};
  return test::Randomize(m, 7);
}

TEST(GraphReferenceTest, BranchyGraphGradientsAreThePlainOnesThroughTheSameReluPattern) {
  ExpectNearPlain(BranchyGraph(), 16);
}

// Max pooling: its padding beside negative values, ties of zeros after a ReLU, windows that
// overlap.
TEST(GraphReferenceTest, MaxPoolGraphGradientsAreThePlainOnesThroughTheSameReluPattern) {
  ExpectNearPlain(test::MaxPoolGraph(3), 16);
}

// Windows that leave their input's last row and column out (ResNet's 1 x 1 downsampling of
// stride 2, a 2 x 2 max pooling of a 5 x 5 map).
TEST(GraphReferenceTest, DownsampleGraphGradientsAreThePlainOnesThroughTheSameReluPattern) {
  ExpectNearPlain(test::DownsampleGraph(10), 16);
}

// Average poolings of an odd map (its last row and column read by none), of 3 x 3 windows
// that overlap and are padded.
TEST(GraphReferenceTest, AvgPoolGraphGradientsAreThePlainOnesThroughTheSameReluPattern) {
  ExpectNearPlain(test::AvgPoolGraph(3), 16);
}

// ReLU6 (MobileNet's): values it bounds at 6, its gradient 0 there.
TEST(GraphReferenceTest, Relu6GraphGradientsAreThePlainOnesThroughTheSameReluPattern) {
  const nn::Model m = test::Relu6Graph(3);
  ExpectNearPlain(m, 16);
  const ConvNetGradients g =
      ReferenceGraphGradients(m, BatchOf(test::RandomImages(m, 16, 5)), 16, 128);
  for (size_t i : {0, 1, 3}) {  // each bounds some values at 6 and passes others
    EXPECT_GT(std::count(g.relu_on[i].begin(), g.relu_on[i].end(), 2), 20) << i;
    EXPECT_GT(std::count(g.relu_on[i].begin(), g.relu_on[i].end(), 1), 20) << i;
  }
}

// Batch normalization in training mode (2-D after a convolution, with ReLU; 1-D after a
// dense layer): the running statistics after a step against nn's float32 update (PyTorch's
// rule) from the same batch. Its input x reaches the chip rounded to bfloat16 (2^-9 of each
// value at most), which moves the batch's mean by at most 2^-9 max|x| and its variance by
// at most about 2 2^-9 max|x|^2; the bound allows twice that (the float32 sums' own
// rounding), times the momentum (and the unbiased factor, 4/3 for the 1-D one's 4 values
// a channel: leaving it out fails the check). The gradients are checked against
// PyTorch's in tests/training (training_torch_model): a relative check here would meet the
// biases before a normalization, zero in exact arithmetic.
TEST(GraphReferenceTest, BatchNormRunningStatisticsAreFloat32sWithinTheRounding) {
  nn::Model m;
  m.name = "bn";
  m.input = {8, 8, 2};
  m.layers = {test::MakeLayer(nn::LayerType::kConv2d, 4, 3, 1, "same", nn::Activation::kNone),
              test::MakeLayer(nn::LayerType::kBatchNorm),
              test::MaxPool(2, 2, 0),
              test::MakeLayer(nn::LayerType::kFlatten),
              test::MakeLayer(nn::LayerType::kDense, 6, 1, 1, "valid", nn::Activation::kNone),
              test::MakeLayer(nn::LayerType::kBatchNorm),
              test::MakeLayer(nn::LayerType::kDense, 5, 1, 1, "valid", nn::Activation::kSoftmax)};
  m.layers[1].activation = m.layers[5].activation = nn::Activation::kRelu;
  m = test::Randomize(m, 7);
  const data::MnistSet s = test::RandomImages(m, 4, 5);
  nn::ForwardCache cache;
  cache.training = true;
  nn::Forward(m, nn::Fp32Input(s.pixels.data(), s.count, m.input), &cache);
  nn::Model want = m;
  nn::UpdateState(&want, cache);
  train::DenseState state = train::FreshState(m, train::Optimizer());
  train::ReferenceGraphStep(m, 128, train::Optimizer(), BatchOf(s), 4, &state);
  size_t k = 0;
  for (size_t i : {1, 5}) {
    const double most = cache.acts[i].cwiseAbs().maxCoeff(), mom = m.layers[i].momentum;
    const double n = static_cast<double>(cache.acts[i].size() / m.layers[i].out.c);
    const double bound[2] = {mom * 2 * std::ldexp(most, -9),
                             mom * n / (n - 1) * 4 * std::ldexp(most * most, -9)};
    for (int t = 0; t < 2; ++t, ++k)
      for (int c = 0; c < m.layers[i].out.c; ++c)
        EXPECT_NEAR(state.kept[k][static_cast<size_t>(c)],
                    want.layers[i].state[static_cast<size_t>(t)].data[static_cast<size_t>(c)],
                    bound[t])
            << m.layers[i].name << " " << t << " " << c;
  }
  EXPECT_EQ(k, state.kept.size());
}

TEST(GraphReferenceTest, WhatTheChipDoesNotTrainIsRefusedNamingTheLayer) {
  nn::Model m = BranchyGraph();
  m.layers[1].stride = 3;
  nn::InferShapes(&m);
  try {
    CheckGraphTrainable(m);
    FAIL() << "a convolution of stride 3 was taken";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'l1'"), std::string::npos) << e.what();
  }
  nn::Model pooled = test::MaxPoolGraph(3);  // a max pooling of stride 3
  pooled.layers[5].pool_stride = 3;
  nn::InferShapes(&pooled);
  EXPECT_THROW(CheckGraphTrainable(pooled), UsageError);
  EXPECT_NO_THROW(CheckGraphTrainable(BranchyGraph()));
}

}  // namespace
}  // namespace tpu::train
