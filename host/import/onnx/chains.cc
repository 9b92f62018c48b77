// See readers.h: the nodes around a transformer's tensors (tensors.cc): sizes computed at
// import, the chains that become one layer (LayerNorm, GELU, a scaled matmul operand), and
// the layers of attention (docs/import.md, "Transformers").
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "host/common/errors.h"
#include "host/import/onnx/onnx_graph.h"
#include "host/import/onnx/readers.h"

namespace tpu::import::onnx_graph {
namespace {

Value Part(const char* part, const std::string& of, double k = 0) {
  Value v;
  v.part = part;
  v.of = of;
  v.k = k;
  return v;
}

bool IsPart(const Value& v, const char* part) { return v.part == part; }

// Node n's input i, a computed value (a constant's: an empty one).
Value Input(OnnxGraph& g, const onnx::NodeProto& n, int i) {
  return g.IsConstant(n, i) ? Value{} : g.Raw(n, i);
}

// One float constant (a scalar, or a tensor of one value), or NaN where input i is not one.
double Scalar(OnnxGraph& g, const onnx::NodeProto& n, int i) {
  if (!g.IsConstant(n, i)) return NAN;
  const onnx::TensorProto* t = g.Constant(n, i);
  int64_t count = 1;
  for (const int64_t d : t->dims()) count *= d;
  if (t->data_type() != onnx::TensorProto::FLOAT || count != 1) return NAN;
  const std::vector<float> v = g.Floats(n, *t);
  return v.size() == 1 ? v[0] : NAN;
}

Value Ints(std::vector<int64_t> ints) {
  Value v = Computed("shape");
  v.known = true;
  v.ints = std::move(ints);
  return v;
}

// a op b value by value, a scalar broadcast.
Value IntArithmetic(OnnxGraph& g, const onnx::NodeProto& n,
                    const std::function<int64_t(int64_t, int64_t)>& op) {
  const std::vector<int64_t> a = IntsOf(g, n, 0), b = IntsOf(g, n, 1);
  if (a.size() != b.size() && a.size() != 1 && b.size() != 1)
    g.FailNode(n, "sizes of two lengths, neither one");
  std::vector<int64_t> out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = op(a[a.size() == 1 ? 0 : i], b[b.size() == 1 ? 0 : i]);
  return Ints(out);
}

bool Known(OnnxGraph& g, const onnx::NodeProto& n, int i) {
  return !g.IsConstant(n, i) && g.Raw(n, i).known;
}

bool AnyKnown(OnnxGraph& g, const onnx::NodeProto& n) {
  for (int i = 0; i < n.input_size(); ++i)
    if (Known(g, n, i)) return true;
  return false;
}

// The value of tensor `name` (a computed one).
Value Named(OnnxGraph& g, const onnx::NodeProto& n, const std::string& name) {
  const Value* v = g.Find(name);
  if (!v) g.FailNode(n, "reads '" + name + "', which no node before it computes");
  return *v;
}

[[noreturn]] void NotAChain(OnnxGraph& g, const onnx::NodeProto& n) {
  g.FailNode(n, "is not part of a chain tpusim imports: " + PartChains());
}

// The layer of `type` over x's values, each image's values along its last axis.
Value RowLayer(OnnxGraph& g, const onnx::NodeProto& n, const Value& x, nn::LayerType type,
               const char* prefix, const char* what) {
  const Value r = PerRow(g, n, x, what);
  nn::Layer l;
  l.type = type;
  l.name = g.NextName(prefix);
  return AddTensorLayer(g, n, std::move(l), {r.layer}, r);
}

}  // namespace

std::vector<int64_t> IntsOf(OnnxGraph& g, const onnx::NodeProto& n, int i) {
  if (g.IsConstant(n, i)) return g.Ints(n, *g.Constant(n, i));
  const Value& v = g.Raw(n, i);
  if (!v.known) g.FailNode(n, "reads '" + n.input(i) + "' as sizes, which tpusim cannot compute");
  return v.ints;
}

std::optional<Value> IntsNode(OnnxGraph& g, const onnx::NodeProto& n) {
  if (!AnyKnown(g, n)) return std::nullopt;
  const std::string& op = n.op_type();
  if (op == "Add") return IntArithmetic(g, n, std::plus<>());
  if (op == "Sub") return IntArithmetic(g, n, std::minus<>());
  if (op == "Mul") return IntArithmetic(g, n, std::multiplies<>());
  if (op == "Mod") {
    return IntArithmetic(g, n, [&](int64_t a, int64_t b) {
      if (b == 0) g.FailNode(n, "takes a size modulo 0");
      return ((a % b) + b) % b;  // fmod = 0: the sign of the divisor, as Python's %
    });
  }
  if (op == "Div") {
    return IntArithmetic(g, n, [&](int64_t a, int64_t b) {
      if (b == 0) g.FailNode(n, "divides a size by 0");
      return a / b;
    });
  }
  return std::nullopt;
}

Value ShapeOfTensor(OnnxGraph& g, const onnx::NodeProto& n) {
  return Ints(DimsOf(g, TensorOf(g, n, 0)));
}

Value GatherInts(OnnxGraph& g, const onnx::NodeProto& n) {
  const std::vector<int64_t> v = IntsOf(g, n, 0), index = IntsOf(g, n, 1);
  std::vector<int64_t> out;
  for (int64_t i : index) {
    if (i < 0) i += static_cast<int64_t>(v.size());
    if (i < 0 || i >= static_cast<int64_t>(v.size())) g.FailNode(n, "gathers outside the sizes");
    out.push_back(v[static_cast<size_t>(i)]);
  }
  return Ints(out);
}

Value ConcatInts(OnnxGraph& g, const onnx::NodeProto& n) {
  std::vector<int64_t> out;
  for (int i = 0; i < n.input_size(); ++i) {
    const std::vector<int64_t> v = IntsOf(g, n, i);
    out.insert(out.end(), v.begin(), v.end());
  }
  return Ints(out);
}

Value KnownInts(std::vector<int64_t> ints) { return Ints(std::move(ints)); }

Value ReadConstantOfShape(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {"value"});
  const std::vector<int64_t> shape = IntsOf(g, n, 0);
  const onnx::AttributeProto* a = g.Attr(n, "value");
  const std::vector<int64_t> value = a ? g.Ints(n, a->t()) : std::vector<int64_t>{0};
  if (shape.size() != 1 || value.size() != 1)
    g.FailNode(n, "tpusim computes ConstantOfShape of sizes: a vector of one int64 value");
  return Ints(std::vector<int64_t>(static_cast<size_t>(shape[0]), value[0]));
}

Value ReadEqual(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {});
  return IntArithmetic(g, n, [](int64_t a, int64_t b) { return int64_t{a == b}; });
}

Value ReadWhere(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {});
  const std::vector<int64_t> c = IntsOf(g, n, 0), a = IntsOf(g, n, 1), b = IntsOf(g, n, 2);
  if (a.size() != c.size() || b.size() != c.size())
    g.FailNode(n, "tpusim computes Where of sizes of one length");
  std::vector<int64_t> out(c.size());
  for (size_t i = 0; i < c.size(); ++i) out[i] = c[i] ? a[i] : b[i];
  return Ints(out);
}

// Expand of a constant to known sizes: a learned tensor broadcast over the batch (ViT's class
// token), which a Concat puts before a tensor (nullopt: not one). One of zeros may be an
// LSTM's zero state as well (Value::axes "zeros", sequences.cc): it is both.
std::optional<Value> ExpandedConstant(OnnxGraph& g, const onnx::NodeProto& n) {
  if (!g.IsConstant(n, 0) || g.IsConstant(n, 1) || !g.Raw(n, 1).known) return std::nullopt;
  const onnx::TensorProto& t = *g.Constant(n, 0);
  const std::vector<float> values = g.Floats(n, t);
  const bool zeros = std::all_of(values.begin(), values.end(), [](float v) { return v == 0; });
  const std::vector<int64_t> to = g.Raw(n, 1).ints;
  bool batch_only =
      t.dims_size() >= 2 && t.dims_size() == static_cast<int>(to.size()) && t.dims(0) == 1;
  for (int i = 1; batch_only && i < t.dims_size(); ++i)
    batch_only = to[static_cast<size_t>(i)] == 1 || to[static_cast<size_t>(i)] == t.dims(i);
  if (!batch_only && zeros) return std::nullopt;
  if (!batch_only) g.FailNode(n, "tpusim expands a constant of [1, ...] along the batch only");
  Value v = Part("constant for each image", n.input(0));
  v.ints = to;
  if (zeros) v.axes = "zeros";
  return v;
}

// Add: epsilon to a LayerNorm's variance, 1 to a GELU's erf.
std::optional<Value> AddInChain(OnnxGraph& g, const onnx::NodeProto& n) {
  for (int i = 0; i < 2; ++i) {
    if (g.IsConstant(n, i)) continue;
    const Value& v = g.Raw(n, i);
    const double c = Scalar(g, n, 1 - i);
    if (IsPart(v, "variance") && c > 0) return Part("variance + epsilon", v.of, c);
    if (IsPart(v, "erf") && c == 1.0) return Part("erf + 1", v.of);
  }
  return std::nullopt;
}

// Mul: x by its GELU's erf + 1, then by 0.5: a gelu layer.
std::optional<Value> MulInChain(OnnxGraph& g, const onnx::NodeProto& n) {
  for (int i = 0; i < 2; ++i) {
    if (g.IsConstant(n, i)) continue;
    const Value& v = g.Raw(n, i);
    if (IsPart(v, "erf + 1") && n.input(1 - i) == v.of) return Part("x (erf + 1)", v.of);
    if (IsPart(v, "x (erf + 1)") && Scalar(g, n, 1 - i) == 0.5) {
      const Value x = Normalized(g, n, Named(g, n, v.of));
      nn::Layer l;
      l.type = nn::LayerType::kGelu;
      l.name = g.NextName("gelu");
      return AddTensorLayer(g, n, std::move(l), {x.layer}, x);
    }
  }
  return std::nullopt;
}

Value ReadReduceMean(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {"axes", "keepdims"});
  const Value& v = g.Raw(n, 0);
  const std::vector<int64_t> axes = g.IntsAttr(n, "axes", {});
  const bool last =
      axes.size() == 1 &&
      (axes[0] == -1 || (IsTensor(v) && axes[0] + 1 == static_cast<int64_t>(v.view.size())));
  if (!last || g.IntAttr(n, "keepdims", 1) != 1)
    g.FailNode(n, "tpusim reads ReduceMean over the last axis, kept (a LayerNorm's)");
  if (IsPart(v, "(x - mean)^2")) return Part("variance", v.of);
  if (IsTensor(g.Raw(n, 0))) return Part("mean", n.input(0));
  NotAChain(g, n);
}

Value ReadMod(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {"fmod"});
  if (g.IntAttr(n, "fmod", 0) != 0) g.FailNode(n, "tpusim computes Mod of sizes with fmod = 0");
  if (auto ints = IntsNode(g, n)) return *ints;
  g.FailNode(n, "tpusim computes Mod of sizes only");
}

Value ReadSub(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {});
  if (auto ints = IntsNode(g, n)) return *ints;
  const Value m = Input(g, n, 1);
  if (IsPart(m, "mean") && m.of == n.input(0)) return Part("x - mean", m.of);
  NotAChain(g, n);
}

Value ReadPow(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {});
  const Value v = Input(g, n, 0);
  if (IsPart(v, "x - mean") && Scalar(g, n, 1) == 2.0) return Part("(x - mean)^2", v.of);
  NotAChain(g, n);
}

Value ReadSqrt(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {});
  const Value& v = g.Raw(n, 0);
  if (IsPart(v, "variance + epsilon")) return Part("standard deviation", v.of, v.k);
  NotAChain(g, n);
}

Value ReadErf(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {});
  const Value& v = g.Raw(n, 0);
  if (IsPart(v, "x / c") && std::abs(v.k - std::sqrt(2.0)) < 1e-6) return Part("erf", v.of);
  NotAChain(g, n);
}

// Div: of sizes; a LayerNorm's (x - mean) / its standard deviation (a layer_norm layer);
// a tensor by a constant (a GELU's x / sqrt 2, a matmul's scaled operand).
Value ReadDiv(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {});
  if (auto ints = IntsNode(g, n)) return *ints;
  const Value a = Input(g, n, 0), b = Input(g, n, 1);
  if (IsPart(a, "x - mean") && IsPart(b, "standard deviation") && a.of == b.of) {
    Value r = PerRow(g, n, Named(g, n, a.of), "normalizes");
    nn::Layer l;
    l.type = nn::LayerType::kLayerNorm;
    l.name = g.NextName("layer_norm");
    l.epsilon = static_cast<float>(b.k);
    l.weights.shape = {r.shape.c};
    l.weights.data.assign(static_cast<size_t>(r.shape.c), 1.0f);
    l.bias.shape = {r.shape.c};
    l.bias.data.assign(static_cast<size_t>(r.shape.c), 0.0f);
    return AddTensorLayer(g, n, std::move(l), {r.layer}, r);
  }
  const double c = Scalar(g, n, 1);
  if (IsTensor(a) && c > 0 && a.layer != nn::kModelInput && g.Uses(n.input(0)) == 1) {
    nn::Layer& l = g.model().layers[static_cast<size_t>(a.layer)];
    if (l.type == nn::LayerType::kMatMul &&
        a.layer + 1 == static_cast<int>(g.model().layers.size())) {
      l.scale = static_cast<float>(l.scale / c);  // the product's scale
      return a;
    }
  }
  if (IsTensor(a) && c > 0) return Part("x / c", n.input(0), c);
  g.FailNode(n, "tpusim reads Div of sizes, in a chain (" + PartChains() +
                    "), or of a tensor by a positive constant before an Erf or a MatMul");
}

std::optional<Value> SoftmaxOfTensor(OnnxGraph& g, const onnx::NodeProto& n) {
  if (!IsTensor(g.Raw(n, 0)) || n.op_type() != "Softmax") return std::nullopt;
  g.OnlyAttrs(n, {"axis"});
  const Value x = TensorOf(g, n, 0);
  const int64_t axis = g.IntAttr(n, "axis", -1);
  if (axis != -1 && axis + 1 != static_cast<int64_t>(x.view.size()))
    g.FailNode(n, "tpusim takes a tensor's Softmax over its last axis");
  return RowLayer(g, n, x, nn::LayerType::kSoftmax, "softmax", "takes a softmax");
}

}  // namespace tpu::import::onnx_graph
