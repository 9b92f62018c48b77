// See readers.h.
#include <fmt/format.h>

#include <vector>

#include "host/common/errors.h"
#include "host/import/onnx/onnx_graph.h"
#include "host/import/onnx/readers.h"

namespace tpu::import::onnx_graph {
namespace {

// A Mul of a constant (one value, or one per output channel) scales the weights and bias of
// the layer before it: (W x + b) s = (W s) x + b s, exactly what the fp32 network computes.
Value Scale(OnnxGraph& g, const onnx::NodeProto& n, int constant_input) {
  const int data_input = 1 - constant_input;
  nn::Layer* l = WeightedBefore(g, n, data_input);
  if (!l) {
    g.FailNode(n,
               "a Mul of a constant must directly follow a Conv, Gemm or MatMul whose output "
               "nothing else reads (tpusim scales that layer's weights and bias); tpusim "
               "multiplies two activations of one shape otherwise");
  }
  const std::vector<float> s = g.Floats(n, *g.Constant(n, constant_input));
  const int64_t c = l->out.c;
  if (s.size() != 1 && static_cast<int64_t>(s.size()) != c) {
    g.FailNode(n, fmt::format("multiplies by {} values a layer of {} output channels; tpusim "
                              "imports a Mul of one value or one per output channel",
                              s.size(), c));
  }
  const auto of = [&](int64_t channel) { return s.size() == 1 ? s[0] : s[channel]; };
  for (size_t i = 0; i < l->weights.data.size(); ++i)
    l->weights.data[i] *= of(static_cast<int64_t>(i) % c);  // the output channel is last
  for (int64_t k = 0; k < c; ++k) l->bias.data[k] *= of(k);
  return g.In(n, data_input);
}

}  // namespace

// Mul: a scale (one input a constant) joins the layer before it; two activations of one
// shape make an elementwise product (no broadcast).
Value ReadMul(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {});
  if (n.input_size() != 2) g.FailNode(n, "Mul takes two inputs");
  if (auto v = IntsNode(g, n)) return *v;
  if (auto v = MulInChain(g, n)) return *v;
  if (g.IsConstant(n, 0) || g.IsConstant(n, 1)) return Scale(g, n, g.IsConstant(n, 1) ? 1 : 0);
  if (IsTensor(g.Raw(n, 0)) || IsTensor(g.Raw(n, 1)))
    return TensorJoin(g, n, nn::LayerType::kMul, "mul");
  return JoinOfOneShape(g, n, nn::LayerType::kMul, "mul", "multiplies a {a} by a {b}",
                        "multiplies");
}

}  // namespace tpu::import::onnx_graph
