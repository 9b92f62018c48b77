// The scalar int8 reference (see int8_reference.h).
#include "host/nn/int8_reference.h"

#include <algorithm>
#include <stdexcept>

#include "arith/int8.h"

namespace tpu::nn {

void PoolInt8(const Layer& l, const int8_t* x, int8_t* y) {
  const bool avg = l.type == LayerType::kAvgPool2d;
  if (l.pool_h == 2 && l.pool_w == 2 && l.pool_stride == 2 && !l.Padded()) {  // LeNet's
    const int64_t row = int64_t{l.in.w} * l.in.c, c_n = l.in.c;
    for (int oh = 0; oh < l.out.h; ++oh)
      for (int ow = 0; ow < l.out.w; ++ow) {
        const int8_t* p = x + 2 * oh * row + 2 * ow * c_n;
        int8_t* o = y + (int64_t{oh} * l.out.w + ow) * c_n;
        for (int64_t c = 0; c < c_n; ++c) {
          const int8_t a = p[c], b = p[c + c_n], d = p[row + c], e = p[row + c_n + c];
          // floor((sum + 2) / 4), the 2 x 2 average (AveragePool with n = 4), exactly
          o[c] = avg ? static_cast<int8_t>((int32_t{a} + b + d + e + 2) >> 2)
                     : std::max(std::max(a, b), std::max(d, e));
        }
      }
    return;
  }
  uint32_t multiplier = 0, shift = 0;  // once per layer: arith::AverageMultiplier divides
  arith::AverageMultiplier(l.pool_h * l.pool_w, &multiplier, &shift);
  for (int oh = 0; oh < l.out.h; ++oh)
    for (int ow = 0; ow < l.out.w; ++ow)
      for (int c = 0; c < l.out.c; ++c) {
        // The padding: zeros in the average (which counts them), ignored by the maximum.
        int32_t sum = 0, mx = -128;
        for (int i = 0; i < l.pool_h; ++i)
          for (int j = 0; j < l.pool_w; ++j) {
            const int64_t ih = int64_t{oh} * l.pool_stride + i - l.pad_top;
            const int64_t iw = int64_t{ow} * l.pool_stride + j - l.pad_left;
            if (ih < 0 || ih >= l.in.h || iw < 0 || iw >= l.in.w) continue;
            const int8_t v = x[(ih * l.in.w + iw) * l.in.c + c];
            sum += v;
            mx = std::max<int32_t>(mx, v);
          }
        y[(size_t(oh) * l.out.w + ow) * l.out.c + c] =
            avg ? arith::Requantize(sum, multiplier, shift, -128) : static_cast<int8_t>(mx);
      }
}

void AddInt8(const Layer& l, const int8_t* a, const int8_t* b, int8_t* y) {
  const int32_t lo = ClampsAtZero(l.activation) ? 0 : -128;
  const auto ma = static_cast<uint32_t>(l.q.multiplier[0]),
             mb = static_cast<uint32_t>(l.q.multiplier[1]);
  const auto shift = static_cast<uint32_t>(l.q.shift[0]);
  for (int64_t i = 0; i < l.out.Size(); ++i)
    y[i] = arith::AddRequantize(a[i], b[i], ma, mb, shift, lo);
}

void ConcatInt8(const Layer& l, const std::vector<const int8_t*>& xs,
                const std::vector<int>& channels, int8_t* y) {
  const int64_t pixels = int64_t{l.out.h} * l.out.w;
  for (int64_t p = 0; p < pixels; ++p) {
    int64_t c0 = 0;
    for (size_t k = 0; k < xs.size(); ++k) {
      const auto m = static_cast<uint32_t>(l.q.multiplier[k]);
      const auto s = static_cast<uint32_t>(l.q.shift[k]);
      for (int64_t c = 0; c < channels[k]; ++c)
        y[p * l.out.c + c0 + c] = arith::Requantize(xs[k][p * channels[k] + c], m, s, -128);
      c0 += channels[k];
    }
  }
}

namespace {

// One conv2d or dense layer, one multiply-add at a time.
void ConvOrDenseInt8(const Layer& l, const int8_t* x, int8_t* y) {
  const int32_t lo = ClampsAtZero(l.activation) ? 0 : -128;
  auto at = [&](int h, int w, int c) { return x[(size_t(h) * l.in.w + w) * l.in.c + c]; };
  if (l.type == LayerType::kDense) {
    for (int oc = 0; oc < l.out.c; ++oc) {
      int32_t acc = l.q.bias.data[oc];
      for (int ic = 0; ic < l.in.c; ++ic)
        acc += int32_t{x[ic]} * l.q.weights.data[size_t(ic) * l.out.c + oc];
      y[oc] = arith::Requantize(acc, l.q.multiplier[oc], l.q.shift[oc], lo);
    }
    return;
  }
  for (int oh = 0; oh < l.out.h; ++oh)
    for (int ow = 0; ow < l.out.w; ++ow)
      for (int oc = 0; oc < l.out.c; ++oc) {
        int32_t acc = l.q.bias.data[oc];
        for (int kh = 0; kh < l.kernel_h; ++kh)
          for (int kw = 0; kw < l.kernel_w; ++kw)
            for (int ic = 0; ic < l.in.c; ++ic) {
              const int ih = oh * l.stride + kh - l.pad_top;
              const int iw = ow * l.stride + kw - l.pad_left;
              if (ih < 0 || ih >= l.in.h || iw < 0 || iw >= l.in.w) continue;  // zero pad
              const int8_t w =
                  l.q.weights.data[((size_t(kh) * l.kernel_w + kw) * l.in.c + ic) * l.out.c + oc];
              acc += int32_t{at(ih, iw, ic)} * w;
            }
        y[(size_t(oh) * l.out.w + ow) * l.out.c + oc] =
            arith::Requantize(acc, l.q.multiplier[oc], l.q.shift[oc], lo);
      }
}

}  // namespace

std::vector<std::vector<int8_t>> ReferenceInt8(const Model& m, const int8_t* input) {
  if (!m.quantized) throw std::invalid_argument("ReferenceInt8: the model is not quantized");
  const std::vector<int8_t> x0(input, input + m.input.Size());
  std::vector<std::vector<int8_t>> outs;
  // What input `in` (a layer, or the model's input) produced.
  auto out_of = [&](int in) -> const std::vector<int8_t>& {
    return in == kModelInput ? x0 : outs[static_cast<size_t>(in)];
  };
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const Layer& l = m.layers[i];
    const std::vector<int8_t>& x = out_of(l.inputs[0]);
    std::vector<int8_t> y(static_cast<size_t>(l.out.Size()));
    switch (l.type) {
      case LayerType::kConv2d:
      case LayerType::kDense:
        ConvOrDenseInt8(l, x.data(), y.data());
        break;
      case LayerType::kAvgPool2d:
      case LayerType::kMaxPool2d:
        PoolInt8(l, x.data(), y.data());
        break;
      case LayerType::kFlatten:
        y = x;
        break;
      case LayerType::kAdd:
        AddInt8(l, x.data(), out_of(l.inputs[1]).data(), y.data());
        break;
      case LayerType::kConcat: {
        std::vector<const int8_t*> xs;
        std::vector<int> channels;
        for (int k : l.inputs) {
          xs.push_back(out_of(k).data());
          channels.push_back(m.OutputOf(k).c);
        }
        ConcatInt8(l, xs, channels, y.data());
        break;
      }
    }
    outs.push_back(std::move(y));
  }
  return outs;
}

std::vector<std::vector<int8_t>> ReferenceInt8(const Model& m, const uint8_t* pixels) {
  std::vector<int8_t> x(static_cast<size_t>(m.input.Size()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = arith::QuantizePixel(pixels[i]);
  return ReferenceInt8(m, x.data());
}

}  // namespace tpu::nn
