// A neural network as tpusim stores it: a list of conv / pool / flatten / dense layers
// with fp32 tensors and, once quantized, their int8 versions. On disk: model.json plus one
// NumPy .npy file per tensor (docs/model-format.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/common/npy.h"

namespace tpu::nn {

enum class LayerType { kConv2d, kAvgPool2d, kMaxPool2d, kFlatten, kDense };
enum class Activation { kNone, kRelu, kSoftmax };

// Activations are height x width x channels (channels last); a vector is 1 x 1 x n.
struct Shape3 {
  int h = 1, w = 1, c = 1;
  int64_t Size() const { return int64_t{h} * w * c; }
  bool operator==(const Shape3& o) const { return h == o.h && w == o.w && c == o.c; }
};

// The int8 form of a conv or dense layer (docs/quantization.md):
// acc = sum(q_in * q_w) + q_bias (int32);
// q_out = clamp((acc * multiplier[c] + 2^(shift[c]-1)) >> shift[c]) (int64 arithmetic).
struct QuantizedLayer {
  float input_scale = 0;             // real = scale * q for the layer's int8 input
  float output_scale = 0;            // and for its int8 output
  std::vector<float> weight_scales;  // per output channel
  Tensor<int8_t> weights;            // same shape as the fp32 weights
  Tensor<int32_t> bias;              // per output channel
  std::vector<int32_t> multiplier;   // per output channel, in [2^30, 2^31) (0: output 0)
  std::vector<int32_t> shift;        // per output channel, in [1, 62]
};

struct Layer {
  std::string name;
  LayerType type = LayerType::kDense;
  Shape3 in, out;
  // conv2d: kernel and stride; padding "valid" or "same" (pad_top/pad_left derived).
  int kernel_h = 1, kernel_w = 1, stride = 1;
  std::string padding = "valid";
  int pad_top = 0, pad_left = 0;
  // pooling: size x size windows, stride = size.
  int pool = 2;
  Activation activation = Activation::kNone;
  Tensor<float> weights;  // conv: kh x kw x c_in x c_out; dense: in x out
  Tensor<float> bias;     // c_out
  bool quantized = false;
  QuantizedLayer q;

  bool HasWeights() const { return type == LayerType::kConv2d || type == LayerType::kDense; }
  int64_t ParamCount() const;
};

struct Model {
  std::string name;
  Shape3 input;
  // How to turn a raw image into the input: "mnist32" = 28 x 28 bytes padded to 32 x 32,
  // x = pixel / 255 (fp32) and q = (pixel * 127 + 127) / 255 with scale 1/127 (int8).
  std::string preprocess = "mnist32";
  // The data set it was trained on (host/data/mnist.h): "mnist" or "fashion-mnist".
  std::string dataset = "mnist";
  std::vector<Layer> layers;
  bool quantized = false;
  float input_scale = 1.0f / 127.0f;

  int64_t ParamCount() const;
};

// The LeNet-5-like MNIST CNN (81,194 parameters), with weights drawn from the seeded
// Glorot-uniform initialiser (biases zero).
Model MakeLenet5(uint64_t seed);
// A wider CNN of the same shape for harder data (Fashion-MNIST): 3 x 3 convolutions of 16
// and 32 filters, each followed by 2 x 2 pooling, a dense layer of 128 and the 10 outputs.
Model MakeWideCnn(uint64_t seed);

// Completes a layer list from layer types and hyperparameters: each layer's in/out shape
// and padding. Throws UsageError naming the layer when shapes do not work out.
void InferShapes(Model* model);

// Loads DIR/model.json and its tensors; checks every tensor's shape against the layer.
// Throws UsageError naming the file and what is wrong.
Model LoadModel(const std::string& dir);
// Writes the model into DIR (created; files replaced one by one, each atomically).
void SaveModel(const Model& model, const std::string& dir);

// The per-layer table of `tpusim model --summary`.
std::string Summary(const Model& model);

const char* LayerTypeName(LayerType t);
const char* ActivationName(Activation a);

}  // namespace tpu::nn
