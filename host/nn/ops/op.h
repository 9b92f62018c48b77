// The operations a model is made of, each defined in one file of this folder (ops.def
// lists them; pool.cc holds both poolings) and found through one table by its
// LayerType (op_table.cc): its name and fields in model.json, the inputs it reads, its
// output shape, its weights, its multiply-accumulates, its fp32 forward and backward passes,
// its int8 and bfloat16 reference rules and its quantization. The code that walks a model
// (LoadModel, SaveModel, InferShapes, Forward, Backward, the references, Quantize, Summary)
// asks the table and names no operation. docs/developing.md, "Adding to it: checklists",
// says what a new operation adds.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "host/nn/fp32_net.h"
#include "host/nn/model.h"

namespace tpu::nn::ops {

// What the backward pass of one layer works on, for a batch (one row per image).
struct BackwardStep {
  const std::vector<const MatrixF*>& xs;  // each input's activations
  const MatrixF& y;                       // its output (after the activation)
  const MatrixF* cols;     // a convolution's im2col rows of its input, kept by the forward pass
  const MatrixF& dy;       // the loss's gradient by its output before the activation (the
                           // activation's mask already applied)
  std::vector<float>* dw;  // its weights' gradient, added to (empty for layers without)
  std::vector<float>* db;  // its biases' gradient, added to
  const std::vector<MatrixF*>& dx;  // each input's gradient, written (null: not needed)
  const MatrixF& x() const { return *xs[0]; }
};

// A layer as the bfloat16 reference runs it (bf16_net.h), prepared once per model.
struct Bf16Layer {
  const Layer* layer = nullptr;
  int array_dim = 0;   // the chip's N: the array adds in N-row tiles of K
  bool fused = false;  // a 2 x 2 pooling the chip fuses into the convolution before it
  // The convolution a layer runs as on the chip where it is not one (an average pooling
  // that is not fused); the weights below are its.
  std::optional<Layer> conv;
  std::vector<uint16_t> weights;  // K x c_out, bfloat16 (layers that multiply on the array)
  std::vector<uint32_t> bias;     // float32 bit patterns
  const Layer& Multiplied() const { return conv ? *conv : *layer; }
};

using Bf16Values = std::vector<uint16_t>;

struct OpDef {
  LayerType type = LayerType::kDense;
  const char* name = "";               // in model.json ("conv2d"; depthwise, global aside)
  int min_inputs = 1, max_inputs = 1;  // how many layers it reads (max -1: any number)
  bool takes_activation = false;       // relu, relu6 or softmax may follow it in the layer
  // Its fields in model.json beyond name, type, inputs and activation: read (throwing
  // UsageError naming `where`) and written. Null: it has none.
  void (*read)(const nlohmann::json& lj, const std::string& where, Layer* l) = nullptr;
  void (*write)(const Layer& l, nlohmann::json* lj) = nullptr;
  // The model.json version a layer of it needs (null: 1, which knows chains of
  // convolutions, dense layers, unpadded pooling and flatten).
  int (*version)(const Layer& l) = nullptr;
  // The shape of its fp32 weights on disk (null: it has no weights); its bias has
  // l.out.c values. Those are a weighted layer's tensors, whose int8 forms a quantized
  // model keeps (model.h, QuantizedLayer).
  std::vector<int64_t> (*weight_shape)(const Layer& l) = nullptr;
  // The columns of a weighted operation's bias, weight scales and requantization (null: its
  // output channels, l.out.c; an LSTM's 4H gate columns). WeightColumns asks it.
  int64_t (*columns)(const Layer& l) = nullptr;
  // The largest |value| of a state it keeps, over a batch of fp32 inputs x (one row each)
  // (null: it keeps none; an LSTM's cell c over its steps): calibrated with the outputs
  // (quantize.cc) into q.cell_scale (range / 127) before the layer's quantization.
  float (*state_range)(const Layer& l, const MatrixF& x) = nullptr;
  // A quantized model's "int8" section of a layer without weights (an add's or a concat's
  // multipliers), or what a weighted layer's adds to it (an LSTM's cell): read and written.
  // Null: none.
  void (*read_int8)(const nlohmann::json& qj, const std::string& where, Layer* l) = nullptr;
  void (*write_int8)(const Layer& l, nlohmann::json* qj) = nullptr;
  // Completes l's output shape (and what derives from it: padding, a global window) from
  // its first input's, l->in, and the model's other inputs; throws UsageError naming
  // `where` when the shapes do not work out.
  void (*infer)(const Model& m, const std::string& where, Layer* l) = nullptr;
  // Multiply-accumulates per image (0: none).
  int64_t (*macs)(const Layer& l) = nullptr;
  // The fp32 forward pass over a batch: out (batch x l.out.Size()) from the inputs' rows;
  // `cols`, where not null, keeps a convolution's im2col rows for the backward pass.
  void (*forward)(const Layer& l, const std::vector<const MatrixF*>& xs, MatrixF* cols,
                  MatrixF* out) = nullptr;
  // The fp32 forward pass of training, where it differs from `forward` (null: it does
  // not): batch normalization's, over the batch's own statistics, which it keeps in `kept`
  // for the backward pass (BackwardStep::cols) and `update_state`. A model with one is
  // trained a whole batch at a time (nn::TrainsByBatch).
  void (*train_forward)(const Layer& l, const std::vector<const MatrixF*>& xs, MatrixF* kept,
                        MatrixF* out) = nullptr;
  // Layer::state's names (null-terminated; null: it keeps none) and their update from what
  // a training forward pass kept (nn::UpdateState, after each step).
  const char* const* state = nullptr;
  void (*update_state)(Layer* l, const MatrixF& kept) = nullptr;
  // The fp32 backward pass (null: the operation is not trained).
  void (*backward)(const Layer& l, const BackwardStep& s) = nullptr;
  // The int8 rule for one image (docs/quantization.md), one operation at a time: y
  // (l.out.Size() values, h x w x c) from the inputs' values, input k of channels[k]
  // channels. The scalar reference, which the Eigen backend, the CUDA one and the chip are
  // checked against.
  void (*int8)(const Layer& l, const std::vector<const int8_t*>& xs,
               const std::vector<int>& channels, int8_t* y) = nullptr;
  // Its quantization (docs/quantization.md): sets l's int8 form from its inputs' scales and
  // the largest |value| of its fp32 output over the calibration inputs; returns its output's
  // scale.
  float (*quantize)(Layer* l, const std::vector<float>& in_scales, float range) = nullptr;
  // The bfloat16 rule (docs/bf16.md, "Networks"), as the chip computes it: a layer
  // prepared once (null: its weights, if any, rounded to bfloat16 and its bias to
  // canonical float32 by Bf16Net; else what it adds, throwing UsageError for what the chip
  // cannot run), then each image's output from its inputs' values.
  void (*bf16_prepare)(Bf16Layer* p) = nullptr;
  Bf16Values (*bf16)(const Bf16Layer& p, const std::vector<const Bf16Values*>& xs) = nullptr;
};

// A conv layer's weights (kh x kw x c_in x c_out) or a dense layer's (in x out) as a
// fan-in x c_out matrix.
inline Eigen::Map<const MatrixF> WeightMatrix(const Layer& l) {
  return Eigen::Map<const MatrixF>(l.weights.data.data(), l.weights.Size() / l.out.c, l.out.c);
}

// The operation of type t.
const OpDef& Op(LayerType t);
// The columns of weighted layer l's bias and requantization (OpDef::columns).
int64_t WeightColumns(const Layer& l);
// Every operation, in LayerType's order.
const std::vector<const OpDef*>& AllOps();

// An int8 rule that reads its input's first values as they are (flatten).
void CopyInt8(const Layer& l, const std::vector<const int8_t*>& xs,
              const std::vector<int>& channels, int8_t* y);

// A quantization that keeps the input's scale and sets no int8 form (pooling, flatten).
float KeepScale(Layer* l, const std::vector<float>& in_scales, float range);

// An elementwise join of two maps (add, mul): relu, relu6 or no activation; its second
// input of its first's shape, else UsageError naming `where` with `text` ({a}: the first
// input's h x w x c, {b}: the second's); its output of that shape.
void InferOneShape(const Model& m, const std::string& where, Layer* l, const char* kind,
                   const char* text);
// A join's int8 rule: each pair of values through the vector unit's residual stage
// (arith::Int8Format::Residual: an add with the layer's two multipliers, or with `product` a
// product with its first; one shift; ReLU where the activation clamps at zero).
void ResidualInt8(const Layer& l, const std::vector<const int8_t*>& xs, bool product, int8_t* y);
// A join's output scale, calibrated like a layer's output: range / 127 (an empty range:
// ReLU6's 6 / 127, else 1).
float JoinOutputScale(const Layer& l, float range);

// "padding": [top, left, bottom, right] of a convolution or a pooling layer.
void ReadExplicitPadding(const nlohmann::json& pad, const std::string& where, Layer* l);

// j[key], a list of n numbers (float or int32_t), or UsageError naming `where`.
template <typename T>
std::vector<T> VectorOf(const nlohmann::json& j, const std::string& key, size_t n,
                        const std::string& where);

// The "int8" section of an add (one shift) or a concat (a shift per input): each input's
// scale and multiplier, the output's scale.
void ReadJoinInt8(const nlohmann::json& qj, const std::string& where, size_t shifts, Layer* l);
// The section of an operation with one shift (an add, a mul, a table: a multiplier per
// input, one shift).
void ReadOneShiftInt8(const nlohmann::json& qj, const std::string& where, Layer* l);
// The model.json version of an operation that only graphs have (2).
int GraphVersion(const Layer& l);
// The multiply-accumulates of an operation that does none (pooling, flatten, joins, tables).
int64_t NoMacs(const Layer& l);
// The slots two maps of one shape joined value by value share (add, mul): two inputs, an
// activation may follow, the graph-only version, the one-shift int8 section, no MACs.
OpDef ValueJoin(LayerType type, const char* name);
void WriteJoinInt8(const Layer& l, nlohmann::json* qj);

// The bfloat16 rules that several operations share (bf16_rules.cc): a layer's input in
// im2col order times its bfloat16 weights on the array (adding in N-row tiles of K), then
// the vector unit's float32 bias add, activation and rounding (conv2d, dense, average
// pooling run as a convolution); the rounding of a value passing a tile of ones and zeros.
Bf16Values Bf16Multiplied(const Bf16Layer& p, const std::vector<const Bf16Values*>& xs);
uint16_t Bf16ThroughArray(uint16_t x);
// The weights and bias of p.Multiplied(), rounded (the default preparation).
void Bf16RoundWeights(Bf16Layer* p);

// Why a chip does not run batch_norm layer l, and the command that folds it.
std::string BatchNormOnChip(const Layer& l);

// Each file's definition (ops.def lists them: Conv2dOp(), AvgPool2dOp(), ...).
#define TPUSIM_OP(N) const OpDef& N##Op();
#include "host/nn/ops/ops.def"
#undef TPUSIM_OP

}  // namespace tpu::nn::ops
