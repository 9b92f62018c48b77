// The course material's CNN (nn::MakeLenet5, MakeWideCnn: conv 3 x 3 + ReLU, 2 x 2 average
// pooling, conv, pooling, dense layers) trained on the chip: a step's forward pass, loss,
// backward pass and update as one program for core 0 of a bf16 chip, in the arithmetic of
// convnet_reference.h's ReferenceGraphStep, bit for bit (docs/training.md, "The CNN's step on
// the chip"). A pixel a buffer row in raster order throughout, as the examples in
// examples/training/ lay it out: the receptive fields F formed by the window stage through
// the identity, a convolution F times its tile, the poolings and their gradients windows
// through a tile of four identities times 1/4, dWᵀ = dZᵀ F chunk by chunk, the input
// gradient a window through the flipped kernel built on the chip.
//
// As the perceptron's step (dense_step.h): the float32 weights and the optimizer's state
// stay in the unified buffer between the steps; the host sends each batch (the images,
// packed N pixels a buffer row, and the labels) and reads the losses and logits back.
#pragma once

#include <cstdint>
#include <vector>

#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"
#include "host/engine/executable.h"
#include "host/nn/model.h"
#include "host/train/convnet_reference.h"
#include "host/train/dense_net.h"
#include "host/train/dense_step.h"

namespace tpu::train {

// The programs (init, the steps of each batch buffer with and without the next batch read
// ahead, the fetch, save and grads) for `model` at `batch` images on core 0 of `config`, and
// their host side; ChipTrainer (dense_step.h) runs them. Throws UsageError for an int8
// chip, a model not of the CNN's shape, an array too narrow for its channels, or a batch
// whose rows do not fit the unified buffer (naming the largest that does).
// With `cores` 2, each of the chip's two cores runs the step on its half of the batch and
// the cores sum their weight gradients through HBM before the update (EmitGradientSum), the
// arithmetic of ReferenceGraphStep's `cores`.
CompiledStep CompileConvStep(const nn::Model& model, int batch, const Optimizer& opt,
                             const config::TpuConfig& config, int cores = 1);

}  // namespace tpu::train
