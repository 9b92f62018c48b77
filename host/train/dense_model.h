// Model folders (host/nn/model.h) as the chip's training compiler takes them, and an epoch
// of training on the chip over a data set.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>

#include "host/common/output_folder.h"
#include "host/data/mnist.h"
#include "host/nn/model.h"
#include "host/train/dense_reference.h"
#include "host/train/dense_step.h"
#include "host/train/graph_step.h"

namespace tpu::train {

// The perceptron of a model: an optional flatten, then dense layers, ReLU on all but the
// last (softmax or none). Throws UsageError naming the first layer that is not.
DenseNet DenseNetOf(const nn::Model& model);
// Its weighted layers' (dense and convolution) weights with the bias as the last row
// (dense_net.h), and back.
std::vector<std::vector<float>> DenseWeightsOf(const nn::Model& model);
// The tensors its layers keep (batch normalization's running statistics), in order.
std::vector<std::vector<float>> KeptOf(const nn::Model& model);
// A training's state before its first step: the model's weights and kept tensors, the
// optimizer's state zeros.
DenseState FreshState(const nn::Model& model, const Optimizer& opt);
// The state's weights (and kept tensors, where it has them) into the model.
void SetDenseWeights(const DenseState& state, nn::Model* model);

// What training on the chip needs of a model: the perceptron's compiler and CPU reference
// (dense_step.h, dense_reference.h), the CNN's (conv_step.h) or a graph's (graph_step.h),
// whose reference is graph_reference.h's.
struct TrainNet {
  enum class Kind { kPerceptron, kCnn, kGraph };
  nn::Model shape;  // the model (its weights are the state's)
  Kind kind = Kind::kPerceptron;
  DenseNet dense;                    // the perceptron's widths (empty for the others)
  StateAt state_at = StateAt::kAny;  // a graph's: where its state is (CompileGraphStep)
  int In() const { return static_cast<int>(shape.input.Size()); }  // values an image
  int Classes() const;
  std::vector<int64_t> Params() const;  // values of each weighted layer's parameters
  // `cores`: the cores of the chip the batch is split across (each a share).
  CompiledStep Compile(int batch, const Optimizer& opt, const config::TpuConfig& config,
                       int cores = 1) const;
  // `passes`: a graph's passes over each core's share (ReferenceGraphStep's).
  StepOut Reference(int n, const Optimizer& opt, const Batch& b, int batch, DenseState* state,
                    std::vector<std::vector<float>>* grads = nullptr, int cores = 1,
                    int passes = 1) const;
  nlohmann::json Describe() const;  // for a checkpoint's settings: the widths, or the layers
};
// A perceptron (DenseNetOf), the CNN (CheckConvNetShape) or another graph the chip trains
// (CheckGraphTrainable: its refusal names the layer and what it takes).
TrainNet TrainNetOf(const nn::Model& model);

struct ChipEpochOptions {
  int batch = 64;
  uint64_t seed = 1;    // the order of the images: as the CPU trainer's (host/nn/trainer.h)
  bool verify = false;  // the CPU reference beside every step, bit for bit
  // After every `report_every` steps and at the end: the fraction done, the mean loss and
  // the accuracy so far.
  std::function<void(double fraction, double loss, double accuracy)> progress;
  int report_every = 20;
  // After every `checkpoint_every` steps (0: never) but the epoch's last, with what is done.
  std::function<void(const struct ChipEpochResult& done)> checkpoint;
  int64_t checkpoint_every = 0;
  // After every step: the indices of its images in the set, and what it gave.
  std::function<void(const std::vector<int64_t>& images, const StepOut& out)> after_step;
};

// An epoch's steps so far and their sums.
struct ChipEpochResult {
  int64_t steps = 0, images = 0;
  double loss_sum = 0;        // the steps' mean losses, summed
  int64_t right = 0;          // images whose largest logit was their label's
  uint64_t cycles = 0;        // the steps' cycles on the chip
  double seconds = 0;         // wall time
  int64_t verified = 0;       // steps checked against the reference (0 without verify)
  hw::ChipCounters counters;  // the steps' counters on the chip, summed
  double Loss() const { return steps ? loss_sum / static_cast<double>(steps) : 0; }
  double Accuracy() const {
    return images ? static_cast<double>(right) / static_cast<double>(images) : 0;
  }
};

// The steps of one epoch on the chip: the images in the order the seed and `epoch` give, in
// full batches (a TPU's input pipeline drops the remainder: the chip's program has one batch
// size), from the step after `r`'s (r->steps steps done: a resumed epoch) to the last, their
// sums added to *r. With verify, `reference` (the state before those steps) steps beside
// the chip and a difference throws RuntimeError naming the step.
void TrainChipEpoch(ChipTrainer* chip, const TrainNet& net, const data::MnistSet& set, int epoch,
                    const ChipEpochOptions& options, DenseState* reference, ChipEpochResult* r);
// `tpusim train --gradients DIR`: for the run's first step, each dense layer's gradient
// (NAME.weights.npy, NAME.bias.npy, float32, as the model folder names them), its weights
// before the step (NAME.weights.initial.npy, NAME.bias.initial.npy), the mean loss
// (loss.npy) and the indices of the batch's images in the training set (indices.npy,
// int32), named in gradients.json; an output folder, written whole.
inline const OutputKind kGradientsFolder{"gradients folder", "gradients.json"};
void WriteGradients(const std::string& dir, const nn::Model& initial,
                    const std::vector<std::vector<float>>& grads, float loss,
                    const std::vector<int64_t>& images);

// The same epoch on the CPU reference alone (the cpu-bf16 row of tpusim compare --train):
// `state` steps as the chip's would, an n x n array's arithmetic.
void TrainReferenceEpoch(const TrainNet& net, int n, const Optimizer& opt,
                         const data::MnistSet& set, int epoch, const ChipEpochOptions& options,
                         DenseState* state, ChipEpochResult* r);

// Full batches in an epoch of `set`.
inline int64_t StepsOfEpoch(const data::MnistSet& set, int batch) { return set.count / batch; }

}  // namespace tpu::train
