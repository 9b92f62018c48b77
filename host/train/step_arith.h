// The chip's arithmetic of a training step over whole tensors, shared by the CPU references
// (dense_reference.h, conv_reference.h): the array's product, the activation unit's
// rounding, a transpose through the array, and the vector unit's softmax cross-entropy of
// one image. Values are float32 bit patterns (uint32_t) and bfloat16 ones (uint16_t).
#pragma once

#include <cstdint>
#include <vector>

namespace tpu::train::chip {

using Bits = std::vector<uint32_t>;
using Half = std::vector<uint16_t>;

// The activation unit with a parameter set of bias +0 and upper bound `hi` (float32 bits;
// ReLU6's 6, or none): acc + 0, ReLU, at most hi, rounded.
Half Activate(const Bits& acc, bool relu, uint32_t hi = 0x7f800000u);

// rows x cols of a, transposed: what a transposed load times the identity writes back
// (each sum has one non-zero product, so it is exact; a -0 becomes +0).
Half Transposed(const Half& a, int64_t rows, int64_t cols);

// The array's product: a (m x k) times b (k x cols), K in tiles of n, each tile's column
// sums added into the accumulators (arith::Bf16Gemm).
Bits Product(const Half& a, const Half& b, int64_t m, int64_t k, int64_t cols, int n);

// Two cores' bfloat16 weight gradients summed as the vector unit adds them (vector op=add,
// bfloat16 operands and result): the float32 sum, rounded to nearest even. IEEE addition
// is commutative, so each core's sum of its own and the other's is this.
uint16_t CoreSum(uint16_t a, uint16_t b);

// The loss of one image and dL/dlogits, as the vector unit computes them over the n lanes
// of its logits' row (lanes past the classes -infinity): returns the loss, and dz (classes
// values, times inv_batch). More classes than n take rows of n lanes each (blocks): the
// maximum and the sum each block's (trees of pairs) taken block after block, the picked
// logit in its block's lane of one row.
uint32_t SoftmaxRow(const uint16_t* logits, int classes, int label, int n, uint32_t inv_batch,
                    uint16_t* dz);

// Batch normalization's float32 constants for m values a channel (one row each, in this
// order): 1 / m, epsilon, momentum, 1 - momentum, m / (m - 1) (the running variance's
// unbiased factor), each a float of the double value.
enum BatchNormConstant { kBnInvM, kBnEps, kBnMomentum, kBnKeep, kBnUnbiased, kBnConstants };
std::vector<float> BatchNormConstants(double epsilon, double momentum, int64_t m);

// The sum of `rows` float32 rows of `lanes` lanes, lane by lane, as row_sum instructions give
// it: each instruction sums at most isa::ProgramBuilder::kMaxLength rows, row after row from
// its first, and their sums are added (vector add) in order.
Bits RowSum(const Bits& v, int64_t rows, int64_t lanes);

}  // namespace tpu::train::chip
