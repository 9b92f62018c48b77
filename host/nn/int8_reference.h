// The int8 network computed one multiply-add at a time: short enough to check by eye
// against docs/quantization.md. The Eigen backend and the TPU are tested against it.
#pragma once

#include <cstdint>
#include <vector>

#include "host/nn/model.h"

namespace tpu::nn {

// Runs one input (int8, model.input.Size() values) through the quantized model. Returns
// every layer's int8 output (h x w x c order); the last one holds the logits.
std::vector<std::vector<int8_t>> ReferenceInt8(const Model& model, const int8_t* input);
// The same for one raw image of a preprocess-mnist32 model (QuantizePixel first).
std::vector<std::vector<int8_t>> ReferenceInt8(const Model& model, const uint8_t* pixels);

}  // namespace tpu::nn
