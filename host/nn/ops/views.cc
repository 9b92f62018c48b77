// A transformer's reshapes, transposes and slices of one image's tensor of h x w x c values
// (docs/transformers.md, "Tensors"): reshape views the same values in the same order as
// another h x w x c; transpose orders the axes anew (output axis k is input axis perm[k]);
// slice keeps values [start, end) of one axis. They move values and compute nothing.
#include <fmt/format.h>

#include <array>
#include <nlohmann/json.hpp>

#include "host/common/errors.h"
#include "host/nn/ops/op.h"
#include "host/nn/ops/transformer_ops.h"

namespace tpu::nn::ops {
namespace {

std::array<int, 3> Dims(const Shape3& s) { return {s.h, s.w, s.c}; }
Shape3 ShapeOf(const std::array<int, 3>& d) { return {d[0], d[1], d[2]}; }

// For each output value, the index of the input value it is (one image).
using IndexMap = std::vector<int64_t>;

// The map of layer l's output positions (h, w, c order), each input index from `at`.
template <typename At>
IndexMap MapOver(const Layer& l, At at) {
  const std::array<int, 3> out = Dims(l.out);
  IndexMap m;
  m.reserve(static_cast<size_t>(l.out.Size()));
  std::array<int, 3> o{};
  for (o[0] = 0; o[0] < out[0]; ++o[0])
    for (o[1] = 0; o[1] < out[1]; ++o[1])
      for (o[2] = 0; o[2] < out[2]; ++o[2]) m.push_back(at(o));
  return m;
}

IndexMap TransposeMap(const Layer& l) {
  const std::array<int, 3> in = Dims(l.in);
  const std::array<int64_t, 3> stride = {int64_t{in[1]} * in[2], in[2], 1};
  return MapOver(l, [&](const std::array<int, 3>& o) {
    int64_t i = 0;
    for (size_t k = 0; k < 3; ++k) i += o[k] * stride[static_cast<size_t>(l.perm[k])];
    return i;
  });
}

IndexMap SliceMap(const Layer& l) {
  const std::array<int, 3> in = Dims(l.in);
  return MapOver(l, [&](std::array<int, 3> i) {
    i[static_cast<size_t>(l.axis)] += l.start;
    return (int64_t{i[0]} * in[1] + i[1]) * in[2] + i[2];
  });
}

IndexMap MapOf(const Layer& l) {
  if (l.type == LayerType::kTranspose) return TransposeMap(l);
  if (l.type == LayerType::kSlice) return SliceMap(l);
  IndexMap m(static_cast<size_t>(l.out.Size()));
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<int64_t>(i);
  return m;
}

}  // namespace

std::vector<int64_t> ViewIndexMap(const Layer& l) { return MapOf(l); }

namespace {

void Forward(const Layer& l, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/,
             MatrixF* out) {
  const MatrixF& x = *xs[0];
  const IndexMap m = MapOf(l);
  out->resize(x.rows(), static_cast<Eigen::Index>(m.size()));
  for (Eigen::Index r = 0; r < x.rows(); ++r)
    for (size_t i = 0; i < m.size(); ++i) (*out)(r, static_cast<Eigen::Index>(i)) = x(r, m[i]);
}

// The gradient goes back to where each value came from (a slice's other values get 0).
void Backward(const Layer& l, const BackwardStep& s) {
  if (s.dx[0] == nullptr) return;
  const IndexMap m = MapOf(l);
  MatrixF& dx = *s.dx[0];
  dx = MatrixF::Zero(s.dy.rows(), l.in.Size());
  for (Eigen::Index r = 0; r < s.dy.rows(); ++r)
    for (size_t i = 0; i < m.size(); ++i) dx(r, m[i]) += s.dy(r, static_cast<Eigen::Index>(i));
}

template <typename T>
void Moved(const Layer& l, const T* x, T* y) {
  const IndexMap m = MapOf(l);
  for (size_t i = 0; i < m.size(); ++i) y[i] = x[m[i]];
}

void Int8(const Layer& l, const std::vector<const int8_t*>& xs, const std::vector<int>& /*ch*/,
          int8_t* y) {
  Moved(l, xs[0], y);
}

Bf16Values Bf16(const Bf16Layer& p, const std::vector<const Bf16Values*>& xs) {
  Bf16Values y(static_cast<size_t>(p.layer->out.Size()));
  Moved(*p.layer, xs[0]->data(), y.data());
  return y;
}

void InferReshape(const Model& /*m*/, const std::string& where, Layer* l) {
  if (l->out.Size() != l->in.Size() || l->out.h < 1 || l->out.w < 1 || l->out.c < 1) {
    throw UsageError(
        fmt::format("{}: reshape views {} x {} x {} as {} x {} x {}, another number "
                    "of values",
                    where, l->in.h, l->in.w, l->in.c, l->out.h, l->out.w, l->out.c));
  }
}

void ReadReshape(const nlohmann::json& lj, const std::string& where, Layer* l) {
  const std::vector<int32_t> s = VectorOf<int32_t>(lj, "shape", 3, where);
  l->out = {s[0], s[1], s[2]};
}

void WriteReshape(const Layer& l, nlohmann::json* lj) {
  (*lj)["shape"] = {l.out.h, l.out.w, l.out.c};
}

void InferTranspose(const Model& /*m*/, const std::string& where, Layer* l) {
  std::array<int, 3> sorted = l->perm;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != std::array<int, 3>{0, 1, 2})
    throw UsageError(where + ": transpose's perm must order the axes 0, 1, 2");
  const std::array<int, 3> in = Dims(l->in);
  l->out = ShapeOf({in[static_cast<size_t>(l->perm[0])], in[static_cast<size_t>(l->perm[1])],
                    in[static_cast<size_t>(l->perm[2])]});
}

void ReadTranspose(const nlohmann::json& lj, const std::string& where, Layer* l) {
  const std::vector<int32_t> p = VectorOf<int32_t>(lj, "perm", 3, where);
  l->perm = {p[0], p[1], p[2]};
}

void WriteTranspose(const Layer& l, nlohmann::json* lj) {
  (*lj)["perm"] = {l.perm[0], l.perm[1], l.perm[2]};
}

void InferSlice(const Model& /*m*/, const std::string& where, Layer* l) {
  std::array<int, 3> d = Dims(l->in);
  if (l->axis < 0 || l->axis > 2 || l->start < 0 || l->end <= l->start ||
      l->end > d[static_cast<size_t>(l->axis)]) {
    throw UsageError(fmt::format("{}: slice [{}, {}) of axis {} of a {} x {} x {} tensor", where,
                                 l->start, l->end, l->axis, l->in.h, l->in.w, l->in.c));
  }
  d[static_cast<size_t>(l->axis)] = l->end - l->start;
  l->out = ShapeOf(d);
}

void ReadSlice(const nlohmann::json& lj, const std::string& where, Layer* l) {
  const std::vector<int32_t> v = VectorOf<int32_t>(lj, "slice", 3, where);
  l->axis = v[0];
  l->start = v[1];
  l->end = v[2];
}

void WriteSlice(const Layer& l, nlohmann::json* lj) { (*lj)["slice"] = {l.axis, l.start, l.end}; }

// A view's operation: its fields' reading and writing and its shape's rule.
OpDef View(LayerType type, const char* name,
           void (*read)(const nlohmann::json&, const std::string&, Layer*),
           void (*write)(const Layer&, nlohmann::json*),
           void (*infer)(const Model&, const std::string&, Layer*)) {
  OpDef d;
  d.type = type;
  d.name = name;
  d.read = read;
  d.write = write;
  d.infer = infer;
  d.version = GraphVersion;
  d.macs = NoMacs;
  d.forward = Forward;
  d.backward = Backward;
  d.int8 = Int8;
  d.quantize = KeepScale;
  d.bf16 = Bf16;
  return d;
}

}  // namespace

const OpDef& ReshapeOp() {
  static const OpDef op =
      View(LayerType::kReshape, "reshape", ReadReshape, WriteReshape, InferReshape);
  return op;
}

const OpDef& TransposeOp() {
  static const OpDef op =
      View(LayerType::kTranspose, "transpose", ReadTranspose, WriteTranspose, InferTranspose);
  return op;
}

const OpDef& SliceOp() {
  static const OpDef op = View(LayerType::kSlice, "slice", ReadSlice, WriteSlice, InferSlice);
  return op;
}

}  // namespace tpu::nn::ops
