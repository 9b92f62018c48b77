#include "host/nn/lstm.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "arith/int8.h"
#include "arith/vpu_tables.h"
#include "host/common/errors.h"
#include "host/nn/quantize.h"

namespace tpu::nn {
namespace {

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// The gate's table and its input step: sigmoid for i, f and o, tanh for g.
bool IsTanhGate(int64_t column, int64_t hidden) { return column / hidden == 2; }

}  // namespace

Lstm RandomLstm(int64_t inputs, int64_t hidden, uint64_t seed) {
  if (inputs < 1 || hidden < 1)
    throw UsageError("an LSTM needs at least one input and one hidden unit");
  Lstm l;
  l.inputs = inputs;
  l.hidden = hidden;
  std::mt19937_64 rng(seed);
  const float k = 1.0f / std::sqrt(static_cast<float>(hidden));
  std::uniform_real_distribution<float> u(-k, k);
  l.weights.resize(static_cast<size_t>(l.Rows() * l.Gates()));
  l.bias.resize(static_cast<size_t>(l.Gates()));
  for (float& w : l.weights) w = u(rng);
  for (float& b : l.bias) b = u(rng);
  return l;
}

void Fp32LstmStep(const Lstm& l, const float* x, float* h, float* c, int64_t batch) {
  const int64_t H = l.hidden, G = l.Gates();
  std::vector<float> z(static_cast<size_t>(G));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < G; ++j) z[j] = l.bias[j];
    for (int64_t r = 0; r < l.Rows(); ++r) {
      const float v = r < l.inputs ? x[b * l.inputs + r] : h[b * H + r - l.inputs];
      for (int64_t j = 0; j < G; ++j) z[j] += v * l.weights[r * G + j];
    }
    for (int64_t u = 0; u < H; ++u) {
      const float i = Sigmoid(z[u]), f = Sigmoid(z[H + u]), g = std::tanh(z[2 * H + u]),
                  o = Sigmoid(z[3 * H + u]);
      float& cell = c[b * H + u];
      cell = f * cell + i * g;
      h[b * H + u] = o * std::tanh(cell);
    }
  }
}

QuantizedLstm QuantizeLstm(const Lstm& l, float cell_scale, float input_scale) {
  if (!(cell_scale > 0)) throw UsageError("the LSTM's cell scale must be positive");
  const float fold = input_scale == 1.0f / 127.0f ? 1.0f : input_scale * 127.0f;
  const auto w = [&](int64_t r, int64_t j) {
    const float v = l.weights[static_cast<size_t>(r * l.Gates() + j)];
    return r < l.inputs ? v * fold : v;
  };
  QuantizedLstm q;
  q.inputs = l.inputs;
  q.hidden = l.hidden;
  q.cell_scale = cell_scale;
  const int64_t G = l.Gates(), R = l.Rows();
  q.weights.resize(static_cast<size_t>(R * G));
  q.bias.resize(static_cast<size_t>(G));
  q.weight_scale.resize(static_cast<size_t>(G));
  q.multiplier.resize(static_cast<size_t>(G));
  q.shift.resize(static_cast<size_t>(G));
  for (int64_t j = 0; j < G; ++j) {
    float most = 0;
    for (int64_t r = 0; r < R; ++r) most = std::max(most, std::fabs(w(r, j)));
    const float s = most > 0 ? most / 127.0f : 1.0f;
    q.weight_scale[j] = s;
    for (int64_t r = 0; r < R; ++r)
      q.weights[r * G + j] = static_cast<int8_t>(std::lround(w(r, j) / s));
    const double acc_scale = double{s} / 127.0;  // inputs and h have scale 1/127
    q.bias[j] = static_cast<int32_t>(std::llround(l.bias[j] / acc_scale));
    const int step =
        IsTanhGate(j, l.hidden) ? hw::kVpuTableTanhInputStep : hw::kVpuTableSigmoidInputStep;
    QuantizeMultiplier(acc_scale * step, &q.multiplier[j], &q.shift[j]);
  }
  const double s_c = cell_scale;
  QuantizeMultiplier(1.0 / 127.0, &q.fc_mul, &q.fc_shift);
  QuantizeMultiplier(1.0 / (127.0 * 127.0 * s_c), &q.ig_mul, &q.ig_shift);
  QuantizeMultiplier(s_c * hw::kVpuTableTanhInputStep, &q.tanh_mul, &q.tanh_shift);
  QuantizeMultiplier(1.0 / 127.0, &q.h_mul, &q.h_shift);
  return q;
}

void Int8LstmStep(const QuantizedLstm& q, const int8_t* x, int8_t* h, int8_t* c, int64_t batch) {
  const int64_t H = q.hidden, G = q.Gates();
  const auto sig = arith::VpuFunction::kSigmoid, tanh = arith::VpuFunction::kTanh;
  std::vector<int32_t> acc(static_cast<size_t>(G));
  std::vector<int8_t> h_new(static_cast<size_t>(H));
  for (int64_t b = 0; b < batch; ++b) {
    std::fill(acc.begin(), acc.end(), 0);
    for (int64_t r = 0; r < q.Rows(); ++r) {
      const int32_t v = r < q.inputs ? x[b * q.inputs + r] : h[b * H + r - q.inputs];
      for (int64_t j = 0; j < G; ++j) acc[j] += v * q.weights[r * G + j];
    }
    // The gate's table of its requantized pre-activation (the VPU's stage 2).
    auto gate = [&](int64_t j, arith::VpuFunction fn) {
      const auto sum =
          static_cast<int32_t>(static_cast<uint32_t>(acc[j]) + static_cast<uint32_t>(q.bias[j]));
      return arith::ApplyVpuFunction(fn,
                                     arith::Requantize(sum, static_cast<uint32_t>(q.multiplier[j]),
                                                       static_cast<uint32_t>(q.shift[j]), -128));
    };
    for (int64_t u = 0; u < H; ++u) {
      const int8_t i = gate(u, sig), f = gate(H + u, sig), g = gate(2 * H + u, tanh),
                   o = gate(3 * H + u, sig);
      int8_t& cell = c[b * H + u];
      const int8_t ig = arith::MulRequantize(i, g, static_cast<uint32_t>(q.ig_mul),
                                             static_cast<uint32_t>(q.ig_shift), -128);
      const int8_t fc = arith::MulRequantize(f, cell, static_cast<uint32_t>(q.fc_mul),
                                             static_cast<uint32_t>(q.fc_shift), -128);
      cell = arith::AddRequantize(fc, ig, 2, 2, 1, -128);  // fc + ig, clamped
      const int8_t t = arith::ApplyVpuFunction(
          tanh, arith::Requantize(cell, static_cast<uint32_t>(q.tanh_mul),
                                  static_cast<uint32_t>(q.tanh_shift), -128));
      h_new[u] = arith::MulRequantize(o, t, static_cast<uint32_t>(q.h_mul),
                                      static_cast<uint32_t>(q.h_shift), -128);
    }
    std::copy(h_new.begin(), h_new.end(), h + b * H);
  }
}

}  // namespace tpu::nn
