// The forward and backward pass of the course material's CNN (nn::MakeLenet5, and
// MakeWideCnn of the same shape: conv 3 x 3 + ReLU, 2 x 2 average pooling, conv 3 x 3 +
// ReLU, pooling, dense layers) in the chip's arithmetic: the graph reference's
// (graph_reference.h), of which the CNN is one graph: every product the array's, every
// result the activation unit's rounding to bfloat16, the loss the vector unit's. A pixel a row in
// raster order throughout; a convolution is its receptive fields F (the bias's 1 in the
// lane after them) times its weights; the flatten is (y, x, c), as nn's fp32 network has
// it; the second pooling takes rows and columns 0 to 2 (h / 2) - 1 of its map, as nn's
// does. It is the reference a compiled convolutional step is to meet; its gradients are
// checked against the same network in plain arithmetic through the same ReLU pattern
// (tests/host/train/convnet_reference_test.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "host/nn/model.h"
#include "host/train/dense_net.h"

namespace tpu::train {

struct ConvNetGradients {
  std::vector<float> loss;               // each image's
  float mean = 0;                        // their mean, as the vector unit sums them
  std::vector<float> logits;             // batch x classes, bfloat16 values
  std::vector<std::vector<float>> w, b;  // per layer of the model, laid out as its weights
  // Per layer of the model, for those with a ReLU (the convolutions, the hidden dense
  // layers; empty for the rest): where it passed its value on (1), gave 0 (0) or, ReLU6,
  // gave 6 (2), each output value in the order of the layer's output.
  std::vector<std::vector<uint8_t>> relu_on;
  // Per layer, for the max poolings (empty for the rest): the tap (ky kw + kx) that took each
  // output value's gradient, -1 where none did (a NaN maximum), in the order of the output.
  std::vector<std::vector<int32_t>> max_tap;
  // Per layer, for the batch normalizations (empty for the rest): the batch's mean and
  // biased variance of each channel (float32 bits; where cores sum their gradients, the
  // first core's, whose running statistics the model keeps).
  std::vector<std::vector<uint32_t>> bn_mean, bn_var;
};

// Throws UsageError for a model not of this shape, naming the shape it takes.
void CheckConvNetShape(const nn::Model& model);

// One step's gradients (the mean over the batch) of `model` for `batch` images of uint8
// pixels (h x w x 1 each, scaled by 1/255) and their labels, on an array of n x n.
// Throws UsageError for a model not of this shape.
ConvNetGradients ReferenceConvNetGradients(const nn::Model& model, const uint8_t* pixels,
                                           const uint8_t* labels, int batch, int n);
// The same for images given as values (b.x: batch x h x w, each rounded to bfloat16 as the
// chip receives it); with `total`, these are one core's share of a batch of `total` images,
// whose mean the loss's gradient takes (1 / total).
ConvNetGradients ReferenceConvNetGradients(const nn::Model& model, const Batch& b, int batch, int n,
                                           int total = 0);
}  // namespace tpu::train
