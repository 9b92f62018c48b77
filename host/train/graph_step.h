// A graph's training step on the chip (issue 74): the model's layers in their order
// (convolutions of any kernel and padding, stride 1 or 2, depthwise or not; average and max
// pooling; residual adds; concatenations; flattens; batch normalizations in training mode,
// over a core's whole share, their running statistics in the state; dense layers, the first
// of an MLP reading the images, the last with softmax; ReLU, ReLU6 or none), each a pass of
// products through windows and tiles or of vector instructions, forward, loss, backward and update,
// as one program for each core of a bf16 chip, in the arithmetic of graph_reference.h's
// ReferenceGraphStep, bit for bit (docs/training.md, "Graphs"). Every layer's output and
// its gradient are kept for the whole batch in the unified buffer, a pixel a row (lanes its
// channels; a map of more than N channels in channel blocks of N, docs/training.md, "Channel
// blocks"), and a convolution's receptive fields F and a dense layer's input X with them;
// where a tensor is read by several layers, each later gradient goes through scratch rows
// and a vector add into its sum.
//
// As the CNN's step (conv_step.h), whose programs and host side it shares (step_shell.h):
// the float32 weights and the optimizer's state stay in the unified buffer between the
// steps; the host sends each batch (the images packed N pixels a buffer row, the labels) and
// reads the losses and logits back.
#pragma once

#include "host/config/tpu_config.h"
#include "host/nn/model.h"
#include "host/train/dense_step.h"

namespace tpu::train {

// The programs for `model` at `batch` images on `config`'s first `cores` cores (each a share
// of the batch, the weight gradients summed through HBM before the update), and their host
// side. Throws UsageError for an int8 chip, a layer the step does not take (naming it and
// what it takes), or a batch whose rows do not fit the unified buffer (naming the largest
// that does).
//
// Where the weights and the optimizer's state are kept between the steps (`at`): with kAny,
// in the unified buffer where they fit beside the fewest passes' maps, else in HBM, and
// where that does not fit either, with each layer's F (or X) in HBM too between its forward
// pass and its weight gradient, and where even that does not fit, the batch in one pass with
// every layer's output, gradient and F in HBM too, the buffer holding one layer's and its
// inputs' at a time (kHbmWithMaps); a model with batch normalization in one pass, where that
// fits with its state in the buffer, else in HBM, else with F, else with the maps; kBuffer,
// kHbm, kHbmWithF and kHbmWithMaps choose.
//
// A step of more instructions than `program_words` (a core's program region:
// engine::kMaxProgramWords) is compiled in parts of whole passes, run one after another
// (DensePrograms::parts).
enum class StateAt { kAny, kBuffer, kHbm, kHbmWithF, kHbmWithMaps };
CompiledStep CompileGraphStep(const nn::Model& model, int batch, const Optimizer& opt,
                              const config::TpuConfig& config, int cores = 1,
                              StateAt at = StateAt::kAny, size_t program_words = 0);

}  // namespace tpu::train
