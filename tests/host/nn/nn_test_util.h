// Small random models and images for the neural-network tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "host/data/mnist.h"
#include "host/nn/model.h"
#include "host/nn/ops/op.h"

namespace tpu::test {

inline nn::Layer MakeLayer(nn::LayerType type, int out_c = 0, int k = 3, int stride = 1,
                           const char* padding = "valid",
                           nn::Activation act = nn::Activation::kRelu) {
  nn::Layer l;
  l.type = type;
  l.kernel_h = l.kernel_w = k;
  l.stride = stride;
  l.padding = padding;
  // Only conv and dense layers carry an activation.
  const bool weighted = type == nn::LayerType::kConv2d || type == nn::LayerType::kDense;
  l.activation = weighted ? act : nn::Activation::kNone;
  l.out = {1, 1, out_c};
  return l;
}

// Names layers, infers shapes, and fills weights and biases uniformly in [-0.5, 0.5].
inline nn::Model Randomize(nn::Model m, uint64_t seed) {
  for (size_t i = 0; i < m.layers.size(); ++i) m.layers[i].name = "l" + std::to_string(i);
  nn::InferShapes(&m);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  for (nn::Layer& l : m.layers) {
    if (!l.HasWeights()) continue;
    if (l.type == nn::LayerType::kConv2d) {
      l.weights.shape = {l.kernel_h, l.kernel_w, l.in.c, l.out.c};
    } else {
      l.weights.shape = nn::ops::Op(l.type).weight_shape(l);
    }
    l.weights.data.resize(static_cast<size_t>(l.weights.Size()));
    for (float& v : l.weights.data) v = dist(rng);
    if (l.depthwise) l.weights = nn::ExpandDepthwise(nn::CompactDepthwise(l.weights));
    const int64_t columns = nn::ops::WeightColumns(l);
    l.bias.shape = {columns};
    l.bias.data.resize(static_cast<size_t>(columns));
    for (float& v : l.bias.data) v = 0.2f * dist(rng);
    // What it keeps (batch normalization's running mean and variance): in [0.5, 1).
    const char* const* state = nn::ops::Op(l.type).state;
    l.state.clear();
    for (; state && *state; ++state) {
      Tensor<float> t;
      t.shape = {columns};
      for (int64_t k = 0; k < columns; ++k) t.data.push_back(0.75f + 0.5f * dist(rng));
      l.state.push_back(t);
    }
  }
  return m;
}

// 9 x 9 x 2 -> conv 3, stride 2, same -> maxpool -> flatten -> dense 5 -> dense 4 softmax.
// One head-split self-attention built by hand (docs/transformers.md): `tokens` tokens of 6,
// a projection to Q and K (12), sliced, split into `heads` heads, Q Kᵀ x 0.5 (B given
// untransposed: transpose_b), softmax, layer_norm (epsilon 1e-3), gelu; named, shaped and
// filled by Randomize(seed).
inline nn::Model HandAttention(int tokens, int heads, uint64_t seed) {
  using nn::LayerType;
  nn::Model m;
  m.name = "attention";
  m.input = {1, tokens, 6};
  m.preprocess = "none";
  const auto layer = [](LayerType t, std::vector<int> inputs) {
    nn::Layer l = MakeLayer(t);
    l.inputs = std::move(inputs);
    return l;
  };
  nn::Layer qk = MakeLayer(LayerType::kConv2d, 12, 1, 1, "valid", nn::Activation::kNone);
  qk.inputs = {nn::kModelInput};
  nn::Layer q = layer(LayerType::kSlice, {0}), k = layer(LayerType::kSlice, {0});
  q.end = 6;
  k.start = 6;
  k.end = 12;
  nn::Layer rq = layer(LayerType::kReshape, {1}), rk = layer(LayerType::kReshape, {2});
  rq.out = rk.out = {tokens, heads, 6 / heads};
  nn::Layer tq = layer(LayerType::kTranspose, {3}), tk = layer(LayerType::kTranspose, {4});
  tq.perm = tk.perm = {1, 0, 2};
  nn::Layer mm = layer(LayerType::kMatMul, {5, 6});
  mm.transpose_b = true;
  mm.scale = 0.5f;
  nn::Layer ln = layer(LayerType::kLayerNorm, {8});
  ln.epsilon = 1e-3f;
  m.layers = {qk,
              q,
              k,
              rq,
              rk,
              tq,
              tk,
              mm,
              layer(LayerType::kSoftmax, {7}),
              ln,
              layer(LayerType::kGelu, {9})};
  return Randomize(m, seed);
}

inline nn::Model StridedSameModel(uint64_t seed) {
  nn::Model m;
  m.name = "strided";
  m.input = {9, 9, 2};
  m.layers = {MakeLayer(nn::LayerType::kConv2d, 3, 3, 2, "same"),
              MakeLayer(nn::LayerType::kMaxPool2d), MakeLayer(nn::LayerType::kFlatten),
              MakeLayer(nn::LayerType::kDense, 5),
              MakeLayer(nn::LayerType::kDense, 4, 1, 1, "valid", nn::Activation::kSoftmax)};
  return Randomize(m, seed);
}

// A max pooling of k x k every `stride` pixels, padded by `pad` on every side.
inline nn::Layer MaxPool(int k, int stride, int pad) {
  nn::Layer l = MakeLayer(nn::LayerType::kMaxPool2d);
  l.pool_h = l.pool_w = k;
  l.pool_stride = stride;
  l.padding = pad ? "explicit" : "valid";
  l.pad_top = l.pad_left = l.pad_bottom = l.pad_right = pad;
  return l;
}

// `layers` (each reading the one before, unless it names its inputs) on the `input` maps,
// into the 5 outputs (a dense layer with softmax), randomized.
inline nn::Model Chain(const char* name, nn::Shape3 input, std::vector<nn::Layer> layers,
                       uint64_t seed) {
  nn::Model m;
  m.name = name;
  m.input = input;
  m.layers = std::move(layers);
  m.layers.push_back(MakeLayer(nn::LayerType::kDense, 5, 1, 1, "valid", nn::Activation::kSoftmax));
  return Randomize(m, seed);
}

// An average pooling of k x k every `stride` pixels, padded by `pad` on every side (its
// zeros count in the average).
inline nn::Layer AvgPool(int k, int stride, int pad) {
  nn::Layer l = MaxPool(k, stride, pad);
  l.type = nn::LayerType::kAvgPool2d;
  return l;
}

// 9 x 9 x 2: conv 4 same (l0), average pooling 2 x 2 of stride 2 of that odd map (l1, 4 x 4:
// none reads l0's last row and column), conv 4 same (l2), average pooling 3 x 3 of stride 1
// padded 1 (l3, 4 x 4: windows that overlap) and of stride 2 padded 1 (l4, 2 x 2), flattened
// (l5) into the 5 outputs (l6).
inline nn::Model AvgPoolGraph(uint64_t seed) {
  using nn::LayerType;
  return Chain("avgpool", {9, 9, 2},
               {MakeLayer(LayerType::kConv2d, 4, 3, 1, "same"), AvgPool(2, 2, 0),
                MakeLayer(LayerType::kConv2d, 4, 3, 1, "same"), AvgPool(3, 1, 1), AvgPool(3, 2, 1),
                MakeLayer(LayerType::kFlatten)},
               seed);
}

// 10 x 10 x 2: conv 4 same without ReLU (l0), ResNet's max pooling, 3 x 3 of stride 2
// padded 1 (l1, 5 x 5: its padding beside negative values), conv 4 same without ReLU (l2)
// added to l1 (l3, ReLU: ties of zeros), max pooling 2 x 2 of stride 1 (l4, 4 x 4: windows
// that overlap) and of stride 2 (l5, 2 x 2), flattened (l6) into the 5 outputs (l7).
inline nn::Model MaxPoolGraph(uint64_t seed) {
  using nn::LayerType;
  nn::Layer add = MakeLayer(LayerType::kAdd);
  add.inputs = {1, 2};
  add.activation = nn::Activation::kRelu;
  return Chain(
      "maxpool", {10, 10, 2},
      {MakeLayer(LayerType::kConv2d, 4, 3, 1, "same", nn::Activation::kNone), MaxPool(3, 2, 1),
       MakeLayer(LayerType::kConv2d, 4, 3, 1, "same", nn::Activation::kNone), add, MaxPool(2, 1, 0),
       MaxPool(2, 2, 0), MakeLayer(LayerType::kFlatten)},
      seed);
}

// 10 x 10 x 2: conv 4 same (l0); ResNet's downsampling of it, a 1 x 1 convolution of stride
// 2 without ReLU (l1, 5 x 5: no window reads l0's last row and column); a block on l0 (l2,
// l3 without ReLU, added: l4) and a 3 x 3 "same" convolution of stride 2 (l5) added to l1
// (l6, ReLU); a 2 x 2 max pooling of stride 2 (l7, 2 x 2: none reads l6's last row and
// column), flattened (l8) into the 5 outputs (l9). The backward pass reaches l1 last of l0's
// readers, its gradient going into scratch rows that l3's into l2 filled: what no window
// reads must be written +0 there.
inline nn::Model DownsampleGraph(uint64_t seed) {
  using nn::LayerType;
  nn::Layer l1 = MakeLayer(LayerType::kConv2d, 4, 1, 2, "valid", nn::Activation::kNone),
            l2 = MakeLayer(LayerType::kConv2d, 4, 3, 1, "same"), block = MakeLayer(LayerType::kAdd),
            add = MakeLayer(LayerType::kAdd);
  l1.inputs = {0};
  l2.inputs = {0};
  block.inputs = {2, 3};
  block.activation = add.activation = nn::Activation::kRelu;
  add.inputs = {1, 5};
  return Chain("downsample", {10, 10, 2},
               {MakeLayer(LayerType::kConv2d, 4, 3, 1, "same"), l1, l2,
                MakeLayer(LayerType::kConv2d, 4, 3, 1, "same", nn::Activation::kNone), block,
                MakeLayer(LayerType::kConv2d, 4, 3, 2, "same"), add, MaxPool(2, 2, 0),
                MakeLayer(LayerType::kFlatten)},
               seed);
}

// 10 x 10 x 2, MobileNet's activation: conv 4 same (l0, weights 6 times Randomize's, so
// that ReLU6 bounds some), a depthwise conv same (l1, twice), a 1 x 1 conv 4 without activation
// (l2) added to l0 (l3), max pooling 2 x 2 of stride 2 (l4), flattened (l5) into a dense
// layer of 8 (l6) and the 5 outputs (l7); each ReLU6 but l2, the pooling and the outputs.
inline nn::Model Relu6Graph(uint64_t seed) {
  using nn::LayerType;
  const nn::Activation relu6 = nn::Activation::kRelu6;
  nn::Layer dw = MakeLayer(LayerType::kConv2d, 4, 3, 1, "same", relu6),
            add = MakeLayer(LayerType::kAdd), pool = MaxPool(2, 2, 0);
  dw.depthwise = true;
  add.inputs = {0, 2};
  add.activation = relu6;
  nn::Model r =
      Chain("relu6", {10, 10, 2},
            {MakeLayer(LayerType::kConv2d, 4, 3, 1, "same", relu6), dw,
             MakeLayer(LayerType::kConv2d, 4, 1, 1, "valid", nn::Activation::kNone), add, pool,
             MakeLayer(LayerType::kFlatten), MakeLayer(LayerType::kDense, 8, 1, 1, "valid", relu6)},
            seed);
  for (float& v : r.layers[0].weights.data) v *= 6;
  for (float& v : r.layers[1].weights.data) v *= 2;
  return r;
}

// A PyTorch MLP as imported: the h x w x c images flattened (l0) into a dense layer of 12
// (l1) and the 5 outputs (l2).
inline nn::Model MlpGraph(uint64_t seed, int h, int w, int c) {
  return Chain("mlp", {h, w, c},
               {MakeLayer(nn::LayerType::kFlatten), MakeLayer(nn::LayerType::kDense, 12)}, seed);
}

// A map of more than 15 x 15 pixels (or more than 15 rows) into a dense layer: the h x w x 1
// images, conv c same (l0), flattened (l1) into the 5 outputs (l2).
inline nn::Model WideMapGraph(uint64_t seed, int h, int w, int c) {
  return Chain(
      "widemap", {h, w, 1},
      {MakeLayer(nn::LayerType::kConv2d, c, 3, 1, "same"), MakeLayer(nn::LayerType::kFlatten)},
      seed);
}

// A global average pooling of a map of more than 15 x 15 pixels: the h x w x 1 images, conv
// c same (l0), pooled globally (l1), a dense layer of 6 (l2), the 5 outputs (l3).
inline nn::Model WideGapGraph(uint64_t seed, int h, int w, int c) {
  nn::Layer gap = MakeLayer(nn::LayerType::kAvgPool2d);
  gap.global_pool = true;
  return Chain("widegap", {h, w, 1},
               {MakeLayer(nn::LayerType::kConv2d, c, 3, 1, "same"), gap,
                MakeLayer(nn::LayerType::kDense, 6)},
               seed);
}

// 8 x 8 x 1 -> conv 4 (3x3 valid) -> avgpool -> conv 3 (2x2 same) -> flatten -> dense 3.
inline nn::Model AvgPoolModel(uint64_t seed) {
  nn::Model m;
  m.name = "avgpool";
  m.input = {8, 8, 1};
  m.layers = {MakeLayer(nn::LayerType::kConv2d, 4, 3), MakeLayer(nn::LayerType::kAvgPool2d),
              MakeLayer(nn::LayerType::kConv2d, 3, 2, 1, "same"),
              MakeLayer(nn::LayerType::kFlatten),
              MakeLayer(nn::LayerType::kDense, 3, 1, 1, "valid", nn::Activation::kSoftmax)};
  return Randomize(m, seed);
}

// Random images (uniform bytes) with random labels, for a model's input size.
inline data::MnistSet RandomImages(const nn::Model& m, int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  data::MnistSet s;
  s.count = count;
  s.image_size = m.input.Size();
  s.pixels.resize(static_cast<size_t>(count * s.image_size));
  for (auto& p : s.pixels) p = static_cast<uint8_t>(rng() & 0xff);
  const int classes = m.layers.back().out.c;
  for (int64_t i = 0; i < count; ++i) s.labels.push_back(static_cast<uint8_t>(rng() % classes));
  return s;
}

// The largest |a - b| relative to the largest |b| (b: the reference's).
inline double LargestDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, top = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(double{a[i]} - double{b[i]}));
    top = std::max(top, std::fabs(double{b[i]}));
  }
  return top > 0 ? diff / top : diff;
}

// Each weighted layer's gradients in `got` (its w[i] and b[i]) within `goal` of `want`'s,
// relative to each tensor's largest.
template <typename Got, typename Want>
void ExpectGradientsNear(const nn::Model& m, const Got& got, const Want& want, double goal) {
  for (size_t i = 0; i < m.layers.size(); ++i) {
    if (!m.layers[i].HasWeights()) continue;
    ASSERT_EQ(got.w[i].size(), want.w[i].size()) << m.layers[i].name;
    EXPECT_LT(LargestDifference(got.w[i], want.w[i]), goal) << m.layers[i].name << " weights";
    EXPECT_LT(LargestDifference(got.b[i], want.b[i]), goal) << m.layers[i].name << " bias";
  }
}

}  // namespace tpu::test
