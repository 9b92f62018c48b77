// The chip's arithmetic of a training step of a graph (issue 74): any order of convolutions
// (any kernel and padding, stride 1 or 2, ReLU, ReLU6 or none, depthwise or not: a depthwise
// one's gradient is +0 off its expanded kernels' diagonal), average poolings (global or any
// window, stride 1 or 2), max poolings, residual adds (ReLU, ReLU6 or none), concatenations,
// batch normalizations in training mode (on the vector unit: docs/training.md, "Batch
// normalization on the chip"), flattens and dense layers,
// the last a dense layer with softmax, each layer reading any earlier ones. Built from the
// pieces of conv_reference.h and step_arith.h as the CNN's reference is: every product the
// array's, every result the activation unit's rounding, the loss the vector unit's. Where a
// tensor is read by several layers, its gradient is their gradients summed on the vector
// unit, each sum rounded to bfloat16 (chip::CoreSum), in the order the backward pass gives
// them (the reader latest in the model first). docs/training.md, "Graphs", specifies each
// operation; the course material's CNN is one such graph (ReferenceConvNetGradients is this
// reference on it), and both its compiled step and a graph's meet this reference bit for bit
// (conv_step_test.cc, graph_step_test.cc).
#pragma once

#include "host/nn/model.h"
#include "host/train/convnet_reference.h"
#include "host/train/dense_net.h"

namespace tpu::train {

// Whether the gradient of layer l, a global average pooling of a map of channel blocks (or
// of N channels) in one window of at most 15 x 15 pixels, on an array of n x n, is each
// image's pooled gradient through one tap's tile (the identity times bf16(1/(h w))), once,
// copied to every pixel of its map (docs/training.md, "Channel blocks"), rather than a
// window over the pooled map padded to the map's size, whose every tap but one reads padding.
bool PoolGradientIsCopied(const nn::Layer& l, int n);

// Throws UsageError naming the first layer of `model` that the chip's graph training does
// not take, and what it takes.
void CheckGraphTrainable(const nn::Model& model);

// One step's gradients (the mean over the batch) of `model` for the images of `b` (batch x
// h x w x c values, each rounded to bfloat16 as the chip receives it) on an array of n x n,
// as ReferenceConvNetGradients gives them: each weighted layer's, the losses, their mean and
// the logits, and where each ReLU passed its value on. With `total`, these are one core's
// share of a batch of `total` images, whose mean the loss's gradient takes.
ConvNetGradients ReferenceGraphGradients(const nn::Model& model, const Batch& b, int batch, int n,
                                         int total = 0);

// The gradients of a step whose batch is split across `cores` cores in equal shares in
// order, as they compute them: each share's (over the whole batch's mean), then summed as
// the cores sum them (chip::CoreSum, the losses' means in core order: StepOut::OfCores).
// With `passes`, each core takes its share in that many passes of equal parts in order, and
// sums their gradients as it goes (chip::CoreSum, the first pass's and the second's, that
// and the third's, ...) before the cores' sum; a core's mean loss is its losses' sum, row
// after row, over its whole share.
ConvNetGradients CoreGradients(const nn::Model& model, const Batch& b, int batch, int n, int cores,
                               int passes = 1);

// One training step of the graph of `shape`'s layers with the weights of `state` (its
// weighted layers in order, dense_net.h's layout; updated in place with the optimizer's
// state and its step count), as dense_reference.h's ReferenceStep is for a perceptron:
// the gradients above, then dense_reference.h's UpdateParams of every layer. Each layer's
// gradient (bfloat16 values, shaped as its parameters) into *grads where given. With
// `cores`, the step split across that many cores, and with `passes` each core's share in
// that many passes (CoreGradients). The CNN's step and a graph's (conv_step.h,
// graph_step.h) meet it bit for bit.
StepOut ReferenceGraphStep(const nn::Model& shape, int n, const Optimizer& opt, const Batch& b,
                           int batch, DenseState* state,
                           std::vector<std::vector<float>>* grads = nullptr, int cores = 1,
                           int passes = 1);

}  // namespace tpu::train
