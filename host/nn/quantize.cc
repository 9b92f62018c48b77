// Post-training quantization (see quantize.h and docs/quantization.md).
#include "host/nn/quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "host/common/errors.h"
#include "host/nn/fp32_net.h"

namespace tpu::nn {

void QuantizeMultiplier(double real, int32_t* multiplier, int32_t* shift) {
  int exp = 0;
  const double frac = std::frexp(real, &exp);     // real = frac * 2^exp, frac in [0.5, 1)
  int64_t m = std::llround(frac * 2147483648.0);  // frac * 2^31
  if (m == (int64_t{1} << 31)) {                  // rounding reached 1.0
    m >>= 1;
    ++exp;
  }
  int s = 31 - exp;
  if (s > 62) {  // too small: every output rounds to zero
    *multiplier = 0;
    *shift = 62;
    return;
  }
  if (s < 1) throw UsageError("requantization scale too large to represent (>= 2^30)");
  *multiplier = static_cast<int32_t>(m);
  *shift = s;
}

void Quantize(Model* m, const data::MnistSet& calibration, int64_t calibration_images) {
  if (m->quantized) throw UsageError("model '" + m->name + "' is already quantized");
  const int64_t n = std::min(calibration_images, calibration.count);
  if (n < 1) throw UsageError("quantization needs at least one calibration image");

  // Per-tensor ranges of every layer's fp32 output over the calibration images.
  std::vector<float> max_abs(m->layers.size(), 0.0f);
  Model logits = *m;  // calibrate the last layer on logits, not probabilities
  for (Layer& l : logits.layers)
    if (l.activation == Activation::kSoftmax) l.activation = Activation::kNone;
  constexpr int64_t kChunk = 500;
  for (int64_t b = 0; b < n; b += kChunk) {
    const int64_t count = std::min(kChunk, n - b);
    ForwardCache cache;
    Forward(logits, Fp32Input(calibration.Image(b), count, m->input), &cache);
    for (size_t i = 0; i < m->layers.size(); ++i) {
      max_abs[i] = std::max(max_abs[i], cache.acts[i + 1].cwiseAbs().maxCoeff());
    }
  }

  m->quantized = true;
  m->input_scale = 1.0f / 127.0f;
  float scale = m->input_scale;  // the scale of the current int8 activation
  for (size_t i = 0; i < m->layers.size(); ++i) {
    Layer& l = m->layers[i];
    if (!l.HasWeights()) continue;  // pooling and flatten keep the scale
    QuantizedLayer& q = l.q;
    q.input_scale = scale;
    // ReLU6 outputs lie in [0, 6], so the scale is at most 6 / 127 and the int8 clamp at 127
    // is at or below 6 (ClampsAtZero in model.h).
    const float empty_scale = l.activation == Activation::kRelu6 ? 6.0f / 127.0f : 1.0f;
    q.output_scale = max_abs[i] > 0 ? max_abs[i] / 127.0f : empty_scale;
    const int64_t fan_in = l.weights.Size() / l.out.c;
    q.weights.shape = l.weights.shape;
    q.weights.data.assign(l.weights.data.size(), 0);
    q.bias.shape = {l.out.c};
    q.bias.data.assign(static_cast<size_t>(l.out.c), 0);
    q.weight_scales.assign(static_cast<size_t>(l.out.c), 1.0f);
    q.multiplier.assign(static_cast<size_t>(l.out.c), 0);
    q.shift.assign(static_cast<size_t>(l.out.c), 62);
    for (int c = 0; c < l.out.c; ++c) {
      float wmax = 0;
      for (int64_t k = 0; k < fan_in; ++k) {
        wmax = std::max(wmax, std::fabs(l.weights.data[static_cast<size_t>(k * l.out.c + c)]));
      }
      const float ws = wmax > 0 ? wmax / 127.0f : 1.0f;
      q.weight_scales[static_cast<size_t>(c)] = ws;
      for (int64_t k = 0; k < fan_in; ++k) {
        const size_t idx = static_cast<size_t>(k * l.out.c + c);
        q.weights.data[idx] =
            static_cast<int8_t>(std::clamp<long>(std::lround(l.weights.data[idx] / ws), -127, 127));
      }
      const double acc_scale = double{scale} * ws;
      const double qb = std::round(l.bias.data[static_cast<size_t>(c)] / acc_scale);
      q.bias.data[static_cast<size_t>(c)] = static_cast<int32_t>(std::clamp<double>(
          qb, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()));
      QuantizeMultiplier(acc_scale / q.output_scale, &q.multiplier[static_cast<size_t>(c)],
                         &q.shift[static_cast<size_t>(c)]);
    }
    l.quantized = true;
    scale = q.output_scale;
  }
}

}  // namespace tpu::nn
