// The CPU reference of a training step on the chip (docs/training.md, "The arithmetic"):
// the same arithmetic as the chip's programs (dense_step.h), written over whole tensors
// rather than instructions, from the primitives of arith/ (the array's column sums, the
// activation unit's rounding, the vector unit's float32 operations). The chip's state after
// every step equals it bit for bit (tests/train/dense_step_test.cc).
#pragma once

#include "host/train/dense_net.h"

namespace tpu::train {

// One step on `state` (updated in place, its step count too) with the batch `b` of
// `batch` images, on a chip whose array is n x n; each layer's weight gradient (bfloat16
// values, shaped as its parameters) into *grads where given. With `cores`, the step split
// across that many cores in equal shares in order, as they compute it: each share's
// gradients (over the whole batch's mean), summed as the cores sum them (chip::CoreSum),
// then the update; the losses' means in core order (StepOut::OfCores).
StepOut ReferenceStep(const DenseNet& net, int n, const Optimizer& opt, const Batch& b, int batch,
                      DenseState* state, std::vector<std::vector<float>>* grads = nullptr,
                      int cores = 1);

// The float32 scalars of the step t (from 1) that the host computes and sends with the
// batch, Adam's lr / (1 - beta1^t) and 1 / sqrt(1 - beta2^t), computed in double and
// rounded once; SGD has none.
struct StepScalars {
  float c1 = 0, c2 = 0;
};
StepScalars ScalarsOfStep(const Optimizer& opt, int64_t t);

// The constant scalars of the update, each rounded to float32 once: SGD: momentum, lr;
// Adam: beta1, 1 - beta1, beta2, 1 - beta2, eps. And 1 / batch.
std::vector<float> UpdateConstants(const Optimizer& opt);
float InverseBatch(int batch);

// The optimizer's update of one layer's float32 parameters w and its optimizer state (SGD:
// the velocity; Adam: m and v) from the bfloat16 gradient g (as values of w's shape), in the
// vector unit's float32 arithmetic; consts: UpdateConstants, k: the step's scalars.
void UpdateParams(const Optimizer& opt, const std::vector<float>& consts, StepScalars k,
                  const std::vector<uint16_t>& g, std::vector<float>* w,
                  std::vector<std::vector<float>*> slot);

}  // namespace tpu::train
