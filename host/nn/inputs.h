// What a model runs on: a set of inputs (test images with labels, an .npy file of the
// exact tensors an exported model takes, or seeded synthetic ones), and each input as the
// fp32 values the fp32 network takes and the int8 values the int8 network and the chip take
// (docs/quantization.md, "The input").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/common/npy.h"
#include "host/data/mnist.h"
#include "host/nn/im2col.h"
#include "host/nn/model.h"

namespace tpu::nn {

struct InputSet {
  Shape3 shape;  // one input, h x w x c
  int64_t count = 0;
  // One of the two, count x shape.Size() each, h x w x c per input:
  std::vector<uint8_t> pixels;  // raw images of a preprocess-mnist32 model
  std::vector<float> values;    // float values (preprocess none)
  std::vector<uint8_t> labels;  // the class of each input; empty: none known
  // For reports, after a count: "test images", "inputs in x.npy", "synthetic inputs (seed 1)".
  std::string source;

  bool HasLabels() const { return !labels.empty(); }
};

// The fp32 network's input rows [first, first + count): pixel / 255, or the values.
RowMatrix<float> Fp32Inputs(const InputSet& inputs, int64_t first, int64_t count);
// The int8 input rows: QuantizePixel of each pixel, or QuantizeInput(value,
// model.input_scale) (the model must be quantized).
RowMatrix<int8_t> Int8Inputs(const Model& model, const InputSet& inputs, int64_t first,
                             int64_t count);
// For a quantized model's float inputs: one sentence when some lie far outside the range
// its input scale was calibrated for (beyond twice 127 x the scale, where clipping takes
// more than half of a value away): how many, the largest, and what the chip does with them.
// Empty otherwise (pixels always fit).
std::string InputRangeWarning(const Model& model, const InputSet& inputs);

// The first `limit` images of a data set (0: all), labelled, each of `shape` (the padded
// 32 x 32 x 1 of MNIST and Fashion-MNIST, or a test's own images).
InputSet InputsFromMnist(const data::MnistSet& set, int64_t limit = 0,
                         const Shape3& shape = {data::kPaddedSide, data::kPaddedSide, 1});

// An .npy file of float32 N x C x H x W: exactly what the exported model takes (NCHW),
// stored h x w x c; for a model whose input is 1 x T x X (an imported LSTM's sequences of T
// steps of X values), N x T x X also. For a preprocess-mnist32 model the values must be pixel / 255
// (as the ONNX model took them) and are stored as the pixels. Throws UsageError naming the file and
// both shapes when they do not match the model's input, and for anything else wrong.
InputSet ReadInputsNpy(const std::string& path, const Model& model);
// The same for a tensor already in memory (a NumPy array from Python); `where` names it in
// the messages. The source is left for the caller to say.
InputSet InputsFromTensor(const Tensor<float>& t, const Model& model, const std::string& where);

// The data set a model runs on: `flag` (--dataset; must agree with the model's), or, empty,
// the one the model was trained on. Throws UsageError.
data::Dataset DatasetFor(const std::string& flag, const Model& model);
// The first `limit` test images (0: all) of that data set, from `data_dir` or the usual
// places (data::FindDatasetDir). Throws UsageError for a model without a data set.
data::MnistSet LoadTestSet(const Model& model, const std::string& dataset,
                           const std::string& data_dir, int64_t limit);

// `count` seeded inputs for a model without a data set (docs/quantization.md, "Synthetic
// inputs"): each value an independent standard normal from Box-Muller over the top 53 bits
// of std::mt19937_64's words; for a preprocess-mnist32 model, uniform pixels in 0..255
// inside the 28 x 28 image and zero in the border. The same seed gives the same inputs
// everywhere. No labels.
InputSet SyntheticInputs(const Model& model, int64_t count, uint64_t seed);

// The slice [first, first + count) of a set (--shard).
InputSet SliceInputs(const InputSet& inputs, int64_t first, int64_t count);

}  // namespace tpu::nn
