// The int8 network on Eigen, batched: the cpu-int8 backend. Bit-exact with
// ReferenceInt8 at every layer (tested).
#pragma once

#include <cstdint>
#include <vector>

#include "host/nn/im2col.h"
#include "host/nn/model.h"

namespace tpu::nn {

using MatrixI8 = RowMatrix<int8_t>;

// `count` images of raw pixels in, every layer's int8 output out (one row per image).
std::vector<MatrixI8> ForwardInt8(const Model& model, const uint8_t* pixels, int64_t count);

// Index of the first largest logit of each row.
std::vector<int> ArgMaxInt8(const MatrixI8& logits);

}  // namespace tpu::nn
