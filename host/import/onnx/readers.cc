// The table of ONNX operators tpusim imports (readers.h), and the two that pass their
// input through.
#include "host/import/onnx/readers.h"

#include <fmt/format.h>

#include <utility>
#include <vector>

namespace tpu::import::onnx_graph {

// Dropout (in eval mode) and Identity: the value they read.
Value ReadPassThrough(OnnxGraph& g, const onnx::NodeProto& n) {
  if (n.op_type() == "Dropout" && n.input_size() > 2 && !n.input(2).empty()) {
    const onnx::TensorProto* training = g.Constant(n, 2);  // a bool
    bool on = training->raw_data().find_first_not_of('\0') != std::string::npos;
    for (int v : training->int32_data()) on |= v != 0;
    if (on) g.FailNode(n, "dropout in training mode; export the model in eval() mode");
  }
  return g.In(n, 0);
}

nn::Layer* WeightedBefore(OnnxGraph& g, const onnx::NodeProto& n, int data_input) {
  const Value& x = g.In(n, data_input);
  if (x.layer == nn::kModelInput || g.Uses(n.input(data_input)) != 1) return nullptr;
  nn::Layer* l = &g.model().layers[static_cast<size_t>(x.layer)];
  const bool weighted = LinearInWeights(*l) || l->type == nn::LayerType::kLayerNorm;
  return weighted && l->activation == nn::Activation::kNone ? l : nullptr;
}

Value JoinOfOneShape(OnnxGraph& g, const onnx::NodeProto& n, nn::LayerType type, const char* prefix,
                     const char* text, const char* verbs) {
  const Value a = g.In(n, 0), b = g.In(n, 1);
  if (a.map != b.map || !(a.shape == b.shape)) {
    const auto shape = [](const Value& v) {
      return fmt::format("{} x {} x {} {}", v.shape.h, v.shape.w, v.shape.c,
                         v.map ? "map" : "vector");
    };
    g.FailNode(n,
               fmt::format(fmt::runtime(text), fmt::arg("a", shape(a)), fmt::arg("b", shape(b))) +
                   fmt::format("; tpusim {} two activations of one shape (no broadcast)", verbs));
  }
  nn::Layer l;
  l.type = type;
  l.name = g.NextName(prefix);
  Value v = g.Add(n, std::move(l), {a.layer, b.layer});
  v.map = a.map;
  v.chw = a.chw;
  return v;
}

namespace {

const std::vector<Reader>& Readers() {
  static const std::vector<Reader> readers = {
#define TPUSIM_ONNX(OP, READ, WHAT) {#OP, READ, WHAT},
#include "host/import/onnx/readers.def"
#undef TPUSIM_ONNX
  };
  return readers;
}

}  // namespace

const Reader* ReaderOf(const std::string& op_type) {
  for (const Reader& r : Readers())
    if (op_type == r.op_type) return &r;
  return nullptr;
}

const std::string& Supported() {
  static const std::string text = [] {
    std::vector<std::string> items;
    for (const Reader& r : Readers())
      if (items.empty() || items.back() != r.what) items.emplace_back(r.what);
    std::string s;
    for (size_t i = 0; i < items.size(); ++i)
      s += (i == 0 ? "" : i + 1 == items.size() ? ", and " : ", ") + items[i];
    return s;
  }();
  return text;
}

}  // namespace tpu::import::onnx_graph
