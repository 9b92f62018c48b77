// The scalar int8 reference (see int8_reference.h).
#include "host/nn/int8_reference.h"

#include <algorithm>
#include <stdexcept>

#include "host/nn/int8_ops.h"

namespace tpu::nn {

void PoolInt8(const Layer& l, const int8_t* x, int8_t* y) {
  const bool avg = l.type == LayerType::kAvgPool2d;
  if (l.pool_h == 2 && l.pool_w == 2 && l.pool_stride == 2) {  // LeNet's: the common case
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
  uint32_t multiplier = 0, shift = 0;  // once per layer: AverageMultiplier divides
  AverageMultiplier(l.pool_h * l.pool_w, &multiplier, &shift);
  for (int oh = 0; oh < l.out.h; ++oh)
    for (int ow = 0; ow < l.out.w; ++ow)
      for (int c = 0; c < l.out.c; ++c) {
        int32_t sum = 0, mx = -128;
        for (int i = 0; i < l.pool_h; ++i)
          for (int j = 0; j < l.pool_w; ++j) {
            const int8_t v =
                x[((size_t(oh) * l.pool_stride + i) * l.in.w + size_t(ow) * l.pool_stride + j) *
                      l.in.c +
                  c];
            sum += v;
            mx = std::max<int32_t>(mx, v);
          }
        y[(size_t(oh) * l.out.w + ow) * l.out.c + c] =
            l.type == LayerType::kAvgPool2d ? Requantize(sum, multiplier, shift, -128)
                                            : static_cast<int8_t>(mx);
      }
}

std::vector<std::vector<int8_t>> ReferenceInt8(const Model& m, const uint8_t* pixels) {
  if (!m.quantized) throw std::invalid_argument("ReferenceInt8: the model is not quantized");
  std::vector<int8_t> x(static_cast<size_t>(m.input.Size()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = QuantizePixel(pixels[i]);
  std::vector<std::vector<int8_t>> outs;
  for (const Layer& l : m.layers) {
    std::vector<int8_t> y(static_cast<size_t>(l.out.Size()));
    const int32_t lo = ClampsAtZero(l.activation) ? 0 : -128;
    auto at = [&](int h, int w, int c) { return x[(size_t(h) * l.in.w + w) * l.in.c + c]; };
    switch (l.type) {
      case LayerType::kConv2d:
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
                        l.q.weights
                            .data[((size_t(kh) * l.kernel_w + kw) * l.in.c + ic) * l.out.c + oc];
                    acc += int32_t{at(ih, iw, ic)} * w;
                  }
              y[(size_t(oh) * l.out.w + ow) * l.out.c + oc] =
                  Requantize(acc, l.q.multiplier[oc], l.q.shift[oc], lo);
            }
        break;
      case LayerType::kDense:
        for (int oc = 0; oc < l.out.c; ++oc) {
          int32_t acc = l.q.bias.data[oc];
          for (int ic = 0; ic < l.in.c; ++ic)
            acc += int32_t{x[ic]} * l.q.weights.data[size_t(ic) * l.out.c + oc];
          y[oc] = Requantize(acc, l.q.multiplier[oc], l.q.shift[oc], lo);
        }
        break;
      case LayerType::kAvgPool2d:
      case LayerType::kMaxPool2d:
        PoolInt8(l, x.data(), y.data());
        break;
      case LayerType::kFlatten:
        y = x;
        break;
    }
    outs.push_back(y);
    x = std::move(y);
  }
  return outs;
}

}  // namespace tpu::nn
