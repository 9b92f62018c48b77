// See readers.h: the layers a transformer's tensors feed (tensors.cc): a MatMul or Gemm by
// weights on each position, a MatMul of two tensors, an Add or Mul of two, a Transpose, a
// Reshape and a Slice of one (docs/import.md, "Transformers").
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "host/common/errors.h"
#include "host/import/onnx/onnx_graph.h"
#include "host/import/onnx/readers.h"

namespace tpu::import::onnx_graph {
namespace {

bool OneAxis(const std::string& a) { return a.size() == 1 && a[0] != 'N'; }

std::vector<std::string> Leading(const Value& v) { return {v.view.begin(), v.view.end() - 2}; }

// Whether v's last two axes are its values' c and w (a matrix transposed as it is kept), its
// heads (if any) its h.
bool Transposed(OnnxGraph& g, const Value& v) {
  const size_t r = v.view.size();
  if (r < 2 || !(g.model().OutputOf(v.layer) == v.shape)) return false;
  for (size_t i = 0; i + 2 < r; ++i)
    if (v.view[i].find_first_of("12") != std::string::npos) return false;
  return v.view[r - 2] == "2" && v.view[r - 1] == "1";
}

// v as [heads..., M, K] with its heads in h, M in w, K in c.
Value AsMatrices(OnnxGraph& g, const onnx::NodeProto& n, const Value& v, const char* which) {
  const Value r = Normalized(g, n, v);
  const size_t k = r.view.size();
  bool ok = k >= 2 && OneAxis(r.view[k - 2]) && OneAxis(r.view[k - 1]);
  for (size_t i = 0; ok && i + 2 < k; ++i) ok = r.view[i].find_first_of("12") == std::string::npos;
  if (!ok)
    g.FailNode(n, fmt::format("multiplies {} of shape [{}] as matrices; tpusim takes [..., M, K] "
                              "with M and K more than 1",
                              which, fmt::join(DimsOf(g, v), " x ")));
  return r;
}

}  // namespace

Value TensorMatMul(OnnxGraph& g, const onnx::NodeProto& n) {
  const Value& raw = g.Raw(n, 0);
  double divisor = 1;
  Value a0 = raw;
  if (raw.part == "x / c") {
    divisor = raw.k;
    a0 = TensorOf(g, n, *g.Find(raw.of), 0);
  } else {
    a0 = TensorOf(g, n, 0);
  }
  Value b = TensorOf(g, n, 1);
  const bool transpose_b = Transposed(g, b);
  if (!transpose_b) b = AsMatrices(g, n, b, "its second input");
  const Value a = AsMatrices(g, n, a0, "its first input");
  if (Leading(a) != Leading(b) && !transpose_b)
    g.FailNode(n, "multiplies tensors of different heads; tpusim multiplies head by head");
  nn::Layer l;
  l.type = nn::LayerType::kMatMul;
  l.name = g.NextName("matmul");
  l.transpose_b = transpose_b;
  l.scale = static_cast<float>(1.0 / divisor);
  Value like = a;
  like.view = Leading(a);
  like.view.push_back("1");
  like.view.push_back("2");
  return AddTensorLayer(g, n, std::move(l), {a.layer, b.layer}, like);
}

Value TensorDense(OnnxGraph& g, const onnx::NodeProto& n, const Value& x0,
                  const std::vector<float>& w, int64_t k, int64_t units, bool trans_b) {
  const Value x = PerRow(g, n, x0, "multiplies by weights");
  if (x.shape.c != k)
    g.FailNode(n, fmt::format("weights expect {} inputs; the last axis has {}", k, x.shape.c));
  nn::Layer l;
  l.type = nn::LayerType::kConv2d;
  l.name = g.NextName("linear");
  l.weights.shape = {1, 1, k, units};
  l.weights.data.resize(static_cast<size_t>(k * units));
  for (int64_t r = 0; r < k; ++r)
    for (int64_t u = 0; u < units; ++u)
      l.weights.data[static_cast<size_t>(r * units + u)] =
          w[static_cast<size_t>(trans_b ? u * k + r : r * units + u)];
  l.bias.shape = {units};
  l.bias.data.assign(static_cast<size_t>(units), 0.0f);
  l.out.c = static_cast<int>(units);
  return AddTensorLayer(g, n, std::move(l), {x.layer}, x);
}

Value TensorJoin(OnnxGraph& g, const onnx::NodeProto& n, nn::LayerType type, const char* prefix) {
  const Value a = Canonical(g, n, Normalized(g, n, TensorOf(g, n, 0)));
  const Value b = Canonical(g, n, Normalized(g, n, TensorOf(g, n, 1)));
  if (a.view != b.view || !(a.shape == b.shape))
    g.FailNode(n, fmt::format("joins [{}] and [{}]; tpusim joins tensors of one shape (no "
                              "broadcast)",
                              fmt::join(DimsOf(g, a), " x "), fmt::join(DimsOf(g, b), " x ")));
  nn::Layer l;
  l.type = type;
  l.name = g.NextName(prefix);
  return AddTensorLayer(g, n, std::move(l), {a.layer, b.layer}, a);
}

Value TensorTranspose(OnnxGraph& g, const onnx::NodeProto& n, const Value& v) {
  const std::vector<int64_t> perm = g.IntsAttr(n, "perm", {});
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != static_cast<int64_t>(i)) sorted.clear();
  if (sorted.size() != v.view.size())
    g.FailNode(n, fmt::format("perm must order the {} axes of '{}'", v.view.size(), n.input(0)));
  Value out = v;
  for (size_t i = 0; i < perm.size(); ++i) out.view[i] = v.view[static_cast<size_t>(perm[i])];
  if (!v.axes.empty() && v.axes.size() == perm.size())
    for (size_t i = 0; i < perm.size(); ++i) out.axes[i] = v.axes[static_cast<size_t>(perm[i])];
  return out;
}

Value TensorReshape(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {"allowzero"});
  if (g.IntAttr(n, "allowzero", 0) != 0) g.FailNode(n, "allowzero = 1 is not supported");
  Value v = Reshaped(g, n, TensorOf(g, n, 0), IntsOf(g, n, 1));
  v.axes.clear();
  return v;
}

Value TensorSlice(OnnxGraph& g, const onnx::NodeProto& n) {
  const std::vector<int64_t> starts = IntsOf(g, n, 1), ends = IntsOf(g, n, 2);
  const std::vector<int64_t> axes = n.input_size() > 3 ? IntsOf(g, n, 3) : std::vector<int64_t>{0};
  const std::vector<int64_t> steps = n.input_size() > 4 ? IntsOf(g, n, 4) : std::vector<int64_t>{1};
  if (starts.size() != 1 || ends.size() != 1 || axes.size() != 1 ||
      steps != std::vector<int64_t>{1})
    g.FailNode(n, "tpusim slices one axis, step 1");
  const Value v = Normalized(g, n, TensorOf(g, n, 0));
  const auto rank = static_cast<int64_t>(v.view.size());
  const int64_t axis = axes[0] < 0 ? axes[0] + rank : axes[0];
  if (axis < 0 || axis >= rank || v.view[static_cast<size_t>(axis)].size() != 1 ||
      v.view[static_cast<size_t>(axis)] == "N")
    g.FailNode(n, "tpusim slices an axis of each image's values, not the batch");
  const int stored = v.view[static_cast<size_t>(axis)][0] - '0';
  const int64_t size = DimsOf(g, v)[static_cast<size_t>(axis)];
  const auto clamp = [size](int64_t i) {
    return std::clamp(i < 0 ? i + size : i, int64_t{0}, size);
  };
  nn::Layer l;
  l.type = nn::LayerType::kSlice;
  l.name = g.NextName("slice");
  l.axis = stored;
  l.start = static_cast<int>(clamp(starts[0]));
  l.end = static_cast<int>(clamp(ends[0]));
  return AddTensorLayer(g, n, std::move(l), {v.layer}, v);
}

}  // namespace tpu::import::onnx_graph

namespace tpu::import::onnx_graph {

// Slice: of sizes (one axis), or one axis of a tensor.
Value ReadSlice(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {});
  if (!g.Raw(n, 0).known) return TensorSlice(g, n);
  const std::vector<int64_t> v = IntsOf(g, n, 0), s = IntsOf(g, n, 1), e = IntsOf(g, n, 2);
  if (s.size() != 1 || e.size() != 1) g.FailNode(n, "slices sizes along more than one axis");
  const auto size = static_cast<int64_t>(v.size());
  const auto at = [size](int64_t i) { return std::clamp(i < 0 ? i + size : i, int64_t{0}, size); };
  return KnownInts({v.begin() + at(s[0]), v.begin() + std::max(at(s[0]), at(e[0]))});
}

}  // namespace tpu::import::onnx_graph

namespace tpu::import::onnx_graph {
namespace {

// Whether x's axes other than the batch and `keep` hold none of the image's values but c's
// in the last.
bool TokensByChannels(const Value& x, size_t tokens) {
  const size_t r = x.view.size();
  if (r < 2 || tokens + 1 != r - 1 || x.view[tokens] != "1" || x.view[r - 1] != "2") return false;
  for (size_t i = 0; i + 2 < r; ++i)
    if (x.view[i].find_first_not_of('N') != std::string::npos) return false;
  return x.shape.h == 1;
}

// Whether constant t, its leading 1s dropped, is x's last axes (each one of the image's
// axes), so that it repeats along the rest.
bool Broadcasts(const OnnxGraph& g, const Value& x, const onnx::TensorProto& t) {
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  while (!dims.empty() && dims.front() == 1) dims.erase(dims.begin());
  const std::vector<int64_t> xd = DimsOf(g, x);
  if (dims.size() > xd.size()) return false;
  for (size_t i = 0; i < dims.size(); ++i) {
    const size_t j = xd.size() - dims.size() + i;
    if (dims[i] != xd[j] || x.view[j].size() != 1 || x.view[j] == "N") return false;
  }
  return true;
}

size_t AxisIndex(OnnxGraph& g, const onnx::NodeProto& n, int64_t axis, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) g.FailNode(n, fmt::format("axis {} of {} axes", axis, rank));
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

}  // namespace

Value TensorPrepend(OnnxGraph& g, const onnx::NodeProto& n) {
  const Value& c = g.Raw(n, 0);
  if (n.input_size() != 2 || c.part != "constant for each image" || !IsTensor(g.Raw(n, 1)))
    g.FailNode(n,
               "tpusim concatenates a constant for each image before a tensor (ViT's class "
               "token) only");
  const Value x = Canonical(g, n, Normalized(g, n, TensorOf(g, n, 1)));
  const size_t axis = AxisIndex(g, n, g.IntAttr(n, "axis", 0), x.view.size());
  const std::vector<int64_t> dims = DimsOf(g, x);
  const onnx::TensorProto& t = *g.ConstantNamed(c.of);
  bool ok = TokensByChannels(x, axis) && t.dims_size() == static_cast<int>(dims.size()) &&
            t.dims(t.dims_size() - 1) == dims.back();
  if (!ok)
    g.FailNode(n, fmt::format("puts a constant before [{}] along axis {}; tpusim puts rows "
                              "before a tensor of tokens by channels, along its tokens",
                              fmt::join(dims, " x "), axis));
  nn::Layer l;
  l.type = nn::LayerType::kPrepend;
  l.name = g.NextName("prepend");
  l.start = static_cast<int>(t.dims(static_cast<int>(axis)));
  l.weights.shape = {1, l.start, x.shape.c};
  l.weights.data = g.Floats(n, t);
  l.bias.shape = {0};  // none (constants.cc)
  return AddTensorLayer(g, n, std::move(l), {x.layer}, x);
}

Value TensorAddConstant(OnnxGraph& g, const onnx::NodeProto& n, int constant_input) {
  const Value x = Canonical(g, n, Normalized(g, n, TensorOf(g, n, 1 - constant_input)));
  const onnx::TensorProto& t = *g.Constant(n, constant_input);
  const std::vector<float> c = g.Floats(n, t, /*infinities=*/true);  // -inf: a mask
  const int64_t size = x.shape.Size();
  if (!Broadcasts(g, x, t))
    g.FailNode(n, fmt::format("adds a constant of [{}] to [{}]; tpusim adds a constant of the "
                              "last axes' sizes, the same for every image",
                              fmt::join(t.dims(), " x "), fmt::join(DimsOf(g, x), " x ")));
  nn::Layer l;
  l.type = nn::LayerType::kAddConstant;
  l.name = g.NextName("add_constant");
  l.weights.shape = {x.shape.h, x.shape.w, x.shape.c};
  l.bias.shape = {0};  // none (constants.cc)
  l.weights.data.resize(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i)
    l.weights.data[static_cast<size_t>(i)] = c[static_cast<size_t>(i) % c.size()];
  return AddTensorLayer(g, n, std::move(l), {x.layer}, x);
}

Value TensorGather(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {"axis"});
  const onnx::TensorProto* t = g.IsConstant(n, 1) ? g.Constant(n, 1) : nullptr;
  const std::vector<int64_t> index = t ? g.Ints(n, *t) : std::vector<int64_t>{};
  if (!t || index.size() != 1 || t->dims_size() > 1)
    g.FailNode(n, "tpusim gathers one constant index of a tensor's axis (x[:, 0])");
  const Value x = Normalized(g, n, TensorOf(g, n, 0));
  const size_t axis = AxisIndex(g, n, g.IntAttr(n, "axis", 0), x.view.size());
  if (!OneAxis(x.view[axis]))
    g.FailNode(n, "tpusim gathers along an axis of each image's values, not the batch");
  const int64_t size = DimsOf(g, x)[axis];
  const int64_t i = index[0] < 0 ? index[0] + size : index[0];
  if (i < 0 || i >= size) g.FailNode(n, fmt::format("gathers index {} of {}", index[0], size));
  nn::Layer l;
  l.type = nn::LayerType::kSlice;
  l.name = g.NextName("slice");
  l.axis = x.view[axis][0] - '0';
  l.start = static_cast<int>(i);
  l.end = static_cast<int>(i + 1);
  Value like = x;
  if (t->dims_size() == 0) like.view.erase(like.view.begin() + static_cast<std::ptrdiff_t>(axis));
  return AddTensorLayer(g, n, std::move(l), {x.layer}, like);
}

}  // namespace tpu::import::onnx_graph

namespace tpu::import::onnx_graph {

// Gather of a constant's rows by token ids: a GPT's token embeddings.
Value TensorEmbedding(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {"axis"});
  const onnx::TensorProto& t = *g.Constant(n, 0);
  Value ids = Normalized(g, n, TensorOf(g, n, 1));
  if (ids.shape.h == 1 && ids.shape.w == 1) {  // a run of ids in c: as 1 x T x 1
    ids.shape = {1, ids.shape.c, 1};
    for (std::string& a : ids.view) std::replace(a.begin(), a.end(), '2', '1');
    ids = Materialized(g, n, ids);
  }
  if (g.IntAttr(n, "axis", 0) != 0 || t.dims_size() != 2 || ids.shape.c != 1)
    g.FailNode(n,
               "tpusim gathers rows of a vocabulary x width constant by token ids (an "
               "embedding) only");
  nn::Layer l;
  l.type = nn::LayerType::kEmbedding;
  l.name = g.NextName("embedding");
  l.start = static_cast<int>(t.dims(0));
  l.out.c = static_cast<int>(t.dims(1));
  l.weights.shape = {t.dims(0), t.dims(1)};
  l.weights.data = g.Floats(n, t);
  l.bias.shape = {0};  // none (constants.cc)
  Value like = ids;
  like.view.push_back("2");
  return AddTensorLayer(g, n, std::move(l), {ids.layer}, like);
}

}  // namespace tpu::import::onnx_graph

namespace tpu::import::onnx_graph {

// Split of a tensor's axis: a slice layer for each output (a fused QKV projection's).
Value ReadSplit(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {"axis", "split"});
  const Value x = Normalized(g, n, TensorOf(g, n, 0));
  const size_t axis = AxisIndex(g, n, g.IntAttr(n, "axis", 0), x.view.size());
  if (!OneAxis(x.view[axis]))
    g.FailNode(n, "tpusim splits an axis of each image's values, not the batch");
  const int64_t size = DimsOf(g, x)[axis];
  std::vector<int64_t> sizes =
      n.input_size() > 1 && !n.input(1).empty() ? IntsOf(g, n, 1) : g.IntsAttr(n, "split", {});
  if (sizes.empty() && size % n.output_size() == 0)
    sizes.assign(static_cast<size_t>(n.output_size()), size / n.output_size());
  int64_t start = 0;
  std::vector<Value> outs;
  for (const int64_t s : sizes) {
    if (s < 1 || start + s > size || sizes.size() != static_cast<size_t>(n.output_size()))
      g.FailNode(n, fmt::format("splits {} values into [{}]", size, fmt::join(sizes, ", ")));
    nn::Layer l;
    l.type = nn::LayerType::kSlice;
    l.name = g.NextName("slice");
    l.axis = x.view[axis][0] - '0';
    l.start = static_cast<int>(start);
    l.end = static_cast<int>(start + s);
    outs.push_back(AddTensorLayer(g, n, std::move(l), {x.layer}, x));
    start += s;
  }
  for (size_t k = 1; k < outs.size(); ++k) g.Define(n.output(static_cast<int>(k)), outs[k]);
  return outs.front();
}

}  // namespace tpu::import::onnx_graph
