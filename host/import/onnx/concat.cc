// See readers.h.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "host/common/errors.h"
#include "host/import/onnx/onnx_graph.h"
#include "host/import/onnx/readers.h"

namespace tpu::import::onnx_graph {

Value ReadConcat(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {"axis"});
  bool known = true, sizes = false;  // sizes (sequences.cc, chains.cc)
  for (int i = 0; i < n.input_size(); ++i) {
    const bool constant = g.IsConstant(n, i);
    known &= constant || g.Raw(n, i).known;
    sizes |= !constant && g.Raw(n, i).axes == "shape";
  }
  if (sizes) return known ? ConcatInts(g, n) : Computed("shape");
  if (n.input_size() == 2 && !g.IsConstant(n, 0) && g.Raw(n, 0).part == "constant for each image")
    return TensorPrepend(g, n);
  if (g.IntAttr(n, "axis", 0) != 1) g.FailNode(n, "tpusim concatenates channels (axis = 1) only");
  if (n.input_size() < 2) g.FailNode(n, "Concat needs two or more inputs");
  std::vector<int> inputs;
  for (int i = 0; i < n.input_size(); ++i) {
    if (g.IsConstant(n, i))
      g.FailNode(n, "concatenates a constant; tpusim concatenates activations");
    const Value& v = g.In(n, i);
    if (!v.map) g.FailNode(n, "concatenates flattened vectors; tpusim concatenates maps");
    inputs.push_back(v.layer);
  }
  nn::Layer l;
  l.type = nn::LayerType::kConcat;
  l.name = g.NextName("concat");
  return g.Add(n, std::move(l), inputs);
}

}  // namespace tpu::import::onnx_graph
