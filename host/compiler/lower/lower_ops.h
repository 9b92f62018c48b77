// Each operation's lowering to chip operations (docs/compiler.md, "Whole networks"), one
// file each, called by Lowering::Layer for the layer's type through the table ops.def
// makes: LowerName(lw, i) for each operation of host/nn/ops/ops.def.
#pragma once

#include "host/compiler/graph_lowering.h"
#include "host/nn/model.h"

namespace tpu::compiler::lower {

class Lowering;

// Layer i of each operation (a layer fused into another's operation lowers to nothing),
// in the operation's file of this folder (weighted.cc holds the conv, dense and average
// pooling; flatten lowers to nothing: its output is its input's rows, lowering.cc).
#define TPUSIM_OP(N) void Lower##N(Lowering& lw, int i);
#include "host/nn/ops/ops.def"
#undef TPUSIM_OP

// A conv or dense layer (or an average pooling as its convolution), with the 2 x 2 pooling
// or the add that only reads it fused into its activate (weighted.cc).
void LowerWeighted(Lowering& lw, int i, const nn::Layer& l);
// Max pooling: for each tap, the window stage reads that tap's tile of every pixel
// (channels = the whole T x N-byte pixel, so each K-tile is one tap's tile), and the
// accumulators keep the maximum (matmul max) through the identity tile (max_pool.cc).
// An add of two tensors that no single layer's activate can take: on an int8 chip the first
// through the identity tile, the second as the residual; on a bf16 chip on the vector unit
// (LowerVectorAdd), not with ReLU6 (add.cc).
// Layer i's two inputs joined value by value through the residual stage: the first through
// the identity tile, the second as the residual the activate adds (or, with `product`,
// multiplies by); `kind` and `verbs` name it where it reads the model's input ("add",
// "adds"). An add and a product (add.cc, mul.cc).
void LowerResidualJoin(Lowering& lw, int i, bool product, const char* kind, const char* verbs);
// Whether join i (an add, a product: `kind`, what it `verbs`) reads the model's packed input,
// which the chip cannot join: then the lowering ends saying so.
bool JoinReadsTheInput(Lowering& lw, int i, const char* kind, const char* verbs);
// A bf16 chip's add that runs in no convolution's activate: on the vector unit (kVector).
void LowerVectorAdd(Lowering& lw, int i);
// op's terms: each output tile of `in` through the identity tile, in place (one row per
// pixel): a value-by-value operation, its rows, tiles and MACs (the residual joins, the
// tables).
void IdentityPass(Lowering& lw, const GraphTensor& in, GraphOp* op);
// A concatenation of channels: each output tile gathers the lanes of the input tiles it
// holds through tiles that move lanes (weights 1), and the VPU requantizes each lane with
// its input's multiplier and shift (concat.cc).

}  // namespace tpu::compiler::lower
