// Post-training quantization (see quantize.h and docs/quantization.md).
#include "host/nn/quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "host/common/errors.h"
#include "host/nn/fp32_net.h"
#include "host/nn/ops/op.h"

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

void QuantizeAddMultipliers(double real_a, double real_b, int32_t* ma, int32_t* mb,
                            int32_t* shift) {
  int32_t m = 0;
  QuantizeMultiplier(std::max(real_a, real_b), &m, shift);  // the larger in [2^30, 2^31)
  if (m == 0) {
    *ma = *mb = 0;
    return;
  }
  const double unit = std::ldexp(1.0, *shift);
  *ma =
      static_cast<int32_t>(std::min<int64_t>(std::llround(real_a * unit), (int64_t{1} << 31) - 1));
  *mb =
      static_cast<int32_t>(std::min<int64_t>(std::llround(real_b * unit), (int64_t{1} << 31) - 1));
}

namespace {

// Per-tensor ranges over the calibration inputs: the largest |value| of the input (first)
// and of every layer's fp32 output (logits for a softmax layer, not probabilities); and of
// each layer's state where it keeps one (OpDef::state_range; 0 for the others).
struct Ranges {
  std::vector<float> max_abs, state;
};
Ranges CalibratedRanges(const Model& m, const InputSet& calibration, int64_t n) {
  Ranges r{std::vector<float>(m.layers.size() + 1, 0.0f), std::vector<float>(m.layers.size(), 0)};
  std::vector<float>& max_abs = r.max_abs;
  Model logits = m;
  for (Layer& l : logits.layers)
    if (l.activation == Activation::kSoftmax) l.activation = Activation::kNone;
  const int64_t chunk =
      std::max<int64_t>(1, (int64_t{1} << 24) / std::max<int64_t>(1, m.input.Size()));
  for (int64_t b = 0; b < n; b += chunk) {
    const int64_t count = std::min(chunk, n - b);
    ForwardCache cache;
    cache.keep_cols = false;
    Forward(logits, Fp32Inputs(calibration, b, count), &cache);
    for (size_t i = 0; i < cache.acts.size(); ++i) {
      max_abs[i] = std::max(max_abs[i], cache.acts[i].cwiseAbs().maxCoeff());
    }
    for (size_t i = 0; i < m.layers.size(); ++i) {
      const Layer& l = m.layers[i];
      if (const auto state = ops::Op(l.type).state_range) {
        const MatrixF& x = cache.acts[static_cast<size_t>(l.inputs[0] + 1)];
        r.state[i] = std::max(r.state[i], state(l, x));
      }
    }
  }
  return r;
}

}  // namespace

float QuantizeWeighted(Layer* layer, float scale, float max_abs) {
  Layer& l = *layer;
  QuantizedLayer& q = l.q;
  q.input_scale = scale;
  // ReLU6 outputs lie in [0, 6], so the scale is at most 6 / 127 and the int8 clamp at 127
  // is at or below 6 (ClampsAtZero in model.h).
  const float empty_scale = l.activation == Activation::kRelu6 ? 6.0f / 127.0f : 1.0f;
  q.output_scale = max_abs > 0 ? max_abs / 127.0f : empty_scale;
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
  return q.output_scale;
}

void Quantize(Model* m, const InputSet& calibration, int64_t calibration_inputs) {
  if (m->quantized) throw UsageError("model '" + m->name + "' is already quantized");
  const int64_t n = std::min(calibration_inputs, calibration.count);
  if (n < 1) throw UsageError("quantization needs at least one calibration input");
  const Ranges ranges = CalibratedRanges(*m, calibration, n);
  const std::vector<float>& max_abs = ranges.max_abs;
  m->quantized = true;
  m->input_scale =
      m->preprocess == "mnist32" || max_abs[0] == 0 ? 1.0f / 127.0f : max_abs[0] / 127.0f;
  // The scale of what each input (a layer, or the model's input at -1) produced.
  std::vector<float> scale(m->layers.size() + 1, 0.0f);
  scale[0] = m->input_scale;
  auto scale_of = [&](int in) { return scale[static_cast<size_t>(in + 1)]; };
  for (size_t i = 0; i < m->layers.size(); ++i) {
    Layer& l = m->layers[i];
    const float range = max_abs[i + 1];
    std::vector<float> in_scales;
    for (int k : l.inputs) in_scales.push_back(scale_of(k));
    if (ops::Op(l.type).state_range)
      l.q.cell_scale = ranges.state[i] > 0 ? ranges.state[i] / 127.0f : 1.0f / 127.0f;
    const float out = ops::Op(l.type).quantize(&l, in_scales, range);
    scale[i + 1] = out;
  }
}

void Quantize(Model* model, const data::MnistSet& calibration, int64_t calibration_images) {
  Quantize(model, InputsFromMnist(calibration, 0, model->input), calibration_images);
}

}  // namespace tpu::nn
