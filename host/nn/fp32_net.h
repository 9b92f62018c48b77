// The fp32 network on Eigen: batched forward (im2col + GEMM for convolutions) and
// backpropagation of the softmax cross-entropy loss, for training and the cpu-fp32 backend.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <vector>

#include "host/nn/model.h"

namespace tpu::nn {

// One row per image; columns are the activation in h, w, c order (channels last).
using MatrixF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Gradients (or any per-parameter quantity) laid out like the layers' weights and biases.
struct ParamSet {
  std::vector<std::vector<float>> w, b;  // per layer; empty for layers without weights
  static ParamSet ZerosLike(const Model& m);
  void SetZero();
  void Add(const ParamSet& o);
};

// What the forward pass keeps for the backward pass.
struct ForwardCache {
  std::vector<MatrixF> acts;  // acts[0] = input, acts[i + 1] = output of layer i
  std::vector<MatrixF> cols;  // im2col matrices of conv layers (empty for others)
  bool keep_cols = true;      // false for inference: nothing needs them after the layer
  // Training mode: batch normalization over the batch's statistics (OpDef::train_forward),
  // kept in `cols`; else over its running ones.
  bool training = false;
};

// Images (uint8, h x w x c each, `count` of them) to the fp32 input: pixel / 255.
MatrixF Fp32Input(const uint8_t* pixels, int64_t count, const Shape3& shape);

// Runs the network; the last layer's softmax (if any) is applied, so acts.back() holds
// probabilities.
void Forward(const Model& m, const MatrixF& x, ForwardCache* cache);

// Mean softmax cross-entropy over the batch for the labels; adds its gradient with
// respect to every weight and bias into `grads`. Needs a last layer with softmax.
double Backward(const Model& m, const ForwardCache& cache, const uint8_t* labels, ParamSet* grads);

// Whether a training step must see its whole batch at once (a layer normalizes over the
// batch's statistics), so that the batch is not split across threads.
bool TrainsByBatch(const Model& m);
// Each layer's state (Layer::state: batch normalization's running statistics) from what a
// training forward pass over one batch kept.
void UpdateState(Model* m, const ForwardCache& cache);

// Index of the largest value in each row.
std::vector<int> ArgMax(const MatrixF& probabilities);

}  // namespace tpu::nn
