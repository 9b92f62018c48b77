// An LSTM cell (PyTorch's equations, gates in PyTorch's order i, f, g, o) in fp32, and its
// int8 form: the arithmetic the chip runs an LSTM step with (docs/quantization.md, "LSTM
// cells"), so the chip is bit-exact against Int8LstmStep.
//
//   z = [x; h] W + b          (W: (X + H) x 4H, b: 4H)
//   i = sigmoid(z_i)  f = sigmoid(z_f)  g = tanh(z_g)  o = sigmoid(z_o)
//   c' = f * c + i * g        h' = o * tanh(c')
#pragma once

#include <cstdint>
#include <vector>

namespace tpu::nn {

struct Lstm {
  int64_t inputs = 0, hidden = 0;  // X and H
  std::vector<float> weights;      // (X + H) x 4H, row-major: the input's rows, then h's
  std::vector<float> bias;         // 4H
  int64_t Gates() const { return 4 * hidden; }
  int64_t Rows() const { return inputs + hidden; }
};

// Uniform(-1/sqrt(H), 1/sqrt(H)) weights and biases, as PyTorch's nn.LSTM initialises them.
Lstm RandomLstm(int64_t inputs, int64_t hidden, uint64_t seed);

// One fp32 step for `batch` sequences: x is batch x X, h and c batch x H, updated in place.
void Fp32LstmStep(const Lstm& lstm, const float* x, float* h, float* c, int64_t batch);

// The int8 form. Inputs and h have scale 1/127 (values in [-1, 1]); c has `cell_scale`.
// Per gate column j: int8 weights of scale weight_scale[j] (symmetric, per column), an int32
// bias of scale weight_scale[j] / 127, and the requantization (multiplier[j], shift[j]) of
// the accumulator to the VPU table's input (1/16 for sigmoid, 1/32 for tanh). The
// elementwise steps each have one multiplier and shift (docs/quantization.md).
struct QuantizedLstm {
  int64_t inputs = 0, hidden = 0;
  float cell_scale = 0;
  std::vector<int8_t> weights;  // (X + H) x 4H
  std::vector<int32_t> bias;    // 4H
  std::vector<float> weight_scale;
  std::vector<int32_t> multiplier, shift;  // 4H
  int32_t fc_mul = 0, fc_shift = 0;        // f * c   -> cell scale: 1 / 127
  int32_t ig_mul = 0, ig_shift = 0;        // i * g   -> cell scale: 1 / (127^2 cell_scale)
  int32_t tanh_mul = 0, tanh_shift = 0;    // c'      -> tanh input: 32 cell_scale
  int32_t h_mul = 0, h_shift = 0;          // o * tanh(c') -> 1/127: 1 / 127
  int64_t Gates() const { return 4 * hidden; }
  int64_t Rows() const { return inputs + hidden; }
};

// `cell_scale`: the int8 scale of c, max |c| / 127 over the sequences it will run;
// `input_scale`: the int8 scale of x, folded into the input rows' weights (x W = (q_x s_x
// 127) W / 127), so that the accumulator adds x's and h's products at h's scale, 1/127.
QuantizedLstm QuantizeLstm(const Lstm& lstm, float cell_scale, float input_scale = 1.0f / 127.0f);

// One int8 step, exactly as the chip computes it: x is batch x X, h and c batch x H, int8,
// updated in place.
void Int8LstmStep(const QuantizedLstm& q, const int8_t* x, int8_t* h, int8_t* c, int64_t batch);

}  // namespace tpu::nn
