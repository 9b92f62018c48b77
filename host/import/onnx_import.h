// Importing an fp32 ONNX model as a tpusim model (docs/import.md).
//
// The graph is read with Debian's ONNX library (libonnx-dev: the protobuf classes of
// onnx.proto). It is a directed acyclic graph of supported operators from one image input
// to one output: Conv (groups 1 or depthwise), Gemm, MatMul (+ Add as bias), Add of two
// activations (residual), Concat of channels, Relu, Clip(0, 6), MaxPool, AveragePool
// (with padding), GlobalAveragePool, Flatten/Reshape before a dense layer,
// BatchNormalization after a Conv/Gemm (folded into its weights); Dropout and Identity pass
// through and a final Softmax/LogSoftmax marks the last layer. An activation, bias or
// BatchNorm joins the layer before it when nothing else reads that layer's output. NCHW
// tensors become
// tpusim's channels-last layout here, once: conv weights O x I x kh x kw become
// kh x kw x I x O, and the rows of a dense layer that follows a flatten of a C x H x W map
// are reordered from (c, h, w) to (h, w, c).
#pragma once

#include <string>

#include "host/nn/model.h"

namespace tpu::import {

struct OnnxImportOptions {
  std::string name;  // model name (default: the file's stem)
  // What it classifies (recorded in model.json): mnist or fashion-mnist (a 1 x 32 x 32
  // input, preprocess mnist32), none (float inputs), or empty: mnist for a 1 x 32 x 32 input,
  // none for any other.
  std::string dataset;
  // BatchNormalization as a batch_norm layer of its own, to train (batch statistics in
  // training); else folded into the Conv or Gemm before it, for inference.
  bool keep_batchnorm = false;
  // A 3-axis input is T x N x X (time first: PyTorch's transformer layers with
  // batch_first=False), not N x T x X. An LSTM that reads the input tells it by itself.
  bool time_first = false;
};

// Reads `path` and returns the equivalent fp32 tpusim model (shapes inferred and checked).
// Throws UsageError naming the file, and the node and operator where one is the cause, with
// what to do, for anything it cannot represent exactly.
nn::Model ImportOnnx(const std::string& path, const OnnxImportOptions& options);
// The same from the bytes of a file (`path` only names it in messages).
nn::Model ImportOnnxBytes(const std::string& bytes, const std::string& path,
                          const OnnxImportOptions& options);

}  // namespace tpu::import
