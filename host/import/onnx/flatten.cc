// See readers.h.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "host/common/errors.h"
#include "host/import/onnx/onnx_graph.h"
#include "host/import/onnx/readers.h"

namespace tpu::import::onnx_graph {

// Whether Reshape node n views its input as anything but [batch, features] of a map or vector.
bool TensorShaped(OnnxGraph& g, const onnx::NodeProto& n) {
  if (IsTensor(g.Raw(n, 0))) return true;
  const std::vector<int64_t> s = IntsOf(g, n, 1);
  const Value& x = g.In(n, 0);
  return s.size() != 2 || !(s[1] == x.shape.Size() || (s[1] == -1 && s[0] != -1));
}

Value ReadFlatten(OnnxGraph& g, const onnx::NodeProto& n) {
  if (n.op_type() == "Reshape" && TensorShaped(g, n)) return TensorReshape(g, n);
  const Value x = g.In(n, 0);
  const int64_t features = x.shape.Size();
  if (n.op_type() == "Flatten") {
    g.OnlyAttrs(n, {"axis"});
    if (g.IntAttr(n, "axis", 1) != 1)
      g.FailNode(n, "only axis = 1 (batch x features) is supported");
  } else {
    g.OnlyAttrs(n, {"allowzero"});
    const onnx::TensorProto* t = g.Constant(n, 1);
    if (!t) g.FailNode(n, "has no shape");
    const auto s = g.Ints(n, *t);
    const bool ok = s.size() == 2 && (s[1] == features || (s[1] == -1 && s[0] != -1)) &&
                    (s[0] == -1 || s[0] == 0 || s[0] >= 1);
    if (!ok) g.FailNode(n, fmt::format("tpusim imports Reshape to [batch, {}] only", features));
  }
  if (!x.map) return x;  // already a vector
  nn::Layer l;
  l.type = nn::LayerType::kFlatten;
  l.name = g.NextName("flatten");
  Value v = g.Add(n, std::move(l), {x.layer});
  v.chw = x.shape;
  return v;
}

}  // namespace tpu::import::onnx_graph
