// The bfloat16 rules several operations share (op.h): the product on the array with the
// vector unit's epilogue, and a value's rounding through a tile of ones and zeros.
#include <algorithm>

#include "arith/bf16.h"
#include "host/nn/ops/op.h"

namespace tpu::nn::ops {
namespace {

// The vector unit's ReLU and ReLU6: ReLU6 is ReLU with the upper bound 6.
uint16_t Activate(Activation a, uint32_t x) {
  const bool relu = a == Activation::kRelu || a == Activation::kRelu6;
  return arith::Bf16Activate(x, relu,
                             a == Activation::kRelu6 ? arith::BitsOfFloat(6.0f) : arith::kFp32Inf);
}

// A convolution's input in im2col order: one row per output pixel, K = kh x kw x c_in in
// (kernel row, kernel column, channel) order, zeros where the window leaves the map.
Bf16Values Im2col(const Layer& l, const Bf16Values& x) {
  const int64_t k = int64_t{l.kernel_h} * l.kernel_w * l.in.c;
  Bf16Values cols(static_cast<size_t>(int64_t{l.out.h} * l.out.w * k), 0);
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
  return cols;
}

}  // namespace

void Bf16RoundWeights(Bf16Layer* p) {
  const Layer& w = p->Multiplied();
  for (float v : w.weights.data) p->weights.push_back(arith::Bf16OfFp32(arith::BitsOfFloat(v)));
  for (float v : w.bias.data) p->bias.push_back(arith::Fp32Canonical(arith::BitsOfFloat(v)));
}

// The input (in im2col order for a convolution) times the weights on the array, then bias
// and activation on the vector unit.
Bf16Values Bf16Multiplied(const Bf16Layer& p, const std::vector<const Bf16Values*>& xs) {
  const Layer& l = p.Multiplied();
  const bool dense = l.type == LayerType::kDense;
  const int64_t pixels = dense ? 1 : int64_t{l.out.h} * l.out.w;
  const int64_t k = dense ? l.in.Size() : int64_t{l.kernel_h} * l.kernel_w * l.in.c;
  const int64_t oc = l.out.c;
  const Bf16Values cols = dense ? *xs[0] : Im2col(l, *xs[0]);
  std::vector<uint32_t> acc(static_cast<size_t>(pixels * oc));
  arith::Bf16GemmSkippingZeroTiles(pixels, oc, k, p.array_dim, cols.data(), p.weights.data(),
                                   acc.data());
  Bf16Values y(acc.size());
  for (size_t j = 0; j < acc.size(); ++j) {
    const uint32_t v = arith::Fp32Add(acc[j], p.bias[j % static_cast<size_t>(oc)]);
    y[j] = Activate(l.activation, v);
  }
  return y;
}

// +0 plus the product, plus +0 for every other row: a zero or subnormal becomes +0, any
// other value stays.
uint16_t Bf16ThroughArray(uint16_t x) {
  return arith::Bf16OfFp32(arith::Fp32Add(0, arith::Fp32OfBf16(x)));
}

}  // namespace tpu::nn::ops
