// See readers.h.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "host/common/errors.h"
#include "host/import/onnx/onnx_graph.h"
#include "host/import/onnx/readers.h"

namespace tpu::import::onnx_graph {
namespace {

Value AddBias(OnnxGraph& g, const onnx::NodeProto& n, int constant_input) {
  const int data_input = 1 - constant_input;
  nn::Layer* l = WeightedBefore(g, n, data_input);
  if (!l) {
    g.FailNode(n,
               "an Add of a constant must directly follow a Conv, Gemm or MatMul whose "
               "output nothing else reads (tpusim adds it to that layer's bias)");
  }
  const onnx::TensorProto* t = g.Constant(n, constant_input);
  const std::vector<float> b = g.Floats(n, *t);
  if (static_cast<int64_t>(b.size()) != l->out.c) {
    g.FailNode(n, fmt::format("adds {} values to {} output channels; tpusim imports Add of a "
                              "constant as a per-channel bias",
                              b.size(), l->out.c));
  }
  for (size_t c = 0; c < b.size(); ++c) l->bias.data[c] += b[c];
  return g.In(n, data_input);
}

}  // namespace

// Add: a bias (one input a constant) joins the layer before it; two activations make a
// residual add.
Value ReadAdd(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {});
  if (n.input_size() != 2) g.FailNode(n, "Add takes two inputs");
  if (auto v = IntsNode(g, n)) return *v;
  if (auto v = AddInChain(g, n)) return *v;
  if (g.IsConstant(n, 0) || g.IsConstant(n, 1)) {
    const int c = g.IsConstant(n, 1) ? 1 : 0;
    if (IsTensor(g.Raw(n, 1 - c)) && !WeightedBefore(g, n, 1 - c))
      return TensorAddConstant(g, n, c);
    return AddBias(g, n, c);
  }
  if (IsTensor(g.Raw(n, 0)) || IsTensor(g.Raw(n, 1)))
    return TensorJoin(g, n, nn::LayerType::kAdd, "add");
  return JoinOfOneShape(g, n, nn::LayerType::kAdd, "add", "adds a {b} to a {a}", "adds");
}

}  // namespace tpu::import::onnx_graph
