// See readers.h.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "host/common/errors.h"
#include "host/import/onnx/onnx_graph.h"
#include "host/import/onnx/readers.h"

namespace tpu::import::onnx_graph {

namespace {

// scale, B, mean and var: one value per channel each.
std::vector<std::vector<float>> Parameters(OnnxGraph& g, const onnx::NodeProto& n, int64_t c) {
  std::vector<std::vector<float>> p;
  for (int i = 1; i <= 4; ++i) {
    const onnx::TensorProto* t = g.Constant(n, i);
    if (!t) g.FailNode(n, "needs scale, B, mean and var");
    p.push_back(g.Floats(n, *t));
    if (static_cast<int64_t>(p.back().size()) != c) {
      g.FailNode(n, "its parameters do not have one value per channel");
    }
  }
  return p;
}

// A batch_norm layer of its own (OnnxImportOptions::keep_batchnorm). ONNX's momentum weighs
// the running statistics (PyTorch exports 1 - its own), tpusim's the batch's, as PyTorch's.
Value KeptLayer(OnnxGraph& g, const onnx::NodeProto& n) {
  const Value& x = g.In(n, 0);
  std::vector<std::vector<float>> p = Parameters(g, n, x.shape.c);
  nn::Layer l;
  l.type = nn::LayerType::kBatchNorm;
  l.name = g.NextName("batch_norm");
  l.epsilon = g.FloatAttr(n, "epsilon", 1e-5f);
  l.momentum = 1.0f - g.FloatAttr(n, "momentum", 0.9f);
  const auto tensor = [](std::vector<float> v) {
    Tensor<float> t;
    t.shape = {static_cast<int64_t>(v.size())};
    t.data = std::move(v);
    return t;
  };
  l.weights = tensor(p[0]);
  l.bias = tensor(p[1]);
  l.state = {tensor(p[2]), tensor(p[3])};
  Value v = g.Add(n, std::move(l), {x.layer});
  v.map = x.map;
  v.chw = x.chw;
  return v;
}

}  // namespace

Value ReadBatchNorm(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {"epsilon", "momentum", "training_mode", "spatial"});
  // A training export (opset 14's training_mode = 1) is what --keep-batchnorm reads: PyTorch's
  // eval export folds a BatchNormalization after a Conv itself.
  if (g.options().keep_batchnorm) return KeptLayer(g, n);
  if (g.IntAttr(n, "training_mode", 0) != 0) {
    g.FailNode(n,
               "export the model in eval() mode, or import with --keep-batchnorm to train "
               "its batch normalization");
  }
  nn::Layer* joined = g.Joinable(n, /*weighted=*/true);
  if (!joined) {
    g.FailNode(n,
               "BatchNormalization must directly follow a Conv, Gemm or MatMul whose output "
               "nothing else reads, before any activation (tpusim folds it into its weights; "
               "import with --keep-batchnorm to train it)");
  }
  nn::Layer& l = *joined;
  const float eps = g.FloatAttr(n, "epsilon", 1e-5f);
  const std::vector<std::vector<float>> p = Parameters(g, n, l.out.c);
  for (size_t c = 0; c < p[3].size(); ++c) {
    if (!(p[3][c] + eps > 0)) g.FailNode(n, "a variance plus epsilon is not positive");
  }
  nn::FoldScaleShift(&l, p[0], p[1], p[2], p[3], eps);
  return g.In(n, 0);
}

}  // namespace tpu::import::onnx_graph
