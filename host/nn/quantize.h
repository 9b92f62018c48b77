// Post-training int8 quantization (docs/quantization.md): symmetric per-output-channel
// weights, int32 biases, per-tensor activation scales calibrated on inputs, and each layer's
// requantization as integer multipliers and a shift.
#pragma once

#include <cstdint>

#include "host/nn/inputs.h"
#include "host/nn/model.h"

namespace tpu::nn {

// Multiplier m in [2^30, 2^31) and shift s in [1, 62] with m * 2^-s ~= real (0 < real < 2^30);
// m = 0, s = 62 for a real too small to represent (every output rounds to 0).
void QuantizeMultiplier(double real, int32_t* multiplier, int32_t* shift);

// The two multipliers of an add with one shift: the larger real's multiplier in
// [2^30, 2^31) as QuantizeMultiplier makes it, the other round(real * 2^shift).
void QuantizeAddMultipliers(double real_a, double real_b, int32_t* ma, int32_t* mb, int32_t* shift);

// A conv or dense layer's int8 form (docs/quantization.md) for an input of `scale` and an
// output range `max_abs` (the largest |value| calibrated): per-output-channel weights, int32
// biases, each channel's multiplier and shift. Returns the output's scale.
float QuantizeWeighted(Layer* layer, float scale, float max_abs);

// Adds the int8 form to every conv, dense, add and concat layer of an fp32 model.
// Activation scales are max |fp32 output| / 127 over the first `calibration_inputs` of
// `calibration` (for a softmax layer: max |logit| / 127; a concat takes its largest input's
// scale); the input's scale is 1/127 for preprocess mnist32, else max |input| / 127. Throws
// UsageError for an already quantized model or an empty calibration set.
void Quantize(Model* model, const InputSet& calibration, int64_t calibration_inputs);
// The same on the images of a data set.
void Quantize(Model* model, const data::MnistSet& calibration, int64_t calibration_images);

}  // namespace tpu::nn
