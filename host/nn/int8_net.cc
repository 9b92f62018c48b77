// Batched int8 inference on Eigen (see int8_net.h).
#include "host/nn/int8_net.h"

#include <stdexcept>

#include "host/nn/int8_gemm.h"
#include "host/nn/int8_ops.h"
#include "host/nn/int8_reference.h"

namespace tpu::nn {
namespace {

using MatrixI32 = RowMatrix<int32_t>;

// acc (rows x c_out, bias not yet added) -> int8 with the layer's requantization, into
// `out` (rows x c_out).
void Requant(const Layer& l, const MatrixI32& acc, int8_t* out) {
  const int32_t lo = ClampsAtZero(l.activation) ? 0 : -128;
  const int32_t* bias = l.q.bias.data.data();
  const int32_t* mult = l.q.multiplier.data();
  const int32_t* shift = l.q.shift.data();
  const int64_t cols = l.out.c;
  for (int64_t r = 0; r < acc.rows(); ++r) {
    const int32_t* a = acc.data() + r * cols;
    int8_t* o = out + r * cols;
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
        Requant(l, Product(l, Im2Col<float>(l, MatrixF(x.cast<float>())), weights_[i]), y.data());
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
