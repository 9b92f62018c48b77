// Each operation's lowering to chip operations (docs/compiler.md, "Whole networks"), one
// file each, called by Lowering::Layer for the layer's type; flatten lowers to nothing (its
// output is its input's rows).
#pragma once

#include "host/nn/model.h"

namespace tpu::compiler::lower {

class Lowering;

// A conv or dense layer (or an average pooling as its convolution), with the 2 x 2 pooling
// or the add that only reads it fused into its activate (weighted.cc).
void LowerWeighted(Lowering& lw, int i, const nn::Layer& l);
// Max pooling: for each tap, the window stage reads that tap's tile of every pixel
// (channels = the whole T x N-byte pixel, so each K-tile is one tap's tile), and the
// accumulators keep the maximum (matmul max) through the identity tile (max_pool.cc).
void LowerMaxPool(Lowering& lw, int i);
// An add of two tensors that no single layer's activate can take: the first through the
// identity tile, the second as the residual (add.cc).
void LowerAdd(Lowering& lw, int i);
// A concatenation of channels: each output tile gathers the lanes of the input tiles it
// holds through tiles that move lanes (weights 1), and the VPU requantizes each lane with
// its input's multiplier and shift (concat.cc).
void LowerConcat(Lowering& lw, int i);

}  // namespace tpu::compiler::lower
