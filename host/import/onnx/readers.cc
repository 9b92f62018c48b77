// The table of ONNX operators tpusim imports (readers.h), and the two that pass their
// input through.
#include "host/import/onnx/readers.h"

#include <vector>

namespace tpu::import::onnx_graph {
namespace {

// Dropout (in eval mode) and Identity: the value they read.
Value ReadPassThrough(OnnxGraph& g, const onnx::NodeProto& n) {
  if (n.op_type() == "Dropout" && n.input_size() > 2 && !n.input(2).empty()) {
    const onnx::TensorProto* training = g.Constant(n, 2);  // a bool
    bool on = training->raw_data().find_first_not_of('\0') != std::string::npos;
    for (int v : training->int32_data()) on |= v != 0;
    if (on) g.FailNode(n, "dropout in training mode; export the model in eval() mode");
  }
  return g.In(n, 0);
}

const std::vector<Reader>& Readers() {
  static const std::vector<Reader> readers = {
      {"Conv", ReadConv, "Conv (groups 1 or depthwise)"},
      {"Gemm", ReadGemm, "Gemm"},
      {"MatMul", ReadGemm, "MatMul"},
      {"Add", ReadAdd, "Add (a bias, or two activations: a residual add)"},
      {"Concat", ReadConcat, "Concat (of channels)"},
      {"Relu", ReadRelu, "Relu"},
      {"Clip", ReadClip, "Clip(0, 6)"},
      {"MaxPool", ReadPool, "MaxPool"},
      {"AveragePool", ReadPool, "AveragePool"},
      {"GlobalAveragePool", ReadGlobalPool, "GlobalAveragePool"},
      {"Flatten", ReadFlatten, "Flatten"},
      {"Reshape", ReadFlatten, "Reshape (to [batch, features])"},
      {"BatchNormalization", ReadBatchNorm, "BatchNormalization (after Conv/Gemm)"},
      {"Dropout", ReadPassThrough, "Dropout"},
      {"Identity", ReadPassThrough, "Identity"},
      {"Pad", ReadPad, "Pad (zeros, read by a Conv or AveragePool)"},
      {"Softmax", ReadSoftmax, "a final Softmax/LogSoftmax"},
      {"LogSoftmax", ReadSoftmax, "a final Softmax/LogSoftmax"},
  };
  return readers;
}

}  // namespace

const Reader* ReaderOf(const std::string& op_type) {
  for (const Reader& r : Readers())
    if (op_type == r.op_type) return &r;
  return nullptr;
}

const std::string& Supported() {
  static const std::string text = [] {
    std::vector<std::string> items;
    for (const Reader& r : Readers())
      if (items.empty() || items.back() != r.what) items.emplace_back(r.what);
    std::string s;
    for (size_t i = 0; i < items.size(); ++i)
      s += (i == 0 ? "" : i + 1 == items.size() ? ", and " : ", ") + items[i];
    return s;
  }();
  return text;
}

}  // namespace tpu::import::onnx_graph
