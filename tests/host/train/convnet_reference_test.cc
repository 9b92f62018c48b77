// The course material's CNN in the chip's arithmetic (host/train/convnet_reference.h)
// against the same network in plain arithmetic (double, nothing rounded to bfloat16),
// written here from the layers' definitions, through the ReLU pattern of the chip's forward
// pass, as tests/training/grads_vs_torch.py checks the perceptron's step against
// PyTorch: a unit whose input lies within bfloat16's rounding of 0 can be on in one and off
// in the other, and then an image's whole part of its gradient differs (measured: rounding
// only the weights moves the float32 gradients of MakeLenet5(3) by up to 12 % of a tensor's
// largest). Through the same pattern the roundings remain: 2^-9 relative each, a few on
// each path; the first step's gradients agree within the goal, 2e-2 of each
// tensor's largest, and the mean loss within 1e-2.
#include "host/train/convnet_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "arith/bf16.h"
#include "arith/fp32.h"
#include "host/common/errors.h"
#include "host/data/mnist.h"
#include "host/nn/fp32_net.h"
#include "tests/host/nn/nn_test_util.h"
#include "tests/mnist_test_util.h"

namespace tpu::train {
namespace {

using Values = std::vector<double>;

struct Maps {
  int b = 1, h = 1, w = 1, c = 1;
  Values v;
  double& At(int i, int y, int x, int ch) {
    return v[static_cast<size_t>(((int64_t{i} * h + y) * w + x) * c + ch)];
  }
};

// A valid convolution with bias, the ReLU's pattern `on` applied.
Maps Conv(Maps& x, const nn::Layer& l, const std::vector<uint8_t>& on) {
  Maps z{x.b, x.h - l.kernel_h + 1, x.w - l.kernel_w + 1, l.out.c, {}};
  z.v.assign(static_cast<size_t>(z.b) * z.h * z.w * z.c, 0);
  for (int i = 0; i < z.b; ++i)
    for (int y = 0; y < z.h; ++y)
      for (int xx = 0; xx < z.w; ++xx)
        for (int o = 0; o < z.c; ++o) {
          double s = l.bias.data[static_cast<size_t>(o)];
          for (int ky = 0; ky < l.kernel_h; ++ky)
            for (int kx = 0; kx < l.kernel_w; ++kx)
              for (int ci = 0; ci < x.c; ++ci)
                s += x.At(i, y + ky, xx + kx, ci) *
                     l.weights
                         .data[static_cast<size_t>(((ky * l.kernel_w + kx) * x.c + ci) * z.c + o)];
          z.At(i, y, xx, o) = s;
        }
  for (size_t k = 0; k < z.v.size(); ++k) z.v[k] = on[k] ? z.v[k] : 0;
  return z;
}

// 2 x 2 average pooling of stride 2 (an odd side's last row or column left out).
Maps Pool(Maps& x) {
  Maps p{x.b, x.h / 2, x.w / 2, x.c, {}};
  p.v.assign(static_cast<size_t>(p.b) * p.h * p.w * p.c, 0);
  for (int i = 0; i < p.b; ++i)
    for (int y = 0; y < p.h; ++y)
      for (int xx = 0; xx < p.w; ++xx)
        for (int c = 0; c < p.c; ++c)
          p.At(i, y, xx, c) = (x.At(i, 2 * y, 2 * xx, c) + x.At(i, 2 * y, 2 * xx + 1, c) +
                               x.At(i, 2 * y + 1, 2 * xx, c) + x.At(i, 2 * y + 1, 2 * xx + 1, c)) /
                              4;
  return p;
}

// The pooling's gradient.
Maps PoolBack(Maps& dp, int h, int w) {
  Maps dx{dp.b, h, w, dp.c, {}};
  dx.v.assign(static_cast<size_t>(dx.b) * h * w * dx.c, 0);
  for (int i = 0; i < dp.b; ++i)
    for (int y = 0; y < 2 * dp.h; ++y)
      for (int xx = 0; xx < 2 * dp.w; ++xx)
        for (int c = 0; c < dp.c; ++c) dx.At(i, y, xx, c) = dp.At(i, y / 2, xx / 2, c) / 4;
  return dx;
}

// A convolution's gradients from dz (its output's, the pattern applied): its weights' and
// bias's into w and b, its input's returned.
Maps ConvBack(Maps& x, Maps& dz, const nn::Layer& l, std::vector<float>* w, std::vector<float>* b) {
  Values gw(l.weights.data.size(), 0), gb(static_cast<size_t>(dz.c), 0);
  Maps dx{x.b, x.h, x.w, x.c, Values(x.v.size(), 0)};
  for (int i = 0; i < dz.b; ++i)
    for (int y = 0; y < dz.h; ++y)
      for (int xx = 0; xx < dz.w; ++xx)
        for (int o = 0; o < dz.c; ++o) {
          const double d = dz.At(i, y, xx, o);
          gb[static_cast<size_t>(o)] += d;
          for (int ky = 0; ky < l.kernel_h; ++ky)
            for (int kx = 0; kx < l.kernel_w; ++kx)
              for (int ci = 0; ci < x.c; ++ci) {
                const auto k = static_cast<size_t>(((ky * l.kernel_w + kx) * x.c + ci) * dz.c + o);
                gw[k] += d * x.At(i, y + ky, xx + kx, ci);
                dx.At(i, y + ky, xx + kx, ci) += d * l.weights.data[k];
              }
        }
  w->assign(gw.begin(), gw.end());
  b->assign(gb.begin(), gb.end());
  return dx;
}

struct Plain {
  std::vector<std::vector<float>> w, b;
  double loss = 0;
};

// The dense layers from the flattened maps x: forward through the pattern, the softmax
// cross-entropy's mean, and back; the flattened maps' gradient returned.
Values DenseLayers(const nn::Model& m, const ConvNetGradients& chip, Values x,
                   const uint8_t* labels, int batch, Plain* out) {
  std::vector<Values> ins;
  for (size_t l = 5; l < m.layers.size(); ++l) {
    const nn::Layer& L = m.layers[l];
    const int64_t n_in = L.in.Size(), n_out = L.out.c;
    ins.push_back(x);
    Values z(static_cast<size_t>(batch * n_out));
    for (int64_t i = 0; i < batch; ++i)
      for (int64_t o = 0; o < n_out; ++o) {
        double s = L.bias.data[static_cast<size_t>(o)];
        for (int64_t k = 0; k < n_in; ++k)
          s += x[static_cast<size_t>(i * n_in + k)] *
               L.weights.data[static_cast<size_t>(k * n_out + o)];
        const size_t at = static_cast<size_t>(i * n_out + o);
        z[at] = l + 1 == m.layers.size() || chip.relu_on[l][at] ? s : 0;
      }
    x = z;
  }
  const int classes = m.layers.back().out.c;
  Values dz(x.size());
  for (int i = 0; i < batch; ++i) {
    const double* z = &x[static_cast<size_t>(i * classes)];
    const double top = *std::max_element(z, z + classes);
    double sum = 0;
    for (int c = 0; c < classes; ++c) sum += std::exp(z[c] - top);
    out->loss += (std::log(sum) - (z[labels[i]] - top)) / batch;
    for (int c = 0; c < classes; ++c)
      dz[static_cast<size_t>(i * classes + c)] =
          (std::exp(z[c] - top) / sum - (c == labels[i] ? 1 : 0)) / batch;
  }
  for (size_t l = m.layers.size() - 1; l >= 5; --l) {
    const nn::Layer& L = m.layers[l];
    const int64_t n_in = L.in.Size(), n_out = L.out.c;
    const Values& xi = ins[l - 5];
    Values gw(static_cast<size_t>(n_in * n_out), 0), gb(static_cast<size_t>(n_out), 0),
        dx(static_cast<size_t>(batch * n_in), 0);
    for (int64_t i = 0; i < batch; ++i)
      for (int64_t o = 0; o < n_out; ++o) {
        const double d = dz[static_cast<size_t>(i * n_out + o)];
        gb[static_cast<size_t>(o)] += d;
        for (int64_t k = 0; k < n_in; ++k) {
          gw[static_cast<size_t>(k * n_out + o)] += d * xi[static_cast<size_t>(i * n_in + k)];
          dx[static_cast<size_t>(i * n_in + k)] +=
              d * L.weights.data[static_cast<size_t>(k * n_out + o)];
        }
      }
    out->w[l].assign(gw.begin(), gw.end());
    out->b[l].assign(gb.begin(), gb.end());
    if (l > 5)
      for (size_t k = 0; k < dx.size(); ++k) dx[k] = chip.relu_on[l - 1][k] ? dx[k] : 0;
    dz = dx;
  }
  return dz;
}

// The whole step in plain arithmetic, through the chip's ReLU pattern.
Plain PlainGradients(const nn::Model& m, const ConvNetGradients& chip, const uint8_t* pixels,
                     const uint8_t* labels, int batch) {
  Plain out;
  out.w.resize(m.layers.size());
  out.b.resize(m.layers.size());
  Maps x{batch, m.input.h, m.input.w, 1, {}};
  for (int64_t k = 0; k < int64_t{batch} * m.input.h * m.input.w; ++k)
    x.v.push_back(pixels[k] / 255.0);
  Maps h1 = Conv(x, m.layers[0], chip.relu_on[0]);
  Maps p1 = Pool(h1);
  Maps h2 = Conv(p1, m.layers[2], chip.relu_on[2]);
  Maps p2 = Pool(h2);
  Maps dp2 = p2;
  dp2.v = DenseLayers(m, chip, p2.v, labels, batch, &out);
  Maps dz2 = PoolBack(dp2, h2.h, h2.w);
  for (size_t k = 0; k < dz2.v.size(); ++k) dz2.v[k] = chip.relu_on[2][k] ? dz2.v[k] : 0;
  Maps dp1 = ConvBack(p1, dz2, m.layers[2], &out.w[2], &out.b[2]);
  Maps dz1 = PoolBack(dp1, h1.h, h1.w);
  for (size_t k = 0; k < dz1.v.size(); ++k) dz1.v[k] = chip.relu_on[0][k] ? dz1.v[k] : 0;
  ConvBack(x, dz1, m.layers[0], &out.w[0], &out.b[0]);
  return out;
}

void ExpectNearPlain(const nn::Model& m, const data::MnistSet& set, int batch) {
  const ConvNetGradients g =
      ReferenceConvNetGradients(m, set.Image(0), set.labels.data(), batch, 128);
  const Plain want = PlainGradients(m, g, set.Image(0), set.labels.data(), batch);
  double mean = 0;
  for (float l : g.loss) mean += l / batch;
  EXPECT_NEAR(mean, want.loss, 1e-2 * want.loss);
  test::ExpectGradientsNear(m, g, want, 2e-2);
}

TEST(ConvNetReferenceTest, LenetGradientsAreThePlainOnesThroughTheSameReluPattern) {
  TPUSIM_MNIST_DIR_OR_SKIP(dir)
  ExpectNearPlain(nn::MakeLenet5(3), data::LoadMnist(dir, true, 64), 64);
}

TEST(ConvNetReferenceTest, WideCnnGradientsAreThePlainOnesThroughTheSameReluPattern) {
  TPUSIM_MNIST_DIR_OR_SKIP(dir)
  ExpectNearPlain(nn::MakeWideCnn(4), data::LoadMnist(dir, true, 64), 64);
}

// Why the check goes through the pattern: rounding only the weights to bfloat16, with
// everything else in float32, already moves nn's float32 gradients of LeNet at its initial
// weights by more than the goal on these images (each tensor's share printed:
// docs/training.md quotes them), so no bfloat16 forward pass meets a plain float32
// comparison there.
TEST(ConvNetReferenceTest, RoundingTheWeightsAloneMovesTheFloat32GradientsPastTheGoal) {
  TPUSIM_MNIST_DIR_OR_SKIP(dir)
  const data::MnistSet set = data::LoadMnist(dir, true, 64);
  auto gradients = [&](const nn::Model& m) {
    nn::ForwardCache cache;
    nn::Forward(m, nn::Fp32Input(set.Image(0), 64, m.input), &cache);
    nn::ParamSet g = nn::ParamSet::ZerosLike(m);
    nn::Backward(m, cache, set.labels.data(), &g);
    return g;
  };
  const nn::Model m = nn::MakeLenet5(3);
  nn::Model rounded = m;
  for (nn::Layer& l : rounded.layers)
    for (float& v : l.weights.data)
      v = arith::FloatOfBits(arith::Fp32OfBf16(arith::Bf16OfFp32(arith::BitsOfFloat(v))));
  const nn::ParamSet a = gradients(m), b = gradients(rounded);
  double most = 0;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    if (!m.layers[i].HasWeights()) continue;
    const double d = test::LargestDifference(b.w[i], a.w[i]);
    std::cout << m.layers[i].name << " weights: " << d << "\n";
    most = std::max(most, d);
  }
  EXPECT_GT(most, 2e-2);
}

TEST(ConvNetReferenceTest, OtherShapesAreRefused) {
  EXPECT_THROW(ReferenceConvNetGradients(nn::MakeMlp(1), nullptr, nullptr, 1, 128), UsageError);
}

}  // namespace
}  // namespace tpu::train
