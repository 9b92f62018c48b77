// See readers.h: ONNX's LSTM as tpusim's lstm layer (host/nn/ops/lstm.cc): one direction,
// PyTorch's gates and activations, from a zero state, over the model's input sequences;
// docs/import.md, "Sequences".
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "host/import/onnx/onnx_graph.h"
#include "host/import/onnx/readers.h"

namespace tpu::import::onnx_graph {
namespace {

// ONNX's gates are i, o, f, c; tpusim's PyTorch's i, f, g (ONNX's c), o: tpusim gate k is
// ONNX gate kOnnx[k].
constexpr int64_t kOnnx[] = {0, 2, 3, 1};

void CheckAttributes(OnnxGraph& g, const onnx::NodeProto& n) {
  g.OnlyAttrs(n, {"hidden_size", "direction", "layout", "activations", "input_forget"});
  if (g.StringAttr(n, "direction", "forward") != "forward")
    g.FailNode(n,
               "tpusim's lstm layer runs forward (one direction): a bidirectional LSTM is "
               "not imported");
  if (g.IntAttr(n, "layout", 0) != 0 || g.IntAttr(n, "input_forget", 0) != 0)
    g.FailNode(n, "only layout 0 and input_forget 0 are supported");
  if (const onnx::AttributeProto* a = g.Attr(n, "activations")) {
    const std::vector<std::string> want = {"Sigmoid", "Tanh", "Tanh"};
    if (!std::equal(a->strings().begin(), a->strings().end(), want.begin(), want.end()))
      g.FailNode(n, "only the activations Sigmoid, Tanh, Tanh (PyTorch's) are supported");
  }
}

// Input i (W, R or B) as a constant of `dims`.
std::vector<float> Weights(OnnxGraph& g, const onnx::NodeProto& n, int i,
                           const std::vector<int64_t>& dims) {
  const onnx::TensorProto* t = g.Constant(n, i);
  if (!t) g.FailNode(n, fmt::format("input {} (the weights) is missing", i));
  if (!std::equal(t->dims().begin(), t->dims().end(), dims.begin(), dims.end())) {
    std::string want;
    for (const int64_t d : dims) want += (want.empty() ? "" : " x ") + std::to_string(d);
    g.FailNode(n, fmt::format("input '{}' must be {}", n.input(i), want));
  }
  return g.Floats(n, *t);
}

// initial_h or initial_c (input i): absent, or zeros.
void CheckZeroState(OnnxGraph& g, const onnx::NodeProto& n, int i) {
  if (n.input_size() <= i || n.input(i).empty()) return;
  bool zeros = false;
  if (g.IsConstant(n, i)) {
    const std::vector<float> v = g.Floats(n, *g.Constant(n, i));
    zeros = std::all_of(v.begin(), v.end(), [](float x) { return x == 0; });
  } else {
    zeros = g.Raw(n, i).axes == "zeros";
  }
  if (!zeros)
    g.FailNode(n, fmt::format("its initial state '{}' is not zeros; tpusim's lstm layer starts "
                              "from h = c = 0",
                              n.input(i)));
}

// The sequence the LSTM reads: the model's input, T x N x X.
const Value& Sequence(OnnxGraph& g, const onnx::NodeProto& n) {
  const Value& x = g.Raw(n, 0);
  if (x.layer != nn::kModelInput && x.axes.find('T') != std::string::npos)
    g.FailNode(n,
               "reads another LSTM's every step (a stacked LSTM, num_layers > 1); tpusim's "
               "lstm layer gives its last step's h only");
  if (x.layer != nn::kModelInput || x.axes != "TNX")
    g.FailNode(n, fmt::format("reads '{}'; tpusim's lstm layer reads the model's input "
                              "sequences, T x N x X ({})",
                              n.input(0), x.axes.empty() ? "not a sequence" : x.axes));
  if (n.input_size() > 4 && !n.input(4).empty()) {
    const std::vector<int64_t> lens = g.Ints(n, *g.Constant(n, 4));
    const int64_t t = x.shape.w;
    if (std::any_of(lens.begin(), lens.end(), [&](int64_t v) { return v != t; }))
      g.FailNode(n, fmt::format("sequence_lens must all be the {} steps", t));
  }
  if (n.input_size() > 7 && !n.input(7).empty()) g.FailNode(n, "peepholes (P) are not supported");
  CheckZeroState(g, n, 5);
  CheckZeroState(g, n, 6);
  return x;
}

}  // namespace

// W (1 x 4H x X), R (1 x 4H x H) and B (1 x 8H: W's biases, then R's) as the layer's
// [x; h] weights, (X + H) x 4H, and its 4H biases, the gates in PyTorch's order.
Value ReadLstm(OnnxGraph& g, const onnx::NodeProto& n) {
  CheckAttributes(g, n);
  const Value x = Sequence(g, n);
  const int64_t h = g.IntAttr(n, "hidden_size", 0), xs = x.shape.c;
  if (h < 1 || h > 65536) g.FailNode(n, "hidden_size must be 1 to 65536");
  const std::vector<float> w = Weights(g, n, 1, {1, 4 * h, xs});
  const std::vector<float> r = Weights(g, n, 2, {1, 4 * h, h});
  const std::vector<float> b = n.input_size() > 3 && !n.input(3).empty()
                                   ? Weights(g, n, 3, {1, 8 * h})
                                   : std::vector<float>(static_cast<size_t>(8 * h), 0.0f);
  nn::Layer l;
  l.type = nn::LayerType::kLstm;
  l.name = g.NextName("lstm");
  l.out = {1, 1, static_cast<int>(h)};
  l.weights.shape = {xs + h, 4 * h};
  l.weights.data.resize(static_cast<size_t>((xs + h) * 4 * h));
  l.bias.shape = {4 * h};
  l.bias.data.resize(static_cast<size_t>(4 * h));
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t j = 0; j < h; ++j) {
      const int64_t row = kOnnx[k] * h + j, col = k * h + j;
      for (int64_t i = 0; i < xs + h; ++i)
        l.weights.data[static_cast<size_t>(i * 4 * h + col)] =
            i < xs ? w[static_cast<size_t>(row * xs + i)]
                   : r[static_cast<size_t>(row * h + i - xs)];
      l.bias.data[static_cast<size_t>(col)] =
          b[static_cast<size_t>(row)] + b[static_cast<size_t>(4 * h + row)];
    }
  Value y = g.Add(n, std::move(l), {x.layer});
  y.axes = "T1NH";
  Value last = y, cell = y;
  last.axes = "1NH";
  cell.axes = "cell";
  if (n.output_size() > 1 && !n.output(1).empty()) g.Define(n.output(1), last);
  if (n.output_size() > 2 && !n.output(2).empty()) g.Define(n.output(2), cell);
  return y;
}

}  // namespace tpu::import::onnx_graph
