// See readers.h.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "host/common/errors.h"
#include "host/import/onnx/onnx_graph.h"
#include "host/import/onnx/readers.h"

namespace tpu::import::onnx_graph {

Value ReadBatchNorm(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {"epsilon", "momentum", "training_mode", "spatial"});
  if (g.IntAttr(n, "training_mode", 0) != 0) g.FailNode(n, "export the model in eval() mode");
  nn::Layer* joined = g.Joinable(n, /*weighted=*/true);
  if (!joined) {
    g.FailNode(n,
               "BatchNormalization must directly follow a Conv, Gemm or MatMul whose output "
               "nothing else reads, before any activation (tpusim folds it into its weights)");
  }
  nn::Layer& l = *joined;
  const float eps = g.FloatAttr(n, "epsilon", 1e-5f);
  std::vector<std::vector<float>> p;
  for (int i = 1; i <= 4; ++i) {
    const onnx::TensorProto* t = g.Constant(n, i);
    if (!t) g.FailNode(n, "needs scale, B, mean and var");
    p.push_back(g.Floats(n, *t));
    if (static_cast<int64_t>(p.back().size()) != l.out.c) {
      g.FailNode(n, "its parameters do not have one value per channel");
    }
  }
  const int64_t cout = l.out.c, rows = l.weights.Size() / cout;
  for (int64_t c = 0; c < cout; ++c) {
    const auto ci = static_cast<size_t>(c);
    if (!(p[3][ci] + eps > 0)) g.FailNode(n, "a variance plus epsilon is not positive");
    const double s = p[0][ci] / std::sqrt(double{p[3][ci]} + eps);
    for (int64_t r = 0; r < rows; ++r) {
      float& w = l.weights.data[static_cast<size_t>(r * cout + c)];
      w = static_cast<float>(w * s);
    }
    l.bias.data[ci] = static_cast<float>((l.bias.data[ci] - p[2][ci]) * s + p[1][ci]);
  }
  return g.In(n, 0);
}

}  // namespace tpu::import::onnx_graph
