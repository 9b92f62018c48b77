// The bfloat16 network reference (see bf16_net.h, docs/bf16.md).
#include "host/nn/bf16_net.h"

#include <algorithm>
#include <optional>

#include "arith/bf16.h"
#include "host/common/errors.h"

namespace tpu::nn {
namespace {

// The vector unit's ReLU and ReLU6: ReLU6 is ReLU with the upper bound 6.
uint16_t Activate(Activation a, uint32_t x) {
  const bool relu = a == Activation::kRelu || a == Activation::kRelu6;
  return arith::Bf16Activate(x, relu,
                             a == Activation::kRelu6 ? arith::BitsOfFloat(6.0f) : arith::kFp32Inf);
}

// A 2 x 2, stride 2 pooling of bf16 values (Bf16Pool: the maximum, or the float32 sum in
// window order times 1/4).
std::vector<uint16_t> Pool(const Layer& l, const std::vector<uint16_t>& x) {
  std::vector<uint16_t> y(static_cast<size_t>(l.out.Size()));
  const bool avg = l.type == LayerType::kAvgPool2d;
  for (int oh = 0; oh < l.out.h; ++oh)
    for (int ow = 0; ow < l.out.w; ++ow)
      for (int c = 0; c < l.out.c; ++c) {
        uint16_t v[4];
        for (int q = 0; q < 4; ++q) {
          const int64_t ih = 2 * oh + q / 2, iw = 2 * ow + q % 2;
          v[q] = x[static_cast<size_t>((ih * l.in.w + iw) * l.in.c + c)];
        }
        y[static_cast<size_t>((int64_t{oh} * l.out.w + ow) * l.out.c + c)] =
            arith::Bf16Pool(v, avg);
      }
  return y;
}

// A bfloat16 value as the array passes it through a tile of ones and zeros (+0 plus the
// product, plus +0 for every other row): a zero or subnormal becomes +0, any other value
// stays.
uint16_t ThroughArray(uint16_t x) {
  return arith::Bf16OfFp32(arith::Fp32Add(0, arith::Fp32OfBf16(x)));
}

// Max pooling as the chip runs it where it is not fused (docs/bf16.md, "Networks"): each
// tap through the identity tile, the accumulators keeping the larger (Fp32Max); padding
// never wins.
std::vector<uint16_t> MaxPool(const Layer& l, const std::vector<uint16_t>& x) {
  std::vector<uint16_t> y(static_cast<size_t>(l.out.Size()));
  for (int oh = 0; oh < l.out.h; ++oh)
    for (int ow = 0; ow < l.out.w; ++ow)
      for (int c = 0; c < l.out.c; ++c) {
        std::optional<uint32_t> m;
        for (int kh = 0; kh < l.pool_h; ++kh)
          for (int kw = 0; kw < l.pool_w; ++kw) {
            const int ih = oh * l.pool_stride + kh - l.pad_top,
                      iw = ow * l.pool_stride + kw - l.pad_left;
            if (ih < 0 || ih >= l.in.h || iw < 0 || iw >= l.in.w) continue;
            const uint32_t v = arith::Fp32OfBf16(
                ThroughArray(x[static_cast<size_t>((int64_t{ih} * l.in.w + iw) * l.in.c + c)]));
            m = m ? arith::Fp32Max(*m, v) : v;
          }
        y[static_cast<size_t>((int64_t{oh} * l.out.w + ow) * l.out.c + c)] =
            arith::Bf16OfFp32(m.value_or(0));
      }
  return y;
}

// Any other average pooling as the chip runs it: a depthwise convolution whose weights are
// bfloat16(1 / (kh x kw)) (and zeros off the diagonal), no bias, no activation.
Layer AverageAsConvolution(const Layer& p) {
  Layer l = p;
  l.type = LayerType::kConv2d;
  l.depthwise = true;
  l.kernel_h = p.pool_h;
  l.kernel_w = p.pool_w;
  l.stride = p.pool_stride;
  l.activation = Activation::kNone;
  const int64_t c = p.in.c, taps = int64_t{p.pool_h} * p.pool_w;
  l.weights.shape = {p.pool_h, p.pool_w, c, c};
  l.weights.data.assign(static_cast<size_t>(taps * c * c), 0.0f);
  for (int64_t t = 0; t < taps; ++t)
    for (int64_t ch = 0; ch < c; ++ch)
      l.weights.data[static_cast<size_t>((t * c + ch) * c + ch)] = 1.0f / static_cast<float>(taps);
  l.bias.shape = {c};
  l.bias.data.assign(static_cast<size_t>(c), 0.0f);
  return l;
}

}  // namespace

Bf16Net::Bf16Net(const Model& model, int array_dim) : model_(model), n_(array_dim) {
  const std::vector<std::vector<int>> consumers = model.Consumers();
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const Layer& l = model.layers[i];
    const bool fused = FusedPool(model, consumers, i);
    if (l.type == LayerType::kAdd && l.activation == Activation::kRelu6) {
      throw UsageError("add '" + l.name +
                       "' ends in ReLU6, which the bf16 chip's residual add does not apply "
                       "(it applies ReLU or nothing; docs/bf16.md)");
    }
    fused_.push_back(fused);
    std::optional<Layer> conv;
    if (l.type == LayerType::kAvgPool2d && !fused) conv = AverageAsConvolution(l);
    const Layer& w = conv ? *conv : l;
    std::vector<uint16_t> wb;
    std::vector<uint32_t> b;
    if (w.HasWeights()) {
      for (float v : w.weights.data) wb.push_back(arith::Bf16OfFp32(arith::BitsOfFloat(v)));
      for (float v : w.bias.data) b.push_back(arith::Fp32Canonical(arith::BitsOfFloat(v)));
    }
    weights_.push_back(std::move(wb));
    bias_.push_back(std::move(b));
    conv_.push_back(std::move(conv));
  }
}

// The layer's input in im2col order (one row per output pixel, K = kh x kw x c_in in
// (kernel row, kernel column, channel) order, zeros where the window leaves the map), times
// its weights on the array, then bias and activation on the vector unit.
std::vector<uint16_t> Bf16Net::ConvOrDense(size_t i, const std::vector<uint16_t>& x) const {
  const Layer& l = conv_[i] ? *conv_[i] : model_.layers[i];
  const bool dense = l.type == LayerType::kDense;
  const int64_t pixels = dense ? 1 : int64_t{l.out.h} * l.out.w;
  const int64_t k = dense ? l.in.Size() : int64_t{l.kernel_h} * l.kernel_w * l.in.c;
  const int64_t oc = l.out.c;
  std::vector<uint16_t> cols;
  if (dense) {
    cols = x;
  } else {
    cols.assign(static_cast<size_t>(pixels * k), 0);
    for (int oh = 0; oh < l.out.h; ++oh)
      for (int ow = 0; ow < l.out.w; ++ow)
        for (int kh = 0; kh < l.kernel_h; ++kh)
          for (int kw = 0; kw < l.kernel_w; ++kw) {
            const int ih = oh * l.stride + kh - l.pad_top, iw = ow * l.stride + kw - l.pad_left;
            if (ih < 0 || ih >= l.in.h || iw < 0 || iw >= l.in.w) continue;
            std::copy_n(&x[static_cast<size_t>((int64_t{ih} * l.in.w + iw) * l.in.c)], l.in.c,
                        &cols[static_cast<size_t>((int64_t{oh} * l.out.w + ow) * k +
                                                  (int64_t{kh} * l.kernel_w + kw) * l.in.c)]);
          }
  }
  std::vector<uint32_t> acc(static_cast<size_t>(pixels * oc));
  arith::Bf16GemmSkippingZeroTiles(pixels, oc, k, n_, cols.data(), weights_[i].data(), acc.data());
  std::vector<uint16_t> y(acc.size());
  for (size_t j = 0; j < acc.size(); ++j) {
    const uint32_t v = arith::Fp32Add(acc[j], bias_[i][j % static_cast<size_t>(oc)]);
    y[j] = Activate(l.activation, v);
  }
  return y;
}

// An add (the vector unit's residual add, arith::Bf16ResidualAdd) or a concatenation of
// channels (each value through a tile of ones and zeros, then the vector unit's +0 bias).
std::vector<uint16_t> Bf16Net::Join(size_t i,
                                    const std::vector<const std::vector<uint16_t>*>& in) const {
  const Layer& l = model_.layers[i];
  std::vector<uint16_t> y(static_cast<size_t>(l.out.Size()));
  if (l.type == LayerType::kAdd) {
    const bool relu = l.activation == Activation::kRelu;
    for (size_t j = 0; j < y.size(); ++j)
      y[j] = arith::Bf16ResidualAdd((*in[0])[j], (*in[1])[j], relu);
    return y;
  }
  const int64_t pixels = int64_t{l.out.h} * l.out.w;
  int64_t c0 = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    const int64_t c = static_cast<int64_t>(in[k]->size()) / pixels;  // its channels
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t ch = 0; ch < c; ++ch)
        y[static_cast<size_t>(p * l.out.c + c0 + ch)] =
            ThroughArray((*in[k])[static_cast<size_t>(p * c + ch)]);
    c0 += c;
  }
  return y;
}

std::vector<std::vector<uint16_t>> Bf16Net::Forward(const float* input) const {
  std::vector<uint16_t> x(static_cast<size_t>(model_.input.Size()));
  for (size_t j = 0; j < x.size(); ++j) x[j] = arith::Bf16OfFp32(arith::BitsOfFloat(input[j]));
  std::vector<std::vector<uint16_t>> outs;
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    const Layer& l = model_.layers[i];
    std::vector<const std::vector<uint16_t>*> ins;
    if (l.inputs.empty()) ins.push_back(i == 0 ? &x : &outs[i - 1]);
    for (int from : l.inputs)
      ins.push_back(from == kModelInput ? &x : &outs[static_cast<size_t>(from)]);
    const std::vector<uint16_t>& in = *ins[0];
    if (l.HasWeights() || conv_[i]) {
      outs.push_back(ConvOrDense(i, in));
    } else if (l.type == LayerType::kAdd || l.type == LayerType::kConcat) {
      outs.push_back(Join(i, ins));
    } else if (l.type == LayerType::kMaxPool2d && !fused_[i]) {
      outs.push_back(MaxPool(l, in));
    } else if (l.IsPool()) {
      outs.push_back(Pool(l, in));
    } else {
      outs.push_back(in);  // flatten: the same values in the same order
    }
  }
  return outs;
}

NonFinite FirstNonFinite(const std::vector<std::vector<uint16_t>>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i)
    for (size_t j = 0; j < outputs[i].size(); ++j)
      if ((outputs[i][j] & 0x7f80u) == 0x7f80u)
        return {static_cast<int>(i), static_cast<int64_t>(j)};
  return {};
}

int ArgMaxBf16(const std::vector<uint16_t>& values) {
  int best = -1;
  float best_v = 0;
  for (size_t j = 0; j < values.size(); ++j) {
    const float v = arith::FloatOfBits(arith::Fp32OfBf16(values[j]));
    if (v != v) continue;  // NaN
    if (best < 0 || v > best_v) {
      best = static_cast<int>(j);
      best_v = v;
    }
  }
  return best < 0 ? 0 : best;
}

}  // namespace tpu::nn
