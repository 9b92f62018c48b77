// Batched int8 inference on Eigen (see int8_net.h).
#include "host/nn/int8_net.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "arith/int8.h"
#include "arith/int8_gemm.h"
#include "host/nn/ops/op.h"

namespace tpu::nn {
namespace {

using MatrixI32 = RowMatrix<int32_t>;

// The requantization with ReLU of n values whose per-value multiplier, rounding term and
// shift are given (the channels' parameters repeated along a run of rows), for shifts in
// [32, 62] and multipliers in [0, 2^31) (every calibrated model's): a sum <= 0 gives 0
// whatever the multiplier, so the sum is clamped at 0 first and everything after is
// unsigned; and floor(x / 2^s) = floor(floor(x / 2^32) / 2^(s - 32)), so the 64-bit
// product is only shifted by 32 and the rest is a 32-bit shift per value. Equal to
// Requantize with lo = 0, and it vectorizes.
inline __attribute__((always_inline)) void RequantReluLoop(const int32_t* acc, const int32_t* bias,
                                                           const uint32_t* mult,
                                                           const uint64_t* round,
                                                           const uint32_t* shift_hi, int64_t n,
                                                           int8_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t v = static_cast<uint32_t>(std::max(acc[i] + bias[i], 0));
    const uint64_t rounded = uint64_t{v} * mult[i] + round[i];
    const uint32_t q = static_cast<uint32_t>(rounded >> 32) >> shift_hi[i];
    out[i] = static_cast<int8_t>(std::min(q, 127u));
  }
}
__attribute__((target("avx2"))) void RequantReluAvx2(const int32_t* acc, const int32_t* bias,
                                                     const uint32_t* mult, const uint64_t* round,
                                                     const uint32_t* shift_hi, int64_t n,
                                                     int8_t* out) {
  RequantReluLoop(acc, bias, mult, round, shift_hi, n, out);
}
void RequantReluBase(const int32_t* acc, const int32_t* bias, const uint32_t* mult,
                     const uint64_t* round, const uint32_t* shift_hi, int64_t n, int8_t* out) {
  RequantReluLoop(acc, bias, mult, round, shift_hi, n, out);
}
// The AVX2 version where the CPU has it (chosen here rather than with target_clones, whose
// ifunc resolver crashes under ThreadSanitizer).
void RequantReluRun(const int32_t* acc, const int32_t* bias, const uint32_t* mult,
                    const uint64_t* round, const uint32_t* shift_hi, int64_t n, int8_t* out) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  (avx2 ? RequantReluAvx2 : RequantReluBase)(acc, bias, mult, round, shift_hi, n, out);
}

}  // namespace

Int8Net::Int8Net(const Model& m) : model_(m) {
  if (!m.quantized) throw std::invalid_argument("Int8Net: the model is not quantized");
  for (const Layer& l : m.layers) {
    weights_.emplace_back();
    requant_.emplace_back();
    if (!l.HasWeights()) continue;
    weights_.back().assign(l.q.weights.data.begin(), l.q.weights.data.end());
    RequantRun& rr = requant_.back();
    const int64_t cols = l.out.c;
    rr.fast = ClampsAtZero(l.activation);
    for (int64_t c = 0; c < cols; ++c) {
      rr.fast &= l.q.shift[c] >= 32 && l.q.shift[c] <= 62 && l.q.multiplier[c] >= 0;
    }
    if (!rr.fast) continue;
    rr.reps = std::max<int64_t>(1, 64 / cols);  // long enough runs for the vector loop
    for (int64_t i = 0; i < rr.reps * cols; ++i) {
      const size_t c = static_cast<size_t>(i % cols);
      rr.bias.push_back(l.q.bias.data[c]);
      rr.multiplier.push_back(static_cast<uint32_t>(l.q.multiplier[c]));
      rr.shift_hi.push_back(static_cast<uint32_t>(l.q.shift[c] - 32));
      rr.round.push_back(uint64_t{1} << (l.q.shift[c] - 1));
    }
  }
}

// acc (rows x c_out, bias not yet added) -> int8 with the layer's requantization, into
// `out` (rows x c_out).
void Int8Net::Requant(size_t layer, const MatrixI32& acc, int8_t* out) const {
  const Layer& l = model_.layers[layer];
  const RequantRun& rr = requant_[layer];
  const int64_t cols = l.out.c, rows = acc.rows();
  int64_t r = 0;
  if (rr.fast) {
    for (; r < rows; r += rr.reps) {
      const int64_t n = std::min(rr.reps, rows - r) * cols;
      RequantReluRun(acc.data() + r * cols, rr.bias.data(), rr.multiplier.data(), rr.round.data(),
                     rr.shift_hi.data(), n, out + r * cols);
    }
    return;
  }
  const int32_t lo = ClampsAtZero(l.activation) ? 0 : -128;
  for (; r < rows; ++r) {
    const int32_t* a = acc.data() + r * cols;
    int8_t* o = out + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      o[c] = arith::Requantize(a[c] + l.q.bias.data[static_cast<size_t>(c)],
                               static_cast<uint32_t>(l.q.multiplier[static_cast<size_t>(c)]),
                               static_cast<uint32_t>(l.q.shift[static_cast<size_t>(c)]), lo);
    }
  }
}

namespace {

using MatrixF = RowMatrix<float>;

// x (rows x K, int8 values held in float) times the layer's K x c_out weights, exactly, in
// int32.
MatrixI32 Product(const Layer& l, const MatrixF& x, const std::vector<float>& w) {
  MatrixI32 acc(x.rows(), l.out.c);
  arith::GemmInt8FF(x.rows(), l.out.c, x.cols(), x.data(), x.cols(), w.data(), l.out.c, acc.data(),
                    l.out.c, /*accumulate=*/false);
  return acc;
}

}  // namespace

std::vector<MatrixI8> Int8Net::Forward(const uint8_t* pixels, int64_t count) const {
  MatrixI8 input(count, model_.input.Size());
  for (int64_t i = 0; i < input.size(); ++i) input.data()[i] = arith::QuantizePixel(pixels[i]);
  return Forward(input);
}

std::vector<MatrixI8> Int8Net::Forward(const MatrixI8& input) const {
  const Model& m = model_;
  const int64_t count = input.rows();
  std::vector<MatrixI8> outs;
  outs.reserve(m.layers.size());
  auto out_of = [&](int in) -> const MatrixI8& {
    return in == kModelInput ? input : outs[static_cast<size_t>(in)];
  };
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const Layer& l = m.layers[i];
    const MatrixI8& x = out_of(l.inputs[0]);
    MatrixI8 y(count, l.out.Size());
    switch (l.type) {
      case LayerType::kConv2d: {
        // The windows are formed in float, as the fp32 network forms them, so that the
        // exact GEMM takes them as they are; rows (image, oh, ow) x c_out are y's layout.
        // A few images at a time, so that the windows stay small (about 16 MB).
        const int64_t per = std::max<int64_t>(
            1, (int64_t{1} << 22) / std::max<int64_t>(1, int64_t{l.out.h} * l.out.w * l.kernel_h *
                                                             l.kernel_w * l.in.c));
        for (int64_t b = 0; b < count; b += per) {
          const int64_t n = std::min(per, count - b);
          const MatrixF xb = x.middleRows(b, n).cast<float>();
          Requant(i, Product(l, Im2Col<float>(l, xb), weights_[i]), y.row(b).data());
        }
        break;
      }
      case LayerType::kDense:
        Requant(i, Product(l, x.cast<float>(), weights_[i]), y.data());
        break;
      default: {  // the rest image by image, by the operation's int8 rule
        std::vector<int> channels;
        for (int k : l.inputs) channels.push_back(m.OutputOf(k).c);
        std::vector<const int8_t*> xs(l.inputs.size());
        for (int64_t b = 0; b < count; ++b) {
          for (size_t k = 0; k < xs.size(); ++k) xs[k] = out_of(l.inputs[k]).row(b).data();
          ops::Op(l.type).int8(l, xs, channels, y.row(b).data());
        }
        break;
      }
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
