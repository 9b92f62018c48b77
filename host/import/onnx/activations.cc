// See readers.h.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "host/common/errors.h"
#include "host/import/onnx/onnx_graph.h"
#include "host/import/onnx/readers.h"

namespace tpu::import::onnx_graph {
namespace {

// An activation joins the layer before it (Joinable), or the convolution before a max
// pooling.
Value Activate(OnnxGraph& g, const onnx::NodeProto& n, nn::Activation a) {
  if (nn::Layer* l = g.Joinable(n, /*weighted=*/false)) {
    l->activation = a;
    return g.In(n, 0);
  }
  // ReLU and ReLU6 are monotonic, so after a max pooling they equal the same activation
  // before it: Conv -> MaxPool -> Relu becomes a conv with ReLU, then the pooling.
  const Value& x = g.In(n, 0);
  if (x.layer != nn::kModelInput && g.Uses(n.input(0)) == 1) {
    const nn::Layer& pool = g.model().layers[static_cast<size_t>(x.layer)];
    if (pool.type == nn::LayerType::kMaxPool2d && pool.inputs[0] != nn::kModelInput) {
      nn::Layer& before = g.model().layers[static_cast<size_t>(pool.inputs[0])];
      const std::vector<std::vector<int>> readers = g.model().Consumers();
      if (LinearInWeights(before) && before.activation == nn::Activation::kNone &&
          readers[static_cast<size_t>(pool.inputs[0])].size() == 1) {
        before.activation = a;
        return x;
      }
    }
  }
  g.FailNode(n, n.op_type() +
                    " must follow a Conv, Gemm, MatMul or a residual Add whose output nothing "
                    "else reads (tpusim applies it in that layer), or a MaxPool of one");
}
// Sigmoid and Tanh: a layer of their own (the vector unit's tables, on int8 chips), of the
// value's shape.
Value Table(OnnxGraph& g, const onnx::NodeProto& n, nn::LayerType type, const char* prefix) {
  g.OnlyAttrs(n, {});
  const Value x = g.In(n, 0);
  nn::Layer l;
  l.type = type;
  l.name = g.NextName(prefix);
  Value v = g.Add(n, std::move(l), {x.layer});
  v.map = x.map;
  v.chw = x.chw;
  return v;
}

}  // namespace

Value ReadSigmoid(OnnxGraph& g, const onnx::NodeProto& n) {
  return Table(g, n, nn::LayerType::kSigmoid, "sigmoid");
}

Value ReadTanh(OnnxGraph& g, const onnx::NodeProto& n) {
  return Table(g, n, nn::LayerType::kTanh, "tanh");
}

Value ReadRelu(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {});
  return Activate(g, n, nn::Activation::kRelu);
}

Value ReadClip(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {"min", "max"});
  float lo = g.FloatAttr(n, "min", -INFINITY), hi = g.FloatAttr(n, "max", INFINITY);
  if (const onnx::TensorProto* t = g.Constant(n, 1)) {
    const auto v = g.Floats(n, *t);
    if (v.size() != 1) g.FailNode(n, "min must be a scalar");
    lo = v[0];
  }
  if (const onnx::TensorProto* t = g.Constant(n, 2)) {
    const auto v = g.Floats(n, *t);
    if (v.size() != 1) g.FailNode(n, "max must be a scalar");
    hi = v[0];
  }
  if (lo == 0.0f && hi == 6.0f) return Activate(g, n, nn::Activation::kRelu6);
  if (lo == 0.0f && std::isinf(hi)) return Activate(g, n, nn::Activation::kRelu);
  g.FailNode(
      n, fmt::format("Clip({}, {}): tpusim imports Clip(0, 6) (ReLU6) and Clip(0) (ReLU)", lo, hi));
}

Value ReadSoftmax(OnnxGraph& g, const onnx::NodeProto& n) {
  if (auto v = SoftmaxOfTensor(g, n)) return *v;
  nn::Layer* l = g.Joinable(n, /*weighted=*/true);
  if (!l || l->type != nn::LayerType::kDense || g.Uses(n.output(0)) != 1 ||
      g.In(n, 0).layer != static_cast<int>(g.model().layers.size()) - 1) {
    g.FailNode(n,
               "only a final Softmax/LogSoftmax after a dense layer (Gemm/MatMul) is "
               "supported");
  }
  l->activation = nn::Activation::kSoftmax;
  return g.In(n, 0);
}

}  // namespace tpu::import::onnx_graph
