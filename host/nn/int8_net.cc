// Batched int8 inference on Eigen (see int8_net.h).
#include "host/nn/int8_net.h"

#include <algorithm>
#include <stdexcept>

#include "host/nn/int8_gemm.h"
#include "host/nn/int8_ops.h"
#include "host/nn/int8_reference.h"

namespace tpu::nn {
namespace {

using MatrixI32 = RowMatrix<int32_t>;

// The requantization of one row with ReLU, for shifts in [1, 62] and non-negative
// multipliers (every model's, checked on load): a sum <= 0 gives 0 whatever the multiplier,
// so the sum is clamped at 0 first and everything after is unsigned, which vectorizes
// (32 x 32 -> 64-bit products, per-lane shifts with AVX2); equal to Requantize, lo = 0.
__attribute__((target_clones("avx2", "default"))) void RequantReluRow(const int32_t* acc,
                                                                      const int32_t* bias,
                                                                      const int32_t* mult,
                                                                      const int32_t* shift,
                                                                      int64_t cols, int8_t* out) {
  for (int64_t c = 0; c < cols; ++c) {
    const int32_t v = std::max(acc[c] + bias[c], 0);
    const uint64_t product = uint64_t{static_cast<uint32_t>(v)} * static_cast<uint32_t>(mult[c]);
    const uint64_t s = static_cast<uint32_t>(shift[c]);
    const uint64_t q = (product + (uint64_t{1} << (s - 1))) >> s;
    out[c] = static_cast<int8_t>(q < 127 ? q : 127);
  }
}

// acc (rows x c_out, bias not yet added) -> int8 with the layer's requantization, into
// `out` (rows x c_out).
void Requant(const Layer& l, const MatrixI32& acc, int8_t* out) {
  const int32_t lo = ClampsAtZero(l.activation) ? 0 : -128;
  const int32_t* bias = l.q.bias.data.data();
  const int32_t* mult = l.q.multiplier.data();
  const int32_t* shift = l.q.shift.data();
  const int64_t cols = l.out.c;
  bool plain = lo == 0;
  for (int64_t c = 0; c < cols; ++c) plain &= shift[c] >= 1 && shift[c] <= 62 && mult[c] >= 0;
  for (int64_t r = 0; r < acc.rows(); ++r) {
    const int32_t* a = acc.data() + r * cols;
    int8_t* o = out + r * cols;
    if (plain) {
      RequantReluRow(a, bias, mult, shift, cols, o);
      continue;
    }
    for (int64_t c = 0; c < cols; ++c) {
      o[c] = Requantize(a[c] + bias[c], static_cast<uint32_t>(mult[c]),
                        static_cast<uint32_t>(shift[c]), lo);
    }
  }
}

}  // namespace

Int8Net::Int8Net(const Model& m) : model_(m) {
  if (!m.quantized) throw std::invalid_argument("Int8Net: the model is not quantized");
  for (const Layer& l : m.layers) {
    weights_.emplace_back();
    if (!l.HasWeights()) continue;
    weights_.back().assign(l.q.weights.data.begin(), l.q.weights.data.end());
  }
}

namespace {

using MatrixF = RowMatrix<float>;

// x (rows x K, int8 values held in float) times the layer's K x c_out weights, exactly, in
// int32.
MatrixI32 Product(const Layer& l, const MatrixF& x, const std::vector<float>& w) {
  MatrixI32 acc(x.rows(), l.out.c);
  GemmInt8FF(x.rows(), l.out.c, x.cols(), x.data(), x.cols(), w.data(), l.out.c, acc.data(),
             l.out.c, /*accumulate=*/false);
  return acc;
}

}  // namespace

std::vector<MatrixI8> Int8Net::Forward(const uint8_t* pixels, int64_t count) const {
  const Model& m = model_;
  MatrixI8 input(count, m.input.Size());
  for (int64_t i = 0; i < count * m.input.Size(); ++i) input.data()[i] = QuantizePixel(pixels[i]);
  std::vector<MatrixI8> outs;
  outs.reserve(m.layers.size());
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const Layer& l = m.layers[i];
    const MatrixI8& x = i == 0 ? input : outs.back();
    MatrixI8 y(count, l.out.Size());
    switch (l.type) {
      case LayerType::kConv2d:
        // The windows are formed in float, as the fp32 network forms them, so that the
        // exact GEMM takes them as they are; rows (image, oh, ow) x c_out are y's layout.
        Requant(l, Product(l, Im2Col<float>(l, x), weights_[i]), y.data());
        break;
      case LayerType::kDense:
        Requant(l, Product(l, x.cast<float>(), weights_[i]), y.data());
        break;
      case LayerType::kAvgPool2d:
      case LayerType::kMaxPool2d:
        for (int64_t b = 0; b < count; ++b) PoolInt8(l, x.row(b).data(), y.row(b).data());
        break;
      case LayerType::kFlatten:
        y = x;
        break;
    }
    outs.push_back(std::move(y));
  }
  return outs;
}

std::vector<int> ArgMaxInt8(const MatrixI8& logits) {
  std::vector<int> out(static_cast<size_t>(logits.rows()));
  for (int64_t b = 0; b < logits.rows(); ++b) {
    int best = 0;
    for (int c = 1; c < logits.cols(); ++c)
      if (logits(b, c) > logits(b, best)) best = c;
    out[static_cast<size_t>(b)] = best;
  }
  return out;
}

}  // namespace tpu::nn
