// What a transformer's operations that compute in floating point share (matmul.cc,
// normalize.cc, gelu.cc, constants.cc): fp32 on the CPU, and their bfloat16 rules
// (transformer_bf16.cc), what a bf16 chip is to compute; an int8 chip has no float unit and
// tpusim defines no int8 scheme for them, so int8 refuses with a line saying so
// (docs/transformers.md).
#pragma once

#include <cstdint>

#include "host/nn/ops/op.h"

namespace tpu::nn::ops {

// An operation of `type` named `name`: int8 and quantization refuse (UsageError naming the
// layer), its bfloat16 rule (SetTransformerBf16), the graph-only model.json version, one
// input, no MACs.
OpDef FloatOnly(LayerType type, const char* name);

// The bfloat16 rule (bf16_prepare, bf16) of d's operation (transformer_bf16.cc).
void SetTransformerBf16(OpDef* d);

// The constants of erf by Abramowitz and Stegun 7.1.26 (p, then a1 .. a5) and 1 / sqrt 2:
// the bfloat16 rule's and the chip program's (host/compiler/transformer_program.cc).
inline constexpr float kErfP = 0.3275911f;
inline constexpr float kErfA[5] = {0.254829592f, -0.284496736f, 1.421413741f, -1.453152027f,
                                   1.061405429f};
inline constexpr float kInvRoot2 = 0.70710678118654752f;

// For each value of view layer l's output (a reshape, transpose or slice; one image), the
// index of its input's value it is.
std::vector<int64_t> ViewIndexMap(const Layer& l);

// erf(x) as the bfloat16 rule of gelu computes it in float32 (Abramowitz and Stegun 7.1.26 on
// the vector unit's operations).
uint32_t Bf16RuleErf(uint32_t x);

}  // namespace tpu::nn::ops
