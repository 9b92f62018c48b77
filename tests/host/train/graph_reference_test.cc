// A graph's training step in the chip's arithmetic (host/train/graph_reference.h): graphs
// (residual adds, a concatenation, a stride-2 convolution, global pooling) give nn's float32
// gradients through the chip's ReLU pattern within the goal, 2e-2 of each tensor's
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

// nn's float32 step (the operations' forward and backward passes) with each ReLU's output
// where the chip's passed its value on, else 0; the mean loss into *loss.
nn::ParamSet PatternGradients(const nn::Model& m, const data::MnistSet& s,
                              const ConvNetGradients& chip, double* loss) {
  const size_t n = m.layers.size();
  std::vector<MatrixF> acts(n + 1), cols(n), grads(n + 1);
  acts[0] = nn::Fp32Input(s.pixels.data(), s.count, m.input);
  auto pattern = [&](size_t i, MatrixF* v) {
    if (m.layers[i].activation != nn::Activation::kRelu) return;
    for (int64_t k = 0; k < v->size(); ++k) v->data()[k] *= chip.relu_on[i][static_cast<size_t>(k)];
  };
  for (size_t i = 0; i < n; ++i) {
    std::vector<const MatrixF*> xs;
    for (int k : m.layers[i].inputs) xs.push_back(&acts[static_cast<size_t>(k + 1)]);
    nn::ops::Op(m.layers[i].type).forward(m.layers[i], xs, &cols[i], &acts[i + 1]);
    pattern(i, &acts[i + 1]);
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
    pattern(i, &grads[i + 1]);
    std::vector<const MatrixF*> xs;
    std::vector<MatrixF> dxs(l.inputs.size());
    std::vector<MatrixF*> dx;
    for (size_t k = 0; k < l.inputs.size(); ++k) {
      xs.push_back(&acts[static_cast<size_t>(l.inputs[k] + 1)]);
      dx.push_back(&dxs[k]);
    }
    nn::ops::Op(l.type).backward(l,
                                 {xs, acts[i + 1], &cols[i], grads[i + 1], &g.w[i], &g.b[i], dx});
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
    if (m.layers[i].activation != nn::Activation::kRelu) continue;
    const MatrixF& y = cache.acts[i + 1];
    int64_t flips = 0;
    for (int64_t k = 0; k < y.size(); ++k)
      flips += (y.data()[k] > 0) != (g.relu_on[i][static_cast<size_t>(k)] != 0);
    EXPECT_LT(flips, y.size() / 20) << m.layers[i].name << ": " << flips << " of " << y.size();
  }
}

void ExpectNearPlain(const nn::Model& m, int batch) {
  const data::MnistSet s = test::RandomImages(m, batch, 5);
  const ConvNetGradients g = ReferenceGraphGradients(m, BatchOf(s), batch, 128);
  ExpectFloat32sReluPattern(m, s, g);
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

TEST(GraphReferenceTest, WhatTheChipDoesNotTrainIsRefusedNamingTheLayer) {
  nn::Model m = BranchyGraph();
  m.layers[7].activation = nn::Activation::kRelu6;
  try {
    CheckGraphTrainable(m);
    FAIL() << "a ReLU6 was taken";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'l7'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(CheckGraphTrainable(test::StridedSameModel(1)), UsageError);  // max pooling
  EXPECT_NO_THROW(CheckGraphTrainable(BranchyGraph()));
}

}  // namespace
}  // namespace tpu::train
