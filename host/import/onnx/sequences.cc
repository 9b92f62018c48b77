// See readers.h: the operators around an LSTM (docs/import.md, "Sequences"). PyTorch's
// nn.LSTM exports its sequences' transposes (batch_first), the squeeze of ONNX's direction
// axis, the last step's selection (h[-1], out[:, -1]), and the zero initial state built from
// the input's shape (Shape, Gather, Unsqueeze, Concat, Expand). tpusim computes none of
// them: each only changes the roles of a value's axes (Value::axes) until an LSTM or a layer
// reads it.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "host/import/onnx/onnx_graph.h"
#include "host/import/onnx/readers.h"

namespace tpu::import::onnx_graph {
namespace {

// The axis attribute (or value) `axis` of a value of `rank` axes, as 0 .. rank - 1.
size_t AxisOf(OnnxGraph& g, const onnx::NodeProto& n, int64_t axis, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    g.FailNode(n, fmt::format("axis {} of a tensor of {} axes", axis, rank));
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

// An error unless v is a tensor whose axes have roles (not sizes, zeros or a cell).
const Value& WithRoles(OnnxGraph& g, const onnx::NodeProto& n, const Value& v, const char* what) {
  if (v.axes.empty() || v.axes == "shape" || v.axes == "zeros" || v.axes == "cell")
    g.FailNode(n, std::string("tpusim reads ") + what);
  return v;
}

// Node n's input 0 where its axes have roles; null where it holds sizes (and so does n's
// output). `attr`: the one attribute n may have.
const Value* RolesOrSizes(OnnxGraph& g, const onnx::NodeProto& n, const char* attr,
                          const char* what) {
  g.OnlyAttrs(n, {attr});
  const Value& v = g.Raw(n, 0);
  return v.axes == "shape" ? nullptr : &WithRoles(g, n, v, what);
}

// Node n's input 1 where it is a constant, else null.
const onnx::TensorProto* ConstantOrNull(OnnxGraph& g, const onnx::NodeProto& n) {
  return g.IsConstant(n, 1) ? g.Constant(n, 1) : nullptr;
}

}  // namespace

Value Computed(const char* kind) {
  Value v;
  v.axes = kind;
  return v;
}

Value ReadShape(OnnxGraph& g, const onnx::NodeProto& n) {
  const Value& v = g.Raw(n, 0);
  if (IsTensor(v) || (v.axes.empty() && v.part.empty() && !v.known)) return ShapeOfTensor(g, n);
  return Computed("shape");
}

Value ReadUnsqueeze(OnnxGraph& g, const onnx::NodeProto& n) {
  if (g.Raw(n, 0).known) return KnownInts(g.Raw(n, 0).ints);
  if (g.Raw(n, 0).axes != "shape")
    g.FailNode(n, "tpusim reads Unsqueeze only of sizes computed from a shape");
  return Computed("shape");
}

Value ReadExpand(OnnxGraph& g, const onnx::NodeProto& n) {
  if (auto v = ExpandedConstant(g, n)) return *v;
  const onnx::TensorProto* zeros = g.IsConstant(n, 0) ? g.Constant(n, 0) : nullptr;
  const std::vector<float> values = zeros ? g.Floats(n, *zeros) : std::vector<float>{1};
  const bool sized = g.IsConstant(n, 1) || g.Raw(n, 1).axes == "shape";
  if (!sized || std::any_of(values.begin(), values.end(), [](float v) { return v != 0; }))
    g.FailNode(n, "tpusim reads Expand only of a constant of zeros (an LSTM's initial state)");
  return Computed("zeros");
}

Value ReadTranspose(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {"perm"});
  const Value& raw = g.Raw(n, 0);
  if (!raw.view.empty() || (raw.axes.empty() && raw.part.empty()))
    return TensorTranspose(g, n, TensorOf(g, n, 0));
  const Value& v =
      WithRoles(g, n, g.Raw(n, 0), "Transpose only of sequences (N x T x X <-> T x N x X)");
  std::vector<int64_t> perm = g.IntsAttr(n, "perm", {});
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != static_cast<int64_t>(i)) sorted.clear();
  if (sorted.size() != v.axes.size())
    g.FailNode(n, fmt::format("perm must order the {} axes of '{}'", v.axes.size(), n.input(0)));
  Value out = v;
  for (size_t i = 0; i < perm.size(); ++i) out.axes[i] = v.axes[static_cast<size_t>(perm[i])];
  return out;
}

// Squeeze: axes of one (an LSTM's direction axis), given as an input (opset 13) or an
// attribute (before), or all of them.
Value ReadSqueeze(OnnxGraph& g, const onnx::NodeProto& n) {
  const Value* p = RolesOrSizes(g, n, "axes", "Squeeze only of an LSTM's axis of directions");
  if (!p) return Computed("shape");
  const Value& v = *p;
  const onnx::TensorProto* t = ConstantOrNull(g, n);
  std::vector<int64_t> axes = t ? g.Ints(n, *t) : g.IntsAttr(n, "axes", {});
  std::vector<size_t> drop;
  for (const int64_t a : axes) drop.push_back(AxisOf(g, n, a, v.axes.size()));
  for (size_t i = 0; axes.empty() && i < v.axes.size(); ++i)
    if (v.axes[i] == '1') drop.push_back(i);
  std::sort(drop.rbegin(), drop.rend());
  Value out = v;
  for (const size_t a : drop) {
    if (v.axes[a] != '1') g.FailNode(n, fmt::format("squeezes axis {}, which is not of one", a));
    out.axes.erase(a, 1);
  }
  return Plain(out);
}

// Gather: of sizes, sizes; of an axis of one, its only element; of an LSTM's steps, the last
// (tpusim's lstm layer computes that one).
Value ReadGather(OnnxGraph& g, const onnx::NodeProto& n) {
  if (g.IsConstant(n, 0) && !g.IsConstant(n, 1)) return TensorEmbedding(g, n);
  if (g.Raw(n, 0).known) return GatherInts(g, n);
  if (IsTensor(g.Raw(n, 0))) return TensorGather(g, n);
  const Value* p = RolesOrSizes(g, n, "axis", "Gather only of sizes and of an LSTM's last step");
  if (!p) return Computed("shape");
  const Value& v = *p;
  const onnx::TensorProto* t = ConstantOrNull(g, n);
  const std::vector<int64_t> index = t ? g.Ints(n, *t) : std::vector<int64_t>{};
  if (!t || t->dims_size() != 0 || index.size() != 1)
    g.FailNode(n, "gathers with indices other than one constant");
  const size_t axis = AxisOf(g, n, g.IntAttr(n, "axis", 0), v.axes.size());
  const char role = v.axes[axis];
  int64_t size = 1;
  if (role == 'T' && v.layer != nn::kModelInput) {
    const nn::Layer& l = g.model().layers[static_cast<size_t>(v.layer)];
    size = int64_t{l.in.h} * l.in.w;
  } else if (role != '1') {
    g.FailNode(n, fmt::format("gathers along axis {} of '{}' ({}); tpusim takes an LSTM's "
                              "last step (h[-1], out[:, -1]) only",
                              axis, n.input(0), v.axes));
  }
  if (index[0] != -1 && index[0] != size - 1)
    g.FailNode(n, fmt::format("takes element {} of {}; tpusim's lstm layer computes the last "
                              "step only",
                              index[0], size));
  Value out = v;
  out.axes.erase(axis, 1);
  return Plain(out);
}

}  // namespace tpu::import::onnx_graph
