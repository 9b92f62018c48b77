// See readers.h.
#include "host/common/errors.h"
#include "host/import/onnx/onnx_graph.h"
#include "host/import/onnx/readers.h"

namespace tpu::import::onnx_graph {

// Mul of two activations of one shape: an elementwise product (no broadcast, no constant).
Value ReadMul(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {});
  if (n.input_size() != 2) g.FailNode(n, "Mul takes two inputs");
  if (g.IsConstant(n, 0) || g.IsConstant(n, 1)) {
    g.FailNode(n,
               "multiplies by a constant; tpusim multiplies two activations of one shape (fold "
               "a constant factor into the layer before it when exporting)");
  }
  return JoinOfOneShape(g, n, nn::LayerType::kMul, "mul", "multiplies a {a} by a {b}",
                        "multiplies");
}

}  // namespace tpu::import::onnx_graph
