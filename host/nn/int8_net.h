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

  // The int8 inputs (one row per input, h x w x c) in, every layer's int8 output out (one
  // row per input), in the order of model.layers.
  std::vector<MatrixI8> Forward(const MatrixI8& input) const;
  // `count` raw images of a preprocess-mnist32 model (QuantizePixel first).
  std::vector<MatrixI8> Forward(const uint8_t* pixels, int64_t count) const;

 private:
  // A layer's requantization parameters repeated along a run of rows (`reps` rows of c_out),
  // for the vectorized ReLU requantization; `fast` false: the scalar Requantize instead.
  struct RequantRun {
    bool fast = false;
    int64_t reps = 0;
    std::vector<int32_t> bias;
    std::vector<uint32_t> multiplier, shift_hi;
    std::vector<uint64_t> round;
  };
  void Requant(size_t layer, const RowMatrix<int32_t>& acc, int8_t* out) const;

  const Model& model_;
  std::vector<std::vector<float>> weights_;  // per layer, K x c_out; empty without weights
  std::vector<RequantRun> requant_;          // per layer
};

// Index of the first largest logit of each row.
std::vector<int> ArgMaxInt8(const MatrixI8& logits);

}  // namespace tpu::nn
