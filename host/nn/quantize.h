// Post-training int8 quantization (docs/quantization.md): symmetric per-output-channel
// weights, int32 biases, per-tensor activation scales calibrated on training images, and
// each layer's requantization as an integer multiplier and shift.
#pragma once

#include <cstdint>

#include "host/data/mnist.h"
#include "host/nn/model.h"

namespace tpu::nn {

// Multiplier m in [2^30, 2^31) and shift s in [1, 62] with m * 2^-s ~= real (0 < real < 2^30);
// m = 0, s = 62 for a real too small to represent (every output rounds to 0).
void QuantizeMultiplier(double real, int32_t* multiplier, int32_t* shift);

// Adds the int8 form to every conv/dense layer of an fp32 model. Activation scales are
// max(fp32 output) / 127 over the first `calibration_images` images of `calibration`
// (for a softmax layer: max |logit| / 127). Throws UsageError for an already quantized
// model or an empty calibration set.
void Quantize(Model* model, const data::MnistSet& calibration, int64_t calibration_images);

}  // namespace tpu::nn
