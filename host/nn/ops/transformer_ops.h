// What a transformer's operations that compute in floating point share (matmul.cc,
// normalize.cc, gelu.cc): they run on the CPU in fp32; an int8 chip has no float unit and
// tpusim defines no int8 scheme for them, and their bfloat16 rules (the chip's) are not
// defined yet, so both refuse with a line saying so (docs/transformers.md).
#pragma once

#include "host/nn/ops/op.h"

namespace tpu::nn::ops {

// An operation of `type` named `name` whose int8 and bfloat16 slots refuse (UsageError
// naming the layer), of the graph-only model.json version, one input, no MACs.
OpDef FloatOnly(LayerType type, const char* name);

}  // namespace tpu::nn::ops
