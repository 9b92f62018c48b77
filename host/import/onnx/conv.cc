// See readers.h.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "host/common/errors.h"
#include "host/import/onnx/onnx_graph.h"
#include "host/import/onnx/readers.h"

namespace tpu::import::onnx_graph {

Value ReadConv(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {"group", "kernel_shape", "strides", "pads", "dilations", "auto_pad"});
  const Value& x = g.In(n, 0);
  if (!x.map) g.FailNode(n, "a convolution needs an image map, not a flattened vector");
  const onnx::TensorProto* wt = g.Constant(n, 1);
  if (!wt) g.FailNode(n, "has no weights");
  const std::vector<float> w = g.Floats(n, *wt);
  if (wt->dims_size() != 4) g.FailNode(n, "weights must be O x I x kh x kw (2-D convolutions)");
  const int64_t o = wt->dims(0), i = wt->dims(1), kh = wt->dims(2), kw = wt->dims(3);
  const int64_t group = g.IntAttr(n, "group", 1);
  const int c = x.shape.c;
  nn::Layer l;
  l.type = nn::LayerType::kConv2d;
  if (group == 1) {
    if (i != c)
      g.FailNode(n, fmt::format("weights expect {} input channels; the input has {}", i, c));
  } else if (group == c && i == 1 && o == c) {
    l.depthwise = true;
  } else {
    g.FailNode(n, fmt::format("groups = {} ({} filters of {} channels on {} channels): tpusim "
                              "imports groups = 1 and depthwise convolutions (groups = "
                              "channels, one filter per channel)",
                              group, o, i, c));
  }
  if (o < 1 || kh < 1 || kw < 1 || o > 65536 || kh > 1024 || kw > 1024) {
    g.FailNode(n, "impossible weight shape");
  }
  const auto ks = g.IntsAttr(n, "kernel_shape", {kh, kw});
  if (ks != std::vector<int64_t>{kh, kw}) g.FailNode(n, "kernel_shape does not match the weights");
  for (int64_t d : g.IntsAttr(n, "dilations", {1, 1})) {
    if (d != 1) g.FailNode(n, "dilation other than 1 is not supported");
  }
  l.stride = g.Stride(n);
  g.SetPadding(n, &l);
  g.ZeroPads(n, &l);
  l.name = g.NextName(l.depthwise ? "dwconv" : "conv");
  l.kernel_h = static_cast<int>(kh);
  l.kernel_w = static_cast<int>(kw);
  l.out.c = static_cast<int>(o);
  // O x I x kh x kw -> kh x kw x I x O
  Tensor<float> t;
  t.shape = {kh, kw, i, o};
  t.data.resize(w.size());
  for (int64_t a = 0; a < o; ++a)
    for (int64_t b = 0; b < i; ++b)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t xx = 0; xx < kw; ++xx)
          t.data[static_cast<size_t>(((y * kw + xx) * i + b) * o + a)] =
              w[static_cast<size_t>(((a * i + b) * kh + y) * kw + xx)];
  if (l.depthwise) {  // kh x kw x 1 x c -> kh x kw x c x 1 (same order), then expanded
    t.shape = {kh, kw, o, 1};
    t = nn::ExpandDepthwise(t);
  }
  l.weights = std::move(t);
  l.bias.shape = {o};
  l.bias.data.assign(static_cast<size_t>(o), 0.0f);
  if (const onnx::TensorProto* bt = g.Constant(n, 2)) {
    const std::vector<float> b = g.Floats(n, *bt);
    if (static_cast<int64_t>(b.size()) != o) g.FailNode(n, "bias size is not the output channels");
    l.bias.data = b;
  }
  return g.Add(n, std::move(l), {x.layer});
}

}  // namespace tpu::import::onnx_graph
