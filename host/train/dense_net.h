// Training a perceptron on the chip (docs/training.md): the network, its state and a step's
// data, shared by the chip's programs (dense_step.h) and the CPU reference of the same
// arithmetic (dense_reference.h).
//
// A perceptron of L dense layers: widths[0] inputs, widths[l] units after layer l, ReLU
// between the layers, the softmax cross-entropy after the last (widths.back() classes).
// Each layer's bias is a row of its weights, multiplied by a constant 1 among its inputs
// (input lane widths[l]), so a layer's parameters are one (widths[l] + 1) x widths[l + 1]
// float32 matrix, the last row the bias; its gradient is that row's, the batch's sum of dY.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpu::train {

// SGD with momentum (PyTorch's: no dampening, not Nesterov) or Adam (PyTorch's
// formulation, with the CPU trainer's defaults: lr 0.001, beta1 0.9, beta2 0.999, eps
// 1e-7). The scalars are rounded to float32 once, from double (docs/training.md).
struct Optimizer {
  enum class Kind { kSgd, kAdam };
  Kind kind = Kind::kAdam;
  double lr = 1e-3;
  double momentum = 0.875;            // SGD
  double beta1 = 0.9, beta2 = 0.999;  // Adam
  double eps = 1e-7;                  // Adam
  // The tensors of optimizer state per weight tensor: 1 (SGD's velocity) or 2 (Adam's m, s).
  int Slots() const { return kind == Kind::kSgd ? 1 : 2; }
  // "sgd" or "adam"; Parse throws UsageError for anything else.
  std::string Name() const { return kind == Kind::kSgd ? "sgd" : "adam"; }
  static Optimizer Parse(const std::string& name, double lr);
};

struct DenseNet {
  std::vector<int> widths;  // at least two: inputs, ..., classes
  int Layers() const { return static_cast<int>(widths.size()) - 1; }
  int In(int l) const { return widths[static_cast<size_t>(l)]; }
  int Out(int l) const { return widths[static_cast<size_t>(l) + 1]; }
  int Classes() const { return widths.back(); }
  // Values of layer l's parameter matrix: (In(l) + 1) x Out(l).
  int64_t Params(int l) const { return int64_t{In(l) + 1} * Out(l); }
};

// What persists between steps: each layer's float32 parameters (row-major, the bias last)
// and the optimizer's state in the same shape (slots[s][l]), and the steps taken.
struct DenseState {
  std::vector<std::vector<float>> w;
  std::vector<std::vector<std::vector<float>>> slots;
  int64_t step = 0;
  // What the layers keep beyond their parameters (batch normalization's running mean and
  // variance), each tensor in the model's order.
  std::vector<std::vector<float>> kept;
  // Zeros for the optimizer, `w` as given.
  static DenseState Fresh(std::vector<std::vector<float>> w, const Optimizer& opt);
  bool operator==(const DenseState& o) const;
};

// One step's data: `batch` images of widths[0] values each (bfloat16 values, row-major) and
// their labels.
struct Batch {
  std::vector<float> x;
  std::vector<uint8_t> labels;
  // Images [first, first + count) of it: one core's share of a step split across cores.
  Batch Share(int64_t first, int64_t count) const;
};

// What a step gives back: each image's loss, their mean (as the chip computes them) and the
// logits (batch x classes, bfloat16 values).
struct StepOut {
  std::vector<float> loss;
  float mean = 0;
  std::vector<float> logits;
  bool operator==(const StepOut& o) const;
  // The results of the cores of a step split across them, in core order, as the host puts
  // them together: the losses and logits one after the other, the mean the sum of the
  // cores' (each core's is its share's losses over the whole batch), in float32.
  static StepOut OfCores(const std::vector<StepOut>& cores);
};

// Throws UsageError unless the net and batch fit one core of an N-lane bf16 chip: at least
// one layer, every width at least 1, at most N classes, a batch of at least 1 (the
// accumulators and the buffer bound it: CompileDense).
void CheckDense(const DenseNet& net, int batch, int n);

}  // namespace tpu::train
