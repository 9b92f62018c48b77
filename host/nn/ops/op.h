// The operations a model is made of, each defined in one file of this folder (conv2d.cc,
// dense.cc, pool.cc, flatten.cc, add.cc, concat.cc) and found through one table by its
// LayerType (op_table.cc): its name in model.json, the inputs it reads, its output shape,
// its multiply-accumulates, and its fp32 forward and backward passes. The code that walks a
// model (InferShapes, Forward, Backward, Summary) asks the table and names no operation.
// docs/developing.md, "Adding to it: checklists", says what a new operation adds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/nn/fp32_net.h"
#include "host/nn/model.h"

namespace tpu::nn::ops {

// What the backward pass of one layer works on, for a batch (one row per image).
struct BackwardStep {
  const MatrixF& x;        // its (first) input's activations
  const MatrixF& y;        // its output (after the activation)
  const MatrixF* cols;     // a convolution's im2col rows of x, kept by the forward pass
  const MatrixF& dy;       // the loss's gradient by its output before the activation (the
                           // activation's mask already applied)
  std::vector<float>* dw;  // its weights' gradient, added to (empty for layers without)
  std::vector<float>* db;  // its biases' gradient, added to
  MatrixF* dx;             // its input's gradient, written (null: not needed)
};

struct OpDef {
  LayerType type;
  const char* name;            // in model.json ("conv2d"; depthwise and global forms aside)
  int min_inputs, max_inputs;  // how many layers it reads (max -1: any number)
  bool takes_activation;       // relu, relu6 or softmax may follow it in the same layer
  // Completes l's output shape (and what derives from it: padding, a global window) from
  // its first input's, l->in, and the model's other inputs; throws UsageError naming
  // `where` when the shapes do not work out.
  void (*infer)(const Model& m, const std::string& where, Layer* l);
  // Multiply-accumulates per image (0: none).
  int64_t (*macs)(const Layer& l);
  // The fp32 forward pass over a batch: out (batch x l.out.Size()) from the inputs' rows;
  // `cols`, where not null, keeps a convolution's im2col rows for the backward pass.
  void (*forward)(const Layer& l, const std::vector<const MatrixF*>& xs, MatrixF* cols,
                  MatrixF* out);
  // The fp32 backward pass (null: the operation is not trained).
  void (*backward)(const Layer& l, const BackwardStep& s);
  // The int8 rule for one image (docs/quantization.md), one operation at a time: y
  // (l.out.Size() values, h x w x c) from the inputs' values, input k of channels[k]
  // channels. The scalar reference, which the Eigen backend, the CUDA one and the chip are
  // checked against.
  void (*int8)(const Layer& l, const std::vector<const int8_t*>& xs,
               const std::vector<int>& channels, int8_t* y);
  // Its quantization (docs/quantization.md): sets l's int8 form from its inputs' scales and
  // the largest |value| of its fp32 output over the calibration inputs; returns its output's
  // scale.
  float (*quantize)(Layer* l, const std::vector<float>& in_scales, float range);
};

// A conv layer's weights (kh x kw x c_in x c_out) or a dense layer's (in x out) as a
// fan-in x c_out matrix.
inline Eigen::Map<const MatrixF> WeightMatrix(const Layer& l) {
  return Eigen::Map<const MatrixF>(l.weights.data.data(), l.weights.Size() / l.out.c, l.out.c);
}

// The operation of type t.
const OpDef& Op(LayerType t);
// Every operation, in LayerType's order.
const std::vector<const OpDef*>& AllOps();

// An int8 rule that reads its input's first values as they are (flatten).
void CopyInt8(const Layer& l, const std::vector<const int8_t*>& xs,
              const std::vector<int>& channels, int8_t* y);

// A quantization that keeps the input's scale and sets no int8 form (pooling, flatten).
float KeepScale(Layer* l, const std::vector<float>& in_scales, float range);

// Each file's definition (the table lists them).
const OpDef& Conv2dOp();
const OpDef& DenseOp();
const OpDef& AvgPoolOp();
const OpDef& MaxPoolOp();
const OpDef& FlattenOp();
const OpDef& AddOp();
const OpDef& ConcatOp();

}  // namespace tpu::nn::ops
