// See readers.h.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "host/common/errors.h"
#include "host/import/onnx/onnx_graph.h"
#include "host/import/onnx/readers.h"

namespace tpu::import::onnx_graph {
namespace {

// A MatMul or Gemm by weights of a transformer's tensor: on each position of its last axis.
Value TensorGemm(OnnxGraph& g, const onnx::NodeProto& n) {
  const bool gemm = n.op_type() == "Gemm";
  if (gemm && (g.IntAttr(n, "transA", 0) != 0 || g.FloatAttr(n, "alpha", 1.0f) != 1.0f ||
               g.FloatAttr(n, "beta", 1.0f) != 1.0f))
    g.FailNode(n, "only alpha = beta = 1 and transA = 0 are supported");
  const onnx::TensorProto* bt = g.Constant(n, 1);
  if (bt->dims_size() != 2) g.FailNode(n, "weights must be a matrix");
  const bool trans_b = gemm && g.IntAttr(n, "transB", 0) != 0;
  const int64_t k = bt->dims(trans_b ? 1 : 0), units = bt->dims(trans_b ? 0 : 1);
  Value v = TensorDense(g, n, TensorOf(g, n, 0), g.Floats(n, *bt), k, units, trans_b);
  if (const onnx::TensorProto* ct = gemm ? g.Constant(n, 2) : nullptr) {
    const std::vector<float> c = g.Floats(n, *ct);
    if (static_cast<int64_t>(c.size()) != units)
      g.FailNode(n, "bias C must have one value per output (no other broadcast is supported)");
    g.model().layers[static_cast<size_t>(v.layer)].bias.data = c;
  }
  return v;
}

}  // namespace

Value ReadGemm(OnnxGraph& g, const onnx::NodeProto& n) {
  const bool gemm = n.op_type() == "Gemm";
  if (!gemm && (!g.IsConstant(n, 1) || g.Raw(n, 0).part == "x / c")) return TensorMatMul(g, n);
  if (gemm)
    g.OnlyAttrs(n, {"alpha", "beta", "transA", "transB"});
  else
    g.OnlyAttrs(n, {});
  if (IsTensor(g.Raw(n, 0))) return TensorGemm(g, n);
  const Value x = g.In(n, 0);
  if (x.map && (x.shape.h != 1 || x.shape.w != 1)) {
    g.FailNode(n, "needs a flattened input; put Flatten before it");
  }
  const onnx::TensorProto* bt = g.Constant(n, 1);
  if (!bt) g.FailNode(n, "has no weights");
  const std::vector<float> b = g.Floats(n, *bt);
  if (bt->dims_size() != 2) g.FailNode(n, "weights must be a matrix");
  const bool trans_b = gemm && g.IntAttr(n, "transB", 0) != 0;
  if (gemm && (g.IntAttr(n, "transA", 0) != 0 || g.FloatAttr(n, "alpha", 1.0f) != 1.0f ||
               g.FloatAttr(n, "beta", 1.0f) != 1.0f)) {
    g.FailNode(n, "only alpha = beta = 1 and transA = 0 are supported");
  }
  const int64_t k = trans_b ? bt->dims(1) : bt->dims(0);
  const int64_t units = trans_b ? bt->dims(0) : bt->dims(1);
  const int64_t features = x.shape.Size();
  if (k != features) {
    g.FailNode(n, fmt::format("weights expect {} inputs; the input has {} features", k, features));
  }
  if (units < 1 || units > 1 << 20) g.FailNode(n, "impossible weight shape");
  nn::Layer l;
  l.type = nn::LayerType::kDense;
  l.name = g.NextName("fc");
  l.out = {1, 1, static_cast<int>(units)};
  l.weights.shape = {k, units};
  l.weights.data.resize(static_cast<size_t>(k * units));
  const nn::Shape3 m = x.chw;  // ONNX row (c, h, w) -> tpusim row (h, w, c)
  for (int64_t r = 0; r < k; ++r) {
    int64_t row = r;
    if (!x.map && m.h * m.w > 1) {
      const int64_t c = r / (int64_t{m.h} * m.w), hw = r % (int64_t{m.h} * m.w);
      row = hw * m.c + c;
    }
    for (int64_t u = 0; u < units; ++u) {
      l.weights.data[static_cast<size_t>(row * units + u)] =
          b[static_cast<size_t>(trans_b ? u * k + r : r * units + u)];
    }
  }
  l.bias.shape = {units};
  l.bias.data.assign(static_cast<size_t>(units), 0.0f);
  if (gemm) {
    if (const onnx::TensorProto* ct = g.Constant(n, 2)) {
      const std::vector<float> c = g.Floats(n, *ct);
      if (static_cast<int64_t>(c.size()) != units) {
        g.FailNode(n, "bias C must have one value per output (no other broadcast is supported)");
      }
      l.bias.data = c;
    }
  }
  int input = x.layer;
  if (x.map) {  // a 1 x 1 map: tpusim's dense layers read a flattened vector
    nn::Layer f;
    f.type = nn::LayerType::kFlatten;
    f.name = g.NextName("flatten");
    input = g.Add(n, std::move(f), {x.layer}).layer;
  }
  return g.Add(n, std::move(l), {input});
}

}  // namespace tpu::import::onnx_graph
