// fp32 training of a model on MNIST: mini-batch Adam on the softmax cross-entropy, data
// parallel over threads, deterministic for a given seed and thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "host/data/mnist.h"
#include "host/nn/fp32_net.h"
#include "host/nn/model.h"

namespace tpu::nn {

struct TrainOptions {
  int epochs = 8;
  int batch = 64;
  float learning_rate = 1e-3f;  // Adam, beta1 0.9, beta2 0.999, epsilon 1e-7 (Keras defaults)
  uint64_t seed = 1;            // shuffling (weights are initialised by MakeLenet5(seed))
  int threads = 2;
  // Called after every `report_every` batches and at the end of each epoch.
  std::function<void(int epoch, double fraction, double loss, double accuracy)> progress;
  int report_every = 50;
  // After every `checkpoint_every` batches (0: never) but the epoch's last, with the epoch's
  // sums so far (the model and the AdamState are then those after that many batches).
  std::function<void(const struct EpochSums& done)> checkpoint;
  int64_t checkpoint_every = 0;
};

// An epoch's batches so far and their sums: where a resumed epoch goes on from.
struct EpochSums {
  int64_t batches = 0, seen = 0, right = 0;
  double loss_sum = 0;  // the images' losses, summed
  double seconds = 0;   // wall time
};

struct EpochResult {
  int epoch = 0;
  double loss = 0;            // mean training loss
  double train_accuracy = 0;  // on the training batches as they were seen
  double seconds = 0;         // wall time of the epoch
};

// The order of the images in epoch `epoch` (from 1) for `seed`: every trainer's (the CPU's,
// the chip's), so that they see the same batches.
std::vector<int64_t> EpochOrder(int64_t count, uint64_t seed, int epoch);

// One epoch of training. `epoch` (from 1) seeds the shuffle together with options.seed. With
// `done`, the epoch goes on after its done->batches batches (a resumed run's: the model and
// `state` as they were after them), their sums added into *done; the result is the whole
// epoch's. The same model, state and sums give the same weights, bit for bit, whether the
// epoch ran whole or in parts.
EpochResult TrainEpoch(Model* model, const data::MnistSet& train, int epoch,
                       const TrainOptions& options, struct AdamState* state,
                       EpochSums* done = nullptr);

// Adam's moments and step count, kept across epochs.
struct AdamState {
  int64_t step = 0;
  std::vector<std::vector<float>> m_w, m_b, v_w, v_b;
  static AdamState For(const Model& m);
};

// The gradients of the first step of epoch 1 (the first `options.batch` images of its order,
// from the weights as they are), computed over the whole batch at once; the loss into *loss
// and the images' indices into *images.
ParamSet FirstStepGradients(const Model& model, const data::MnistSet& train,
                            const TrainOptions& options, double* loss,
                            std::vector<int64_t>* images);

// fp32 accuracy on a set, data parallel over `threads`.
double EvaluateFp32(const Model& model, const data::MnistSet& set, int threads);

}  // namespace tpu::nn
