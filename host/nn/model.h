// A neural network as tpusim stores it: a directed acyclic graph of conv / pool / flatten /
// dense / add / concat layers, listed in an order where every layer comes after the layers
// it reads, with fp32 tensors and, once quantized, their int8 versions. On disk: model.json
// plus one NumPy .npy file per tensor (docs/model-format.md).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "host/common/npy.h"
#include "host/common/output_folder.h"

namespace tpu::nn {

// The operations of host/nn/ops/ops.def, kName for each TPUSIM_OP(Name) there.
enum class LayerType {
#define TPUSIM_OP(N) k##N,
#include "host/nn/ops/ops.def"
#undef TPUSIM_OP
};
enum class Activation { kNone, kRelu, kRelu6, kSoftmax };

// Whether the int8 form clamps at zero. ReLU6 too: the quantizer gives a ReLU6 layer an
// output scale of at most 6 / 127, so its int8 upper bound 6 lies at or beyond 127 and the
// int8 clamp [0, 127] is ReLU6 exactly (docs/quantization.md).
inline bool ClampsAtZero(Activation a) { return a == Activation::kRelu || a == Activation::kRelu6; }

// Activations are height x width x channels (channels last); a vector is 1 x 1 x n.
struct Shape3 {
  int h = 1, w = 1, c = 1;
  int64_t Size() const { return int64_t{h} * w * c; }
  bool operator==(const Shape3& o) const { return h == o.h && w == o.w && c == o.c; }
};

// The int8 form of a layer (docs/quantization.md). A conv or dense layer:
// acc = sum(q_in * q_w) + q_bias (int32);
// q_out = clamp((acc * multiplier[c] + 2^(shift[c]-1)) >> shift[c]) (int64 arithmetic).
// An add: q_out = clamp((q_a * multiplier[0] + q_b * multiplier[1] + 2^(shift[0]-1)) >>
// shift[0]). A concat: channel c of input i becomes Requantize(q, multiplier[i], shift[i]).
struct QuantizedLayer {
  float input_scale = 0;             // real = scale * q for the layer's (first) int8 input
  float output_scale = 0;            // and for its int8 output
  std::vector<float> input_scales;   // add, concat: the scale of each input
  std::vector<float> weight_scales;  // per output channel
  Tensor<int8_t> weights;            // same shape as the fp32 weights
  Tensor<int32_t> bias;              // per output channel
  // Conv, dense: per output channel, in [2^30, 2^31) (0: output 0); add, concat: per input.
  std::vector<int32_t> multiplier;
  std::vector<int32_t> shift;  // conv, dense: per output channel; add: one; concat: per input
  // An LSTM's cell (docs/quantization.md, "LSTM cells"): the int8 scale of its state c, and
  // the multiplier and shift of f c, i g, c' to the tanh table's input and o tanh(c'), in
  // that order.
  float cell_scale = 0;
  std::vector<int32_t> cell_multiplier, cell_shift;
};

struct Layer {
  std::string name;
  LayerType type = LayerType::kDense;
  // The layers whose outputs it reads, by index in Model::layers (kModelInput: the model's
  // input); empty until InferShapes, which makes it {the layer before} for a chain. Add
  // reads two, concat two or more (their channels one after another), the rest one.
  std::vector<int> inputs;
  Shape3 in, out;  // in: the (first) input's shape
  // conv2d: kernel and stride; padding "valid", "same" (pads derived) or "explicit"
  // (pads given per side).
  int kernel_h = 1, kernel_w = 1, stride = 1;
  std::string padding = "valid";
  int pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  // A depthwise conv2d: output channel c reads only input channel c. Stored on disk as
  // "depthwise_conv2d" with kh x kw x c x 1 kernels; in memory as the equivalent conv2d,
  // its kernels expanded to kh x kw x c x c with zeros off the diagonal (ExpandDepthwise),
  // so every backend, the quantizer and the compiler run it as a convolution, exactly.
  bool depthwise = false;
  // pooling: pool_h x pool_w windows every pool_stride pixels, with the padding above
  // (pad_*; max pooling pads with -infinity, average pooling with zeros that count in the
  // average, as PyTorch's count_include_pad); global_pool: one window of the whole map
  // (pool_h, pool_w set from the input).
  int pool_h = 2, pool_w = 2, pool_stride = 2;
  bool global_pool = false;
  Activation activation = Activation::kNone;  // conv2d, dense and add
  Tensor<float> weights;                      // conv: kh x kw x c_in x c_out; dense: in x out
  Tensor<float> bias;                         // c_out
  // What a layer keeps beside its weights, one tensor per name of its operation's
  // OpDef::state (batch normalization: its running mean and variance), each of its
  // columns' values; saved with the weights, not trained by the gradient.
  std::vector<Tensor<float>> state;
  // Batch normalization: the epsilon added to the variance, and the weight of a batch's
  // statistics in the running ones (PyTorch's momentum).
  float epsilon = 1e-5f, momentum = 0.1f;
  // A transformer's tensors (host/nn/ops/views.cc, matmul.cc): a transpose's output axis k
  // is its input's axis perm[k] (0 h, 1 w, 2 c); a slice takes values [start, end) of its
  // input's axis `axis`; a matmul multiplies its first input by its second (transposed, with
  // transpose_b), times `scale`; a prepend puts `start` rows of its weights before its
  // input's; an embedding's vocabulary is `start`. A layer_norm's epsilon is `epsilon`.
  std::array<int, 3> perm = {0, 1, 2};
  int axis = 2, start = 0, end = 0;
  bool transpose_b = false;
  float scale = 1.0f;
  bool quantized = false;
  QuantizedLayer q;

  // Whether it has weights and a bias (its operation's weight_shape: conv2d, dense).
  bool HasWeights() const;
  bool IsPool() const { return type == LayerType::kAvgPool2d || type == LayerType::kMaxPool2d; }
  bool Padded() const { return pad_top || pad_left || pad_bottom || pad_right; }
  // The name of its type in model.json ("depthwise_conv2d", "global_avgpool2d", ...).
  std::string TypeName() const;
  int64_t ParamCount() const;
  // Multiply-accumulates per image of a conv or dense layer (a depthwise one without the
  // zeros of its expanded kernels); 0 for the rest.
  int64_t Macs() const;
};

// Layer::inputs entry for the model's input.
inline constexpr int kModelInput = -1;

struct Model {
  std::string name;
  Shape3 input;
  // How the input is given: "mnist32" = 28 x 28 bytes padded to 32 x 32, x = pixel / 255
  // (fp32) and q = (pixel * 127 + 127) / 255 with scale 1/127 (int8); "none" = float
  // values as the exported model takes them (tpusim run --inputs FILE.npy), quantized with
  // the calibrated input_scale (docs/quantization.md).
  std::string preprocess = "mnist32";
  // The data set it was trained on (host/data/mnist.h): "mnist", "fashion-mnist", or
  // "none" (inputs come from --inputs or --synthetic).
  std::string dataset = "mnist";
  std::vector<Layer> layers;  // every layer after the layers it reads; the last is the output
  bool quantized = false;
  float input_scale = 1.0f / 127.0f;

  int64_t ParamCount() const;
  // Whether some layer reads anything but the layer before it (residual adds, concats).
  bool IsGraph() const;
  // The shape of what `input` (a layer index, or kModelInput) produces.
  const Shape3& OutputOf(int input) const {
    return input == kModelInput ? this->input : layers[static_cast<size_t>(input)].out;
  }
  // For each layer, the layers that read its output (kModelInput's readers last).
  std::vector<std::vector<int>> Consumers() const;
};

// Whether the chip pools layer `pool` in the vector unit, fused into the activate of the
// convolution it reads (host/compiler/graph_lowering.cc; nn::Bf16Net follows it): a 2 x 2
// pooling of stride 2 without padding whose input is a convolution nothing else reads.
// `consumers` is model.Consumers().
bool FusedPool(const Model& model, const std::vector<std::vector<int>>& consumers, size_t pool);

// The LeNet-5-like MNIST CNN (81,194 parameters), with weights drawn from the seeded
// Glorot-uniform initialiser (biases zero).
// Throws UsageError for a model without int8 weights, naming the command that makes them
// and ending with `note`.
void RequireQuantized(const Model& model, const std::string& note = "");

Model MakeLenet5(uint64_t seed);
// A wider CNN of the same shape for harder data (Fashion-MNIST): 3 x 3 convolutions of 16
// and 32 filters, each followed by 2 x 2 pooling, a dense layer of 128 and the 10 outputs.
Model MakeWideCnn(uint64_t seed);
// A perceptron for the chip's training compiler (host/train/): the 32 x 32 input flattened,
// a ReLU dense layer of 256 and the 10 outputs (264,970 parameters).
Model MakeMlp(uint64_t seed);
// A small residual network (a graph: issue 74's graph training): a 3 x 3 "same" convolution
// of 16 filters, stride 2, with ReLU (16 x 16), a residual block (two 3 x 3 "same"
// convolutions of 16, ReLU after the first, the second's output added to the block's input
// through a ReLU), 2 x 2 average pooling, a second block, global average pooling and the 10
// softmax outputs (9,610 parameters).
Model MakeResidualCnn(uint64_t seed);
// The model that --arch names: "lenet5", "wide", "mlp" or "residual"; throws UsageError for
// another.
Model MakeArch(const std::string& arch, uint64_t seed);

// Completes a layer list from layer types and hyperparameters: each layer's inputs (the
// layer before, where not given), in/out shape and padding. Throws UsageError naming the
// layer when shapes do not work out or an input is not an earlier layer.
void InferShapes(Model* model);

// Loads DIR/model.json and its tensors; checks every tensor's shape against the layer.
// Throws UsageError naming the file and what is wrong.
Model LoadModel(const std::string& dir);
// A model folder to OutputFolder: model.json names every other file in it.
inline const OutputKind kModelFolder{"model folder", "model.json"};
// Writes the model as the folder DIR, whole or not at all (OutputFolder): DIR may be new,
// empty or a previous model folder; a folder holding anything else is refused
// (UsageError) and nothing in it is touched.
void SaveModel(const Model& model, const std::string& dir);

// The per-layer table of `tpusim model --summary`.
std::string Summary(const Model& model);

const char* LayerTypeName(LayerType t);

// A depthwise kernel kh x kw x c x 1 as the equivalent convolution's kh x kw x c x c (zeros
// off the diagonal), and back (the diagonal).
template <typename T>
Tensor<T> ExpandDepthwise(const Tensor<T>& k) {
  const int64_t taps = k.shape[0] * k.shape[1], c = k.shape[2];
  Tensor<T> e;
  e.shape = {k.shape[0], k.shape[1], c, c};
  e.data.assign(static_cast<size_t>(taps * c * c), T{});
  for (int64_t t = 0; t < taps; ++t)
    for (int64_t i = 0; i < c; ++i)
      e.data[static_cast<size_t>((t * c + i) * c + i)] = k.data[static_cast<size_t>(t * c + i)];
  return e;
}
template <typename T>
Tensor<T> CompactDepthwise(const Tensor<T>& e) {
  const int64_t taps = e.shape[0] * e.shape[1], c = e.shape[2];
  Tensor<T> k;
  k.shape = {e.shape[0], e.shape[1], c, 1};
  k.data.resize(static_cast<size_t>(taps * c));
  for (int64_t t = 0; t < taps; ++t)
    for (int64_t i = 0; i < c; ++i)
      k.data[static_cast<size_t>(t * c + i)] = e.data[static_cast<size_t>((t * c + i) * c + i)];
  return k;
}
const char* ActivationName(Activation a);

// A weighted layer's weights and bias times gamma / sqrt(var + eps) per output channel, the
// bias first less the mean, then plus beta: a batch normalization after it, in inference.
void FoldScaleShift(Layer* l, const std::vector<float>& gamma, const std::vector<float>& beta,
                    const std::vector<float>& mean, const std::vector<float>& var, float eps);
// Folds every batch_norm layer into the convolution or dense layer it reads, over its
// running statistics (FoldScaleShift), the layer taking its activation; returns how many.
// Throws UsageError naming the first that reads anything else (or a layer with an
// activation, or one that others read too).
int FoldBatchNorms(Model* m);

}  // namespace tpu::nn
