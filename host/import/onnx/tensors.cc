// See readers.h: a transformer's tensors (docs/import.md, "Transformers"). PyTorch exports
// attention as reshapes and transposes that move the batch among the heads ([T, N H, d]),
// sizes computed from Shape, and LayerNorm and GELU as chains of elementwise nodes. tpusim
// keeps one image's values per layer: each tensor is a view (Value::view) of a layer's
// values, its ONNX axes products of the batch and the image's axes; a transpose or a
// reshape changes the view, and a layer that moves values (transpose, reshape) is added
// only where a reader needs them in another order. Sizes are computed at import; the chains
// become one layer each.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <numeric>

#include "host/common/errors.h"
#include "host/import/onnx/onnx_graph.h"
#include "host/import/onnx/readers.h"

namespace tpu::import::onnx_graph {
namespace {

int Axis(char f) { return f - '0'; }
char AxisChar(int a) { return static_cast<char>('0' + a); }
int64_t Dim(const nn::Shape3& s, int a) { return a == 0 ? s.h : a == 1 ? s.w : s.c; }

struct Factor {
  char f;  // 'N' or an axis of the image's values
  int64_t size;
};

// v's factors in ONNX order, axes of one size left out.
std::deque<Factor> Fine(const OnnxGraph& g, const Value& v) {
  std::deque<Factor> fine;
  for (const std::string& a : v.view)
    for (const char f : a) {
      const int64_t size = f == 'N' ? g.batch() : Dim(v.shape, Axis(f));
      if (size > 1 || f == 'N') fine.push_back({f, size});
    }
  return fine;
}

std::string ViewText(const OnnxGraph& g, const Value& v) {
  std::string t;
  for (const int64_t d : DimsOf(g, v)) t += (t.empty() ? "" : " x ") + std::to_string(d);
  return "[" + t + "]";
}

// Groups of v's factors, one group a size of `dims` (a factor split where a size needs
// part of it; the batch never is).
std::vector<std::vector<Factor>> Grouped(OnnxGraph& g, const onnx::NodeProto& n, const Value& v,
                                         const std::vector<int64_t>& dims) {
  std::deque<Factor> fine = Fine(g, v);
  std::vector<std::vector<Factor>> groups;
  const auto fail = [&] {
    g.FailNode(n, fmt::format("views {} as {}: tpusim keeps each image's values apart, and this "
                              "reshape would mix images (the batch is {})",
                              ViewText(g, v), fmt::join(dims, " x "), g.batch()));
  };
  for (const int64_t d : dims) {
    std::vector<Factor> group;
    for (int64_t rem = d; rem > 1;) {
      if (fine.empty()) fail();
      Factor& f = fine.front();
      if (rem % f.size == 0) {
        group.push_back(f);
        rem /= f.size;
        fine.pop_front();
      } else if (f.f != 'N' && f.size % rem == 0) {
        group.push_back({f.f, rem});
        f.size /= rem;
        rem = 1;
      } else {
        fail();
      }
    }
    groups.push_back(group);
  }
  if (!fine.empty()) fail();
  return groups;
}

// The sizes a Reshape asks for, its 0s and -1 resolved against `in`.
std::vector<int64_t> Resolved(OnnxGraph& g, const onnx::NodeProto& n, std::vector<int64_t> dims,
                              const std::vector<int64_t>& in) {
  const int64_t total = std::accumulate(in.begin(), in.end(), int64_t{1}, std::multiplies<>());
  int64_t known = 1;
  int unknown = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && i < in.size()) dims[i] = in[i];
    if (dims[i] == -1 && unknown < 0) {
      unknown = static_cast<int>(i);
    } else if (dims[i] < 1) {
      g.FailNode(n, fmt::format("reshapes to {}", fmt::join(dims, " x ")));
    } else {
      known *= dims[i];
    }
  }
  if (unknown >= 0) dims[static_cast<size_t>(unknown)] = total / known;
  return dims;
}

}  // namespace

// v's values as layer v.layer's output (a reshape layer added where v views them anew).
Value Materialized(OnnxGraph& g, const onnx::NodeProto& n, Value v) {
  if (g.model().OutputOf(v.layer) == v.shape) return v;
  nn::Layer l;
  l.type = nn::LayerType::kReshape;
  l.name = g.NextName("reshape");
  l.out = v.shape;
  v.layer = g.Add(n, std::move(l), {v.layer}).layer;
  return v;
}

// v with the image's axes in ONNX order (a transpose layer added where they are not).
Value Canonical(OnnxGraph& g, const onnx::NodeProto& n, Value v) {
  v = Materialized(g, n, v);
  std::vector<int> order;
  for (const std::string& a : v.view)
    for (const char f : a)
      if (f != 'N') order.push_back(Axis(f));
  std::array<int, 3> perm{};
  size_t k = 0;
  for (int s = 0; s < 3; ++s)
    if (std::find(order.begin(), order.end(), s) == order.end()) perm[k++] = s;
  for (const int s : order) perm[k++] = s;
  if (perm == std::array<int, 3>{0, 1, 2}) return v;
  nn::Layer l;
  l.type = nn::LayerType::kTranspose;
  l.name = g.NextName("transpose");
  l.perm = perm;
  const Value t = g.Add(n, std::move(l), {v.layer});
  std::array<int, 3> inverse{};
  for (int j = 0; j < 3; ++j) inverse[static_cast<size_t>(perm[static_cast<size_t>(j)])] = j;
  for (std::string& a : v.view)
    for (char& f : a)
      if (f != 'N') f = AxisChar(inverse[static_cast<size_t>(Axis(f))]);
  v.layer = t.layer;
  v.shape = t.shape;
  return v;
}

std::vector<std::string> WithoutBatch(std::vector<std::string> view) {
  for (std::string& a : view) a.erase(std::remove(a.begin(), a.end(), 'N'), a.end());
  return view;
}

bool IsTensor(const Value& v) { return !v.view.empty() && v.part.empty(); }

std::string PartChains() {
  return "tpusim reads LayerNorm as ReduceMean, Sub, Pow 2, ReduceMean, Add epsilon, Sqrt, "
         "Div (then Mul gamma, Add beta), GELU as Div sqrt(2), Erf, Add 1, Mul x, Mul 0.5, and "
         "a Div by a constant before or after a MatMul of two tensors";
}

std::vector<int64_t> DimsOf(const OnnxGraph& g, const Value& v) {
  std::vector<int64_t> dims;
  for (const std::string& a : v.view) {
    int64_t d = 1;
    for (const char f : a) d *= f == 'N' ? g.batch() : Dim(v.shape, Axis(f));
    dims.push_back(d);
  }
  return dims;
}

Value TensorOf(OnnxGraph& g, const onnx::NodeProto& n, const Value& raw, int i) {
  if (!raw.view.empty() && raw.part.empty()) return raw;
  const Value& v = g.In(n, i);
  if (!v.map && v.chw.h * v.chw.w > 1)
    g.FailNode(n, "reads a flattened map as a tensor; tpusim reads the map itself");
  Value t = v;
  t.view =
      v.map ? std::vector<std::string>{"N", "2", "0", "1"} : std::vector<std::string>{"N", "2"};
  if (g.batch() == 1) t.view = WithoutBatch(t.view);
  return t;
}

Value TensorOf(OnnxGraph& g, const onnx::NodeProto& n, int i) {
  return TensorOf(g, n, g.Raw(n, i), i);
}

Value Reshaped(OnnxGraph& g, const onnx::NodeProto& n, Value v, std::vector<int64_t> dims) {
  v = Canonical(g, n, v);
  dims = Resolved(g, n, std::move(dims), DimsOf(g, v));
  const std::vector<std::vector<Factor>> groups = Grouped(g, n, v, dims);
  // Each run of the image's factors within a group is one axis of the new view's values.
  std::vector<int64_t> runs;
  std::vector<std::string> view;
  for (const std::vector<Factor>& group : groups) {
    std::string a;
    bool in_run = false;
    for (const Factor& f : group) {
      if (f.f == 'N') {
        a += 'N';
        in_run = false;
      } else if (in_run) {
        runs.back() *= f.size;
      } else {
        a += static_cast<char>('a' + runs.size());
        runs.push_back(f.size);
        in_run = true;
      }
    }
    view.push_back(a);
  }
  if (runs.size() > 3) {
    g.FailNode(n, fmt::format("views {} as {}: each image's values in {} axes; tpusim's layers "
                              "hold 3",
                              ViewText(g, v), fmt::join(dims, " x "), runs.size()));
  }
  const size_t first = 3 - runs.size();
  std::array<int, 3> shape = {1, 1, 1};
  for (size_t r = 0; r < runs.size(); ++r) shape[first + r] = static_cast<int>(runs[r]);
  for (std::string& a : view)
    for (char& f : a)
      if (f != 'N') f = AxisChar(static_cast<int>(first) + (f - 'a'));
  v.view = view;
  v.shape = {shape[0], shape[1], shape[2]};
  return v;
}

Value Normalized(OnnxGraph& g, const onnx::NodeProto& n, const Value& v) {
  return Materialized(g, n, Reshaped(g, n, v, DimsOf(g, v)));
}

Value PerRow(OnnxGraph& g, const onnx::NodeProto& n, const Value& v, const char* what) {
  Value r = Normalized(g, n, v);
  if (r.view.empty() || r.view.back() != "2") {
    g.FailNode(n, fmt::format("{} along the last axis of {}, which holds more than one axis "
                              "of each image (or the batch); tpusim {} each image's values apart",
                              what, ViewText(g, v), what));
  }
  return r;
}

Value AddTensorLayer(OnnxGraph& g, const onnx::NodeProto& n, nn::Layer l, std::vector<int> inputs,
                     const Value& like) {
  Value out = like;
  out.axes.clear();  // no longer the model's input sequences
  const Value added = g.Add(n, std::move(l), std::move(inputs));
  out.layer = added.layer;
  out.shape = added.shape;
  return out;
}

Value Finished(OnnxGraph& g, const onnx::NodeProto& n, const Value& v) {
  Value r = Canonical(g, n, Normalized(g, n, v));
  for (const std::string& a : r.view)
    if (a.find('N') != std::string::npos && a != "N")
      g.Fail(
          fmt::format("the graph's output {} mixes the batch with an image's values; tpusim "
                      "gives each image's values apart: end with the batch as an axis of "
                      "its own",
                      ViewText(g, v)));
  return r;
}

}  // namespace tpu::import::onnx_graph
