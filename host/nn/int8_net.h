// The int8 network, batched: the cpu-int8 backend. Its products go through the exact int8
// GEMM of int8_gemm.h (fp32 blocks, exact by construction), which the fast chip engine
// uses too: the windows are formed in float straight from the int8 activations, and the
// requantization with ReLU runs vectorized. Bit-exact with ReferenceInt8 at every layer
// (tested), and at least as fast as the fp32 network (docs/performance.md).
#pragma once

#include <cstdint>
#include <vector>

#include "host/nn/im2col.h"
#include "host/nn/model.h"

namespace tpu::nn {

using MatrixI8 = RowMatrix<int8_t>;

// A quantized model ready to run: its int8 weights widened to float once, for the exact
// GEMM. Forward() is const and may run on several threads at once.
class Int8Net {
 public:
  // Throws std::invalid_argument for a model that is not quantized. Keeps a reference
  // to `model`, which must outlive the Int8Net.
  explicit Int8Net(const Model& model);

  // `count` images of raw pixels in, every layer's int8 output out (one row per image).
  std::vector<MatrixI8> Forward(const uint8_t* pixels, int64_t count) const;

 private:
  const Model& model_;
  std::vector<std::vector<float>> weights_;  // per layer, K x c_out; empty without weights
};

// Index of the first largest logit of each row.
std::vector<int> ArgMaxInt8(const MatrixI8& logits);

}  // namespace tpu::nn
