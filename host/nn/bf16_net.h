// A network in bfloat16, as a bf16 chip with an N x N array computes it (docs/bf16.md,
// "Networks"), each layer by its operation's bfloat16 rule (host/nn/ops): an fp32 model's weights
// and inputs rounded to bfloat16, every convolution and dense layer a GEMM that adds in the array's
// order (arith::Bf16Gemm with N-row K tiles, K in (kernel row, kernel column, input channel)
// order), then the vector unit's float32 bias add and activation and one rounding to bfloat16;
// pooling on those bf16 values. No quantization. The reference the bf16 chip is compared with bit
// for bit; its accuracy is compared with the fp32 network's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/nn/model.h"
#include "host/nn/ops/op.h"

namespace tpu::nn {

// Where a NaN or an infinity first appeared in a run: the layer and the index of the value
// in its output (h x w x c order).
struct NonFinite {
  int layer = -1;  // -1: none
  int64_t index = 0;
};

class Bf16Net {
 public:
  // Throws UsageError for an add with ReLU6 (the chip's residual add has ReLU only).
  // Average pooling that the chip does not fuse into a convolution runs as the chip runs
  // it: a depthwise convolution with weights bfloat16(1 / window); max pooling, adds and
  // concatenations as docs/bf16.md ("Networks") says.
  Bf16Net(const Model& model, int array_dim);

  // One input (model.input.Size() float values, h x w x c) through the network: every
  // layer's bfloat16 output, the last one the logits (a softmax is left to the caller).
  std::vector<std::vector<uint16_t>> Forward(const float* input) const;

 private:
  const Model& model_;
  std::vector<ops::Bf16Layer> layers_;  // each layer prepared by its operation's rule
};

// The first NaN or infinity in a Forward's outputs (layer -1: none).
NonFinite FirstNonFinite(const std::vector<std::vector<uint16_t>>& outputs);

// The index of the largest bf16 value (the first of equal ones; NaN never wins).
int ArgMaxBf16(const std::vector<uint16_t>& values);

}  // namespace tpu::nn
