// Batched int8 inference on Eigen (see int8_net.h).
#include "host/nn/int8_net.h"

#include <stdexcept>

#include "host/nn/int8_ops.h"
#include "host/nn/int8_reference.h"

namespace tpu::nn {
namespace {

using MatrixI32 = RowMatrix<int32_t>;

// acc (rows x c_out, bias not yet added) -> int8 with the layer's requantization.
MatrixI8 Requant(const Layer& l, const MatrixI32& acc) {
  const int32_t lo = l.activation == Activation::kRelu ? 0 : -128;
  MatrixI8 y(acc.rows(), acc.cols());
  for (int64_t r = 0; r < acc.rows(); ++r)
    for (int c = 0; c < l.out.c; ++c)
      y(r, c) =
          Requantize(acc(r, c) + l.q.bias.data[static_cast<size_t>(c)],
                     l.q.multiplier[static_cast<size_t>(c)], l.q.shift[static_cast<size_t>(c)], lo);
  return y;
}

}  // namespace

Int8Net::Int8Net(const Model& m) : model_(m) {
  if (!m.quantized) throw std::invalid_argument("Int8Net: the model is not quantized");
  for (const Layer& l : m.layers) {
    weights_.emplace_back();
    if (!l.HasWeights()) continue;
    weights_.back() =
        Eigen::Map<const MatrixI8>(l.q.weights.data.data(), l.q.weights.Size() / l.out.c, l.out.c)
            .cast<int32_t>();
  }
}

std::vector<MatrixI8> Int8Net::Forward(const uint8_t* pixels, int64_t count) const {
  const Model& m = model_;
  MatrixI8 x(count, m.input.Size());
  for (int64_t i = 0; i < count * m.input.Size(); ++i) x.data()[i] = QuantizePixel(pixels[i]);
  std::vector<MatrixI8> outs;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const Layer& l = m.layers[i];
    MatrixI8 y;
    switch (l.type) {
      case LayerType::kConv2d: {
        const MatrixI32 acc = Im2Col<int8_t>(l, x).cast<int32_t>() * weights_[i];
        const MatrixI8 rows = Requant(l, acc);  // (images * oh * ow) x c_out
        y = Eigen::Map<const MatrixI8>(rows.data(), count, l.out.Size());
        break;
      }
      case LayerType::kDense:
        y = Requant(l, x.cast<int32_t>() * weights_[i]);
        break;
      case LayerType::kAvgPool2d:
      case LayerType::kMaxPool2d:
        y.resize(count, l.out.Size());
        for (int64_t b = 0; b < count; ++b) PoolInt8(l, x.row(b).data(), y.row(b).data());
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
