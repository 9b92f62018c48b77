// The int8 network computed one multiply-add at a time: short enough to check by eye
// against docs/quantization.md. The Eigen backend and the TPU are tested against it.
#pragma once

#include <cstdint>
#include <vector>

#include "host/nn/model.h"

namespace tpu::nn {

// Runs one image (raw pixels, model.input.Size() of them) through the quantized model.
// Returns every layer's int8 output (h x w x c order); the last one holds the logits.
std::vector<std::vector<int8_t>> ReferenceInt8(const Model& model, const uint8_t* pixels);

// One image through an average or max pooling layer (int8 in, int8 out, h x w x c).
void PoolInt8(const Layer& layer, const int8_t* in, int8_t* out);

}  // namespace tpu::nn
