// fp32 forward/backward (host/nn/fp32_net.cc) and training (trainer.cc): analytic
// gradients against finite differences for every layer type, and training that learns.
#include "host/nn/fp32_net.h"

#include <gtest/gtest.h>

#include <cmath>

#include "host/common/errors.h"
#include "host/nn/trainer.h"
#include "tests/host/nn/nn_test_util.h"
#include "tests/mnist_test_util.h"

namespace tpu::nn {
namespace {

// In training mode: a batch normalization over the batch's statistics.
double Loss(const Model& m, const data::MnistSet& s) {
  ForwardCache cache;
  cache.training = true;
  Forward(m, Fp32Input(s.pixels.data(), s.count, m.input), &cache);
  double loss = 0;
  for (int64_t b = 0; b < s.count; ++b) loss -= std::log(cache.acts.back()(b, s.labels[b]));
  return loss / static_cast<double>(s.count);
}

void CheckGradients(Model m) {
  const data::MnistSet s = test::RandomImages(m, 4, 99);
  ForwardCache cache;
  cache.training = true;
  Forward(m, Fp32Input(s.pixels.data(), s.count, m.input), &cache);
  ParamSet g = ParamSet::ZerosLike(m);
  const double loss = Backward(m, cache, s.labels.data(), &g);
  EXPECT_NEAR(loss, Loss(m, s), 1e-5);
  std::mt19937 rng(5);
  const double base = Loss(m, s);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    Layer& l = m.layers[i];
    if (!l.HasWeights()) continue;
    int checked = 0;
    for (int pick = 0; pick < 12; ++pick) {
      const bool bias = pick % 4 == 3;
      std::vector<float>& p = bias ? l.bias.data : l.weights.data;
      size_t k = rng() % p.size();
      // A depthwise layer's expanded kernels: a value on a tap's diagonal (the rest stay 0).
      const size_t c = static_cast<size_t>(l.in.c);
      if (l.depthwise && !bias) k = k / (c * c) * c * c + (k % c) * (c + 1);
      const float analytic = bias ? g.b[i][k] : g.w[i][k];
      const float saved = p[k];
      constexpr float kEps = 1e-3f;
      p[k] = saved + kEps;
      const double up = Loss(m, s);
      p[k] = saved - kEps;
      const double down = Loss(m, s);
      p[k] = saved;
      // A ReLU kink inside [-eps, eps] makes the two one-sided slopes differ; the
      // derivative is not defined there, so that sample is skipped.
      const double right = (up - base) / kEps, left = (base - down) / kEps;
      if (std::fabs(right - left) > 1e-3 + 0.02 * std::fabs(right + left)) continue;
      ++checked;
      const double numeric = (up - down) / (2 * kEps);
      EXPECT_NEAR(analytic, numeric, 1e-3 + 0.02 * std::fabs(numeric))
          << "layer " << l.name << (bias ? " bias " : " weight ") << k;
    }
    EXPECT_GE(checked, 8) << "layer " << l.name << ": too many samples on ReLU kinks";
  }
}

TEST(Fp32NetTest, GradientsMatchFiniteDifferencesStridedSameConvMaxPoolDense) {
  CheckGradients(test::StridedSameModel(1));
}

TEST(Fp32NetTest, GradientsMatchFiniteDifferencesValidConvAvgPoolSameConv) {
  CheckGradients(test::AvgPoolModel(2));
}

// 8 x 8 x 1 -> conv 4 -> sigmoid -> conv 3 (same) -> tanh -> flatten -> dense 3: the tables'
// derivatives, y (1 - y) and 1 - y^2, carry the gradient to the first convolution.
TEST(Fp32NetTest, GradientsMatchFiniteDifferencesSigmoidTanh) {
  Model m;
  m.name = "tables";
  m.input = {8, 8, 1};
  m.layers = {test::MakeLayer(LayerType::kConv2d, 4, 3),
              test::MakeLayer(LayerType::kSigmoid),
              test::MakeLayer(LayerType::kConv2d, 3, 2, 1, "same"),
              test::MakeLayer(LayerType::kTanh),
              test::MakeLayer(LayerType::kFlatten),
              test::MakeLayer(LayerType::kDense, 3, 1, 1, "valid", Activation::kSoftmax)};
  CheckGradients(test::Randomize(m, 4));
}

TEST(Fp32NetTest, GradientsMatchFiniteDifferencesLenet5) { CheckGradients(MakeLenet5(3)); }

// A graph: l0 read by two layers (a depthwise convolution and the residual add), the add read
// by a 1 x 1 convolution and by the concatenation of the two: each gradient the sum of its
// readers', the add's passed to both its inputs, the concatenation's split by channels.
Model GraphModel() {
  Model m;
  m.name = "graph";
  m.input = {6, 6, 2};
  Layer dw = test::MakeLayer(LayerType::kConv2d, 4, 3, 1, "same");
  dw.depthwise = true;
  Layer add = test::MakeLayer(LayerType::kAdd);
  add.inputs = {0, 1};
  add.activation = Activation::kRelu;
  Layer cat = test::MakeLayer(LayerType::kConcat);
  cat.inputs = {2, 3};
  m.layers = {test::MakeLayer(LayerType::kConv2d, 4, 3, 1, "same"),
              dw,
              add,
              test::MakeLayer(LayerType::kConv2d, 3, 1),
              cat,
              test::MakeLayer(LayerType::kMaxPool2d),
              test::MakeLayer(LayerType::kFlatten),
              test::MakeLayer(LayerType::kDense, 3, 1, 1, "valid", Activation::kSoftmax)};
  return test::Randomize(m, 8);
}

TEST(Fp32NetTest, GradientsMatchFiniteDifferencesResidualDepthwiseConcat) {
  CheckGradients(GraphModel());
}

// The expanded kernels' zeros take no gradient, so a trained depthwise layer stays one.
TEST(Fp32NetTest, DepthwiseKernelsTakeGradientsOnTheirDiagonalOnly) {
  const Model m = GraphModel();
  const data::MnistSet s = test::RandomImages(m, 4, 3);
  ForwardCache cache;
  Forward(m, Fp32Input(s.pixels.data(), s.count, m.input), &cache);
  ParamSet g = ParamSet::ZerosLike(m);
  Backward(m, cache, s.labels.data(), &g);
  const int64_t c = m.layers[1].in.c;
  int on = 0;
  for (size_t k = 0; k < g.w[1].size(); ++k) {
    const bool diagonal = static_cast<int64_t>(k) / c % c == static_cast<int64_t>(k) % c;
    if (!diagonal) {
      EXPECT_EQ(g.w[1][k], 0.0f) << k;
    }
    on += diagonal && g.w[1][k] != 0.0f;
  }
  EXPECT_GT(on, 0);
}

// 8 x 8 x 1 -> conv 4 -> batch_norm, ReLU -> max pooling -> flatten -> dense 6 -> batch_norm
// -> dense 3: the gradients of gamma and beta, and through the batch's statistics into the
// convolution's weights (every image's output depends on every other's).
Model BatchNormModel() {
  Model m;
  m.name = "bn";
  m.input = {8, 8, 1};
  Layer bn = test::MakeLayer(LayerType::kBatchNorm);
  m.layers = {test::MakeLayer(LayerType::kConv2d, 4, 3, 1, "valid", Activation::kNone),
              bn,
              test::MakeLayer(LayerType::kMaxPool2d),
              test::MakeLayer(LayerType::kFlatten),
              test::MakeLayer(LayerType::kDense, 6, 1, 1, "valid", Activation::kNone),
              bn,
              test::MakeLayer(LayerType::kDense, 3, 1, 1, "valid", Activation::kSoftmax)};
  m.layers[1].activation = Activation::kRelu;
  return test::Randomize(m, 11);
}

TEST(Fp32NetTest, GradientsMatchFiniteDifferencesBatchNorm) { CheckGradients(BatchNormModel()); }

// Training normalizes over the batch: each channel's outputs before gamma and beta have mean
// 0 and variance var / (var + eps); the running statistics move by momentum toward the
// batch's mean and unbiased variance (PyTorch's rule), computed here directly.
TEST(BatchNormTest, TrainingUsesTheBatchsStatisticsAndUpdatesTheRunningOnes) {
  Model m = BatchNormModel();
  const data::MnistSet s = test::RandomImages(m, 5, 4);
  ForwardCache cache;
  cache.training = true;
  Forward(m, Fp32Input(s.pixels.data(), s.count, m.input), &cache);
  const Layer bn = m.layers[1];
  const MatrixF& x = cache.acts[1];
  const int c = bn.out.c;
  const double n = static_cast<double>(x.size() / c);
  UpdateState(&m, cache);
  for (int ch = 0; ch < c; ++ch) {
    double sum = 0, squares = 0, normalized = 0;
    for (int64_t r = 0; r < x.rows(); ++r)
      for (int64_t k = ch; k < x.cols(); k += c) sum += x(r, k);
    const double mean = sum / n;
    for (int64_t r = 0; r < x.rows(); ++r)
      for (int64_t k = ch; k < x.cols(); k += c) squares += (x(r, k) - mean) * (x(r, k) - mean);
    const double var = squares / n;
    EXPECT_NEAR(m.layers[1].state[0].data[ch], 0.9 * bn.state[0].data[ch] + 0.1 * mean, 1e-6);
    EXPECT_NEAR(m.layers[1].state[1].data[ch], 0.9 * bn.state[1].data[ch] + 0.1 * squares / (n - 1),
                1e-6);
    // Before the ReLU: (y - beta) / gamma, from the pre-activation the ReLU left (y > 0).
    for (int64_t r = 0; r < x.rows(); ++r) {
      for (int64_t k = ch; k < x.cols(); k += c) {
        const double want =
            (x(r, k) - mean) / std::sqrt(var + bn.epsilon) * bn.weights.data[ch] + bn.bias.data[ch];
        EXPECT_NEAR(cache.acts[2](r, k), std::max(want, 0.0), 1e-5);
        normalized += want;
      }
    }
    EXPECT_NEAR(normalized / n, bn.bias.data[ch], 1e-5);
  }
}

// Folded into the layers before them, the batch normalizations infer as they did (running
// statistics); one that reads a layer with an activation, or the input, is refused by name.
TEST(BatchNormTest, FoldedIntoTheLayersBeforeTheModelInfersTheSame) {
  const Model m = BatchNormModel();
  Model folded = m;
  EXPECT_EQ(FoldBatchNorms(&folded), 2);
  ASSERT_EQ(folded.layers.size(), 5u);
  EXPECT_EQ(folded.layers[0].activation, Activation::kRelu);
  InferShapes(&folded);
  const data::MnistSet s = test::RandomImages(m, 6, 2);
  ForwardCache a, b;
  Forward(m, Fp32Input(s.pixels.data(), s.count, m.input), &a);
  Forward(folded, Fp32Input(s.pixels.data(), s.count, m.input), &b);
  EXPECT_LT((a.acts.back() - b.acts.back()).cwiseAbs().maxCoeff(), 1e-6f);
  Model bad = m;
  bad.layers[0].activation = Activation::kRelu;
  try {
    FoldBatchNorms(&bad);
    ADD_FAILURE() << "a batch_norm after a ReLU was folded";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("batch_norm 'l1'"), std::string::npos) << e.what();
  }
}

// The residual CNN's gradients, every one of them, are PyTorch's autograd's
// (tests/training/grads_vs_torch.py --arch residual: training_graph_grads_vs_torch).

TEST(Fp32NetTest, SoftmaxRowsSumToOne) {
  const Model m = test::StridedSameModel(6);
  const data::MnistSet s = test::RandomImages(m, 5, 7);
  ForwardCache cache;
  Forward(m, Fp32Input(s.pixels.data(), s.count, m.input), &cache);
  for (int64_t b = 0; b < s.count; ++b) EXPECT_NEAR(cache.acts.back().row(b).sum(), 1.0f, 1e-5f);
}

TEST(TrainerTest, ShortTrainingOnMnistLearns) {
  TPUSIM_MNIST_DIR_OR_SKIP(dir)
  const data::MnistSet train = data::LoadMnist(dir, true, 6000);
  data::MnistSet test = data::LoadMnist(dir, false, 1000);
  Model m = MakeLenet5(1);
  AdamState adam = AdamState::For(m);
  TrainOptions o;
  const double before = EvaluateFp32(m, test, 2);
  TrainEpoch(&m, train, 1, o, &adam);
  const double after = EvaluateFp32(m, test, 2);
  EXPECT_LT(before, 0.3) << "an untrained network is near chance";
  EXPECT_GT(after, 0.8) << "one epoch on 6,000 images learns";
}

TEST(TrainerTest, SameSeedSameWeights) {
  const Model init = test::StridedSameModel(8);
  const data::MnistSet s = test::RandomImages(init, 200, 9);
  Model a = init, b = init;
  TrainOptions o;
  o.batch = 16;
  AdamState sa = AdamState::For(a), sb = AdamState::For(b);
  TrainEpoch(&a, s, 1, o, &sa);
  TrainEpoch(&b, s, 1, o, &sb);
  for (size_t i = 0; i < a.layers.size(); ++i)
    EXPECT_EQ(a.layers[i].weights.data, b.layers[i].weights.data);
  EXPECT_NE(a.layers[0].weights.data, init.layers[0].weights.data);
}

}  // namespace
}  // namespace tpu::nn
