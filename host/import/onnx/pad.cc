// See readers.h.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "host/common/errors.h"
#include "host/import/onnx/onnx_graph.h"
#include "host/import/onnx/readers.h"

namespace tpu::import::onnx_graph {

// PyTorch writes a Pad of zeros before an AveragePool with padding (count_include_pad,
// its default) and sometimes an empty one. Zeros around the map's height and width become
// the padding of the Conv or AveragePool that reads them (ZeroPads), which pad with zeros
// that count; anything else is refused.
Value ReadPad(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {"mode", "pads", "value"});
  if (g.StringAttr(n, "mode", "constant") != "constant")
    g.FailNode(n, "only constant padding (with zeros) is supported");
  std::vector<int64_t> pads = g.IntsAttr(n, "pads", {});
  if (const onnx::TensorProto* t = g.Constant(n, 1)) pads = g.Ints(n, *t);
  bool zero_value = g.FloatAttr(n, "value", 0.0f) == 0.0f;
  if (n.input_size() > 2 && !n.input(2).empty()) {
    const onnx::TensorProto* v = g.Constant(n, 2);
    if (!v) g.FailNode(n, "the padding value must be a constant");
    for (float f : g.Floats(n, *v)) zero_value = zero_value && f == 0.0f;
  }
  const Value& x = g.In(n, 0);
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) return x;
  if (!zero_value) g.FailNode(n, "padding with a value other than 0 is not supported");
  if (!x.map || pads.size() != 8 || pads[0] || pads[1] || pads[4] || pads[5]) {
    g.FailNode(n,
               "only padding of an image map's height and width is supported (pads [0, 0, "
               "top, left, 0, 0, bottom, right])");
  }
  for (int64_t p : pads)
    if (p < 0 || p > 1024) g.FailNode(n, "pads must lie in 0..1024");
  g.zero_pads()[n.output(0)] = {pads[2], pads[3], pads[6], pads[7]};
  return x;
}

}  // namespace tpu::import::onnx_graph
