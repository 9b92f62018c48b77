// See readers.h.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "host/common/errors.h"
#include "host/import/onnx/onnx_graph.h"
#include "host/import/onnx/readers.h"

namespace tpu::import::onnx_graph {

Value ReadPool(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {"kernel_shape", "strides", "pads", "auto_pad", "ceil_mode", "dilations",
                  "storage_order", "count_include_pad"});
  const Value& x = g.In(n, 0);
  if (!x.map) g.FailNode(n, "pooling needs an image map");
  if (n.output_size() > 1 && !n.output(1).empty())
    g.FailNode(n, "the Indices output is not supported");
  const auto k = g.IntsAttr(n, "kernel_shape", {});
  if (k.size() != 2 || k[0] < 1 || k[1] < 1 || k[0] > 4096 || k[1] > 4096) {
    g.FailNode(n, "kernel_shape must be [kh, kw]");
  }
  const std::string auto_pad = g.StringAttr(n, "auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") g.FailNode(n, "auto_pad '" + auto_pad + "'");
  if (g.IntAttr(n, "ceil_mode", 0) != 0) g.FailNode(n, "ceil_mode = 1 is not supported");
  for (int64_t d : g.IntsAttr(n, "dilations", {1, 1})) {
    if (d != 1) g.FailNode(n, "dilation other than 1 is not supported");
  }
  nn::Layer l;
  const bool avg = n.op_type() == "AveragePool";
  l.type = avg ? nn::LayerType::kAvgPool2d : nn::LayerType::kMaxPool2d;
  l.name = g.NextName(avg ? "avgpool" : "maxpool");
  l.pool_h = static_cast<int>(k[0]);
  l.pool_w = static_cast<int>(k[1]);
  l.pool_stride = g.Stride(n);
  const auto pads = g.IntsAttr(n, "pads", {0, 0, 0, 0});
  if (pads.size() != 4) g.FailNode(n, "pads must have 4 values (top, left, bottom, right)");
  if (pads != std::vector<int64_t>(4, 0)) {
    if (avg && g.IntAttr(n, "count_include_pad", 0) == 0) {
      g.FailNode(n,
                 "average pooling with padding that the average does not count "
                 "(count_include_pad = 0) is not supported; tpusim averages over the whole "
                 "window (PyTorch's default, count_include_pad=True)");
    }
    for (int64_t p : pads)
      if (p < 0 || p > 1024) g.FailNode(n, "pads must lie in 0..1024");
    l.padding = "explicit";
    l.pad_top = static_cast<int>(pads[0]);
    l.pad_left = static_cast<int>(pads[1]);
    l.pad_bottom = static_cast<int>(pads[2]);
    l.pad_right = static_cast<int>(pads[3]);
  }
  g.ZeroPads(n, &l);
  return g.Add(n, std::move(l), {x.layer});
}

Value ReadGlobalPool(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {});
  const Value& x = g.In(n, 0);
  if (!x.map) g.FailNode(n, "pooling needs an image map");
  nn::Layer l;
  l.type = nn::LayerType::kAvgPool2d;
  l.global_pool = true;
  l.name = g.NextName("gap");
  return g.Add(n, std::move(l), {x.layer});
}

}  // namespace tpu::import::onnx_graph
