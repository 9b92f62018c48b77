// See onnx_graph.h.
#include "host/import/onnx/onnx_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "host/common/errors.h"
#include "host/import/onnx/readers.h"
#include "host/nn/ops/op.h"

namespace tpu::import::onnx_graph {
namespace {

constexpr int64_t kMaxElements = int64_t{1} << 31;

}  // namespace

bool LinearInWeights(const nn::Layer& l) {
  return l.HasWeights() && nn::ops::Op(l.type).takes_activation;
}

Value Plain(Value v) {
  std::string roles;
  for (const char r : v.axes)
    if (r != '1') roles += r;
  if (roles != "NH") return v;
  v.axes.clear();
  v.map = false;
  v.chw = {1, 1, 1};
  return v;
}

nn::Model OnnxGraph::Run() {
  if (!proto_.has_graph() || proto_.graph().node_size() == 0) {
    Fail("the model has no graph nodes (is it an ONNX model?)");
  }
  const onnx::GraphProto& g = proto_.graph();
  for (const onnx::TensorProto& t : g.initializer()) constants_[t.name()] = &t;
  ReadInput(g);
  CountUses(g);
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    node_index_ = i;
    if (n.op_type() == "Constant") {
      AddConstant(n);
      continue;
    }
    Node(n);
  }
  if (model_.layers.empty()) Fail("the graph has no layers tpusim can run");
  if (g.output_size() == 1) {  // a tensor's values in the output's order (tensors.cc)
    const auto it = values_.find(g.output(0).name());
    if (it != values_.end() && IsTensor(it->second) && it->second.layer != nn::kModelInput)
      it->second = Finished(*this, g.node(g.node_size() - 1), it->second);
  }
  CheckOutput(g);
  Infer("the last node");
  return model_;
}

void OnnxGraph::Fail(const std::string& what) const { throw UsageError(path_ + ": " + what); }

void OnnxGraph::FailNode(const onnx::NodeProto& n, const std::string& what) const {
  throw UsageError(fmt::format("{}: node '{}' ({}): {}", path_, NodeName(n), n.op_type(), what));
}

std::string OnnxGraph::NodeName(const onnx::NodeProto& n) const {
  return n.name().empty() ? fmt::format("#{}", node_index_) : n.name();
}

void OnnxGraph::CountUses(const onnx::GraphProto& g) {
  for (const onnx::NodeProto& n : g.node())
    for (const std::string& in : n.input()) ++uses_[in];
  for (const onnx::ValueInfoProto& o : g.output()) ++uses_[o.name()];
}

void OnnxGraph::CheckOutput(const onnx::GraphProto& g) {
  if (g.output_size() != 1) {
    Fail(fmt::format("the graph has {} outputs; tpusim imports models with one", g.output_size()));
  }
  const std::string& name = g.output(0).name();
  const auto it = values_.find(name);
  if (it == values_.end() || !Plain(it->second).axes.empty() ||
      it->second.layer != static_cast<int>(model_.layers.size()) - 1) {
    Fail("the graph's output '" + name + "' is not what its last layer computes");
  }
  const std::vector<std::vector<int>> consumers = model_.Consumers();
  for (size_t i = 0; i + 1 < model_.layers.size(); ++i) {
    if (consumers[i].empty()) {
      Fail("layer '" + model_.layers[i].name +
           "' computes a value that nothing reads; tpusim models have one output");
    }
  }
}

void OnnxGraph::ReadInput(const onnx::GraphProto& g) {
  const onnx::ValueInfoProto* input = nullptr;
  for (const onnx::ValueInfoProto& v : g.input()) {
    if (constants_.count(v.name())) continue;  // older exporters list weights as inputs
    if (input) {
      Fail("the graph has more than one input ('" + input->name() + "', '" + v.name() +
           "'); tpusim imports single-input models");
    }
    input = &v;
  }
  if (!input) Fail("the graph has no input");
  const auto& type = input->type();
  const auto& shape = type.tensor_type().shape();
  const bool tokens = type.has_tensor_type() && shape.dim_size() == 2 &&
                      type.tensor_type().elem_type() == onnx::TensorProto::INT64;
  if (!tokens &&
      (!type.has_tensor_type() || type.tensor_type().elem_type() != onnx::TensorProto::FLOAT)) {
    Fail("input '" + input->name() +
         "' is not a float tensor (nor N x T int64 token ids); export the fp32 model");
  }
  std::vector<int64_t> dims;
  for (const auto& d : shape.dim()) dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  std::string text;
  for (int64_t d : dims) text += (text.empty() ? "" : " x ") + (d < 0 ? "?" : std::to_string(d));
  SetInput(g, input->name(), dims, text, tokens);
}

void OnnxGraph::SetInput(const onnx::GraphProto& g, const std::string& name,
                         const std::vector<int64_t>& dims, const std::string& text, bool tokens) {
  const auto fixed = [&](std::initializer_list<size_t> axes) {
    for (const size_t a : axes)
      if (dims[a] <= 0 || dims[a] > 65536) return false;
    return true;
  };
  Value v;
  if (tokens && fixed({1})) {  // token ids (an int64 input): 1 x T x 1, one a position
    model_.input = {1, static_cast<int>(dims[1]), 1};
    batch_ = std::max<int64_t>(dims[0], 1);
    v.view = {"N", "1"};
  } else if (dims.size() == 3) {  // sequences: T x N x X where an LSTM reads them as they are
    bool time_first = opt_.time_first;
    for (const onnx::NodeProto& n : g.node())
      time_first |= n.op_type() == "LSTM" && n.input_size() > 0 && n.input(0) == name;
    const size_t t = time_first ? 0 : 1;
    if (!fixed({t, 2}))
      Fail(
          fmt::format("input '{}' is {}: tpusim imports sequences of T steps of X values (N x "
                      "T x X, or T x N x X read by an LSTM) with T and X fixed: export with a "
                      "fixed sequence length",
                      name, text));
    model_.input = {1, static_cast<int>(dims[t]), static_cast<int>(dims[2])};
    v.axes = time_first ? "TNX" : "NTX";
    batch_ = std::max<int64_t>(dims[1 - t], 1);
    v.view = time_first ? std::vector<std::string>{"1", "N", "2"}
                        : std::vector<std::string>{"N", "1", "2"};
  } else if (dims.size() == 4) {
    if (!fixed({1, 2, 3}))
      Fail(
          fmt::format("input '{}' is {} (4 dimensions); tpusim imports an N x C x H x W image "
                      "batch with C, H and W fixed: export with a fixed input size",
                      name, text));
    model_.input = {static_cast<int>(dims[2]), static_cast<int>(dims[3]),
                    static_cast<int>(dims[1])};
    batch_ = std::max<int64_t>(dims[0], 1);
  } else {
    Fail(fmt::format(
        "input '{}' is {} ({} dimensions); tpusim imports image networks, whose input is an "
        "N x C x H x W batch, LSTMs and transformers over N x T x X sequences, and "
        "transformers over N x T int64 token ids (of a fixed T): a flat vector of floats is "
        "not an input it takes (docs/import.md lists what it imports)",
        name, text.empty() ? "a scalar" : text, dims.size()));
  }
  SetDataset(name);
  v.shape = model_.input;
  if (batch_ == 1) v.view = WithoutBatch(v.view);
  values_[name] = v;
}

void OnnxGraph::SetDataset(const std::string& name) {
  // No data set given: a 1 x 32 x 32 input is an MNIST model, anything else takes float
  // inputs (--inputs, --synthetic).
  const bool mnist_shape = model_.input == nn::Shape3{32, 32, 1};
  model_.dataset = !opt_.dataset.empty() ? opt_.dataset : mnist_shape ? "mnist" : "none";
  model_.preprocess = model_.dataset == "none" ? "none" : "mnist32";
  if (model_.preprocess == "mnist32" && !mnist_shape) {
    const nn::Shape3& in = model_.input;
    Fail(fmt::format(
        "input '{}' is {} x {} x {} (C x H x W); a model for {} takes 28 x 28 grey images "
        "padded to 1 x 32 x 32 (pixel / 255; preprocess mnist32): export it for that input, "
        "or import it without {} to run it on {} or {} data",
        name, in.c, in.h, in.w, model_.dataset, Field("dataset"), Field("inputs"),
        Field("synthetic")));
  }
}

void OnnxGraph::AddConstant(const onnx::NodeProto& n) {
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (a.name() == "value" && a.has_t() && n.output_size() == 1) {
      constants_[n.output(0)] = &a.t();
      return;
    }
  }
  FailNode(n, "only Constant nodes holding a tensor ('value') are supported");
}

const onnx::TensorProto* OnnxGraph::Constant(const onnx::NodeProto& n, int input) const {
  if (n.input_size() <= input || n.input(input).empty()) return nullptr;
  auto it = constants_.find(n.input(input));
  if (it == constants_.end()) {
    FailNode(n, "input '" + n.input(input) +
                    "' must be a constant (an initializer); tpusim imports fixed weights");
  }
  return it->second;
}

int64_t OnnxGraph::Elements(const onnx::NodeProto& n, const onnx::TensorProto& t) const {
  int64_t e = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || d > kMaxElements || (d > 0 && e > kMaxElements / d)) {
      FailNode(n, "tensor '" + t.name() + "' has an impossible shape");
    }
    e *= d;
  }
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    FailNode(n, "tensor '" + t.name() +
                    "' keeps its data in an external file; export with the weights inside "
                    "the .onnx file");
  }
  return e;
}

std::vector<float> OnnxGraph::Floats(const onnx::NodeProto& n, const onnx::TensorProto& t,
                                     bool infinities) const {
  const int64_t e = Elements(n, t);
  if (t.data_type() != onnx::TensorProto::FLOAT) {
    FailNode(n, fmt::format("tensor '{}' has ONNX data type {}; tpusim imports float32 "
                            "models (export the fp32 model; tpusim quantizes it)",
                            t.name(), t.data_type()));
  }
  std::vector<float> v;
  if (!t.raw_data().empty()) {
    if (static_cast<int64_t>(t.raw_data().size()) != e * 4) {
      FailNode(n, "tensor '" + t.name() + "' holds the wrong number of bytes for its shape");
    }
    v.resize(static_cast<size_t>(e));
    std::memcpy(v.data(), t.raw_data().data(), t.raw_data().size());  // little-endian
  } else {
    if (t.float_data_size() != e) {
      FailNode(n, "tensor '" + t.name() + "' holds the wrong number of values for its shape");
    }
    v.assign(t.float_data().begin(), t.float_data().end());
  }
  for (float x : v) {
    if (std::isnan(x) || (!infinities && std::isinf(x)))
      FailNode(n, "tensor '" + t.name() + "' holds NaN or infinity");
  }
  return v;
}

std::vector<int64_t> OnnxGraph::Ints(const onnx::NodeProto& n, const onnx::TensorProto& t) const {
  const int64_t e = Elements(n, t);
  std::vector<int64_t> v;
  if (t.data_type() == onnx::TensorProto::INT64) {
    if (!t.raw_data().empty()) {
      if (static_cast<int64_t>(t.raw_data().size()) != e * 8) {
        FailNode(n, "tensor '" + t.name() + "' holds the wrong number of bytes");
      }
      v.resize(static_cast<size_t>(e));
      std::memcpy(v.data(), t.raw_data().data(), t.raw_data().size());
    } else {
      if (t.int64_data_size() != e) FailNode(n, "tensor '" + t.name() + "' is inconsistent");
      v.assign(t.int64_data().begin(), t.int64_data().end());
    }
    return v;
  }
  FailNode(n, "tensor '" + t.name() + "' must hold int64 values");
}

const onnx::AttributeProto* OnnxGraph::Attr(const onnx::NodeProto& n,
                                            const std::string& name) const {
  for (const onnx::AttributeProto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t OnnxGraph::IntAttr(const onnx::NodeProto& n, const std::string& name, int64_t def) const {
  const auto* a = Attr(n, name);
  return a ? a->i() : def;
}

float OnnxGraph::FloatAttr(const onnx::NodeProto& n, const std::string& name, float def) const {
  const auto* a = Attr(n, name);
  return a ? a->f() : def;
}

std::vector<int64_t> OnnxGraph::IntsAttr(const onnx::NodeProto& n, const std::string& name,
                                         std::vector<int64_t> def) const {
  const auto* a = Attr(n, name);
  if (!a) return def;
  return {a->ints().begin(), a->ints().end()};
}

std::string OnnxGraph::StringAttr(const onnx::NodeProto& n, const std::string& name,
                                  const std::string& def) const {
  const auto* a = Attr(n, name);
  return a ? a->s() : def;
}

void OnnxGraph::OnlyAttrs(const onnx::NodeProto& n,
                          std::initializer_list<const char*> known) const {
  for (const onnx::AttributeProto& a : n.attribute()) {
    bool ok = false;
    for (const char* k : known) ok |= a.name() == k;
    if (!ok) FailNode(n, "attribute '" + a.name() + "' is not supported");
  }
}

const Value& OnnxGraph::Raw(const onnx::NodeProto& n, int i) const {
  if (n.input_size() <= i || n.input(i).empty()) FailNode(n, "an input is missing");
  const auto it = values_.find(n.input(i));
  if (it == values_.end()) {
    FailNode(n, "reads '" + n.input(i) +
                    "', which no node before it computes (the graph must list nodes in order)");
  }
  return it->second;
}

const Value& OnnxGraph::In(const onnx::NodeProto& n, int i) const {
  const Value& v = Raw(n, i);
  const std::string& a = v.axes;
  if (!v.part.empty()) {
    FailNode(n, fmt::format("reads '{}', the {} of '{}' in a chain that tpusim imports as one "
                            "layer (a LayerNorm, a GELU, a matmul's scaled operand); {}",
                            n.input(i), v.part, v.of, PartChains()));
  }
  if (a.empty()) return v;
  const std::string what = fmt::format("reads '{}', ", n.input(i));
  if (a == "shape" || a == "zeros")
    FailNode(n, what +
                    "a tensor computed from a shape; tpusim reads such tensors only as "
                    "the zero initial state of an LSTM (docs/import.md, \"Sequences\")");
  if (a == "cell")
    FailNode(n, what + "an LSTM's cell state c; tpusim's lstm layer gives its last h only");
  if (v.layer == nn::kModelInput)
    FailNode(n, fmt::format("{}the model's input sequences ({}); tpusim reads sequences with an "
                            "LSTM node only (docs/import.md, \"Sequences\")",
                            what, a));
  FailNode(n, fmt::format("{}an LSTM's h ({}); tpusim's lstm layer gives its last step's h "
                          "only: read Y_h (h[-1]) or the last step (out[:, -1])",
                          what, a));
}

bool OnnxGraph::IsConstant(const onnx::NodeProto& n, int i) const {
  return n.input_size() > i && constants_.count(n.input(i)) != 0;
}

void OnnxGraph::Node(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (!n.domain().empty() && n.domain() != "ai.onnx") {
    FailNode(n, "operators of domain '" + n.domain() + "' are not supported");
  }
  if (op.rfind("QLinear", 0) == 0 || op == "QuantizeLinear" || op == "DequantizeLinear" ||
      op == "ConvInteger" || op == "MatMulInteger" || op == "DynamicQuantizeLinear") {
    FailNode(n,
             "quantized ONNX graphs are not imported (their rounding is not the chip's); "
             "export the fp32 model and quantize it with tpusim quantize");
  }
  if (n.output_size() < 1 || n.output(0).empty()) FailNode(n, "has no output");
  if (op == "Identity" && IsConstant(n, 0)) {  // an exporter's alias of a weight
    constants_[n.output(0)] = constants_.at(n.input(0));
    return;
  }
  for (int k = 0; k < n.input_size(); ++k) {
    if (zero_pads_.count(n.input(k)) && !(k == 0 && (op == "Conv" || op == "AveragePool"))) {
      FailNode(n,
               "reads the output of a Pad node; a Pad is imported as the padding of the "
               "Conv or AveragePool that reads it, and only so");
    }
  }
  const Reader* reader = ReaderOf(op);
  if (reader == nullptr) FailNode(n, std::string("not supported; tpusim imports ") + Supported());
  values_[n.output(0)] = reader->read(*this, n);
}

void OnnxGraph::Infer(const std::string& what) {
  try {
    nn::InferShapes(&model_);
  } catch (const UsageError& e) {
    Fail(what + ": " + e.what());
  }
}

Value OnnxGraph::Add(const onnx::NodeProto& n, nn::Layer l, std::vector<int> inputs) {
  l.inputs = std::move(inputs);
  model_.layers.push_back(std::move(l));
  Infer(fmt::format("node '{}' ({})", NodeName(n), n.op_type()));
  const nn::Layer& added = model_.layers.back();
  Value v;
  v.layer = static_cast<int>(model_.layers.size()) - 1;
  v.map = added.type != nn::LayerType::kFlatten && added.type != nn::LayerType::kDense;
  v.shape = added.out;
  return v;
}

std::string OnnxGraph::NextName(const std::string& base) {
  return base + std::to_string(++count_[base]);
}

nn::Layer* OnnxGraph::Joinable(const onnx::NodeProto& n, bool weighted) {
  const Value& v = In(n, 0);
  if (v.layer == nn::kModelInput || uses_[n.input(0)] != 1) return nullptr;
  nn::Layer& l = model_.layers[static_cast<size_t>(v.layer)];
  const bool kind = LinearInWeights(l) || (!weighted && l.type == nn::LayerType::kAdd);
  return kind && l.activation == nn::Activation::kNone ? &l : nullptr;
}

int OnnxGraph::Stride(const onnx::NodeProto& n) const {
  const auto s = IntsAttr(n, "strides", {1, 1});
  if (s.size() != 2 || s[0] != s[1] || s[0] < 1 || s[0] > 64) {
    FailNode(n, "strides must be equal on both axes (tpusim layers have one stride)");
  }
  return static_cast<int>(s[0]);
}

void OnnxGraph::SetPadding(const onnx::NodeProto& n, nn::Layer* l) const {
  const std::string auto_pad = StringAttr(n, "auto_pad", "NOTSET");
  const auto pads = IntsAttr(n, "pads", {0, 0, 0, 0});
  if (pads.size() != 4) FailNode(n, "pads must have 4 values (top, left, bottom, right)");
  for (int64_t p : pads) {
    if (p < 0 || p > 1024) FailNode(n, "pads must lie in 0..1024");
  }
  if (auto_pad == "SAME_UPPER") {
    l->padding = "same";
  } else if (auto_pad == "VALID" || (auto_pad == "NOTSET" && pads == std::vector<int64_t>(4, 0))) {
    l->padding = "valid";
  } else if (auto_pad == "NOTSET") {
    l->padding = "explicit";
    l->pad_top = static_cast<int>(pads[0]);
    l->pad_left = static_cast<int>(pads[1]);
    l->pad_bottom = static_cast<int>(pads[2]);
    l->pad_right = static_cast<int>(pads[3]);
  } else {
    FailNode(n, "auto_pad '" + auto_pad + "' is not supported (use explicit pads or SAME_UPPER)");
  }
}

void OnnxGraph::ZeroPads(const onnx::NodeProto& n, nn::Layer* l) const {
  const auto it = zero_pads_.find(n.input(0));
  if (it == zero_pads_.end()) return;
  if (l->padding == "same") FailNode(n, "a Pad node before auto_pad SAME_UPPER");
  l->padding = "explicit";
  l->pad_top += static_cast<int>(it->second[0]);
  l->pad_left += static_cast<int>(it->second[1]);
  l->pad_bottom += static_cast<int>(it->second[2]);
  l->pad_right += static_cast<int>(it->second[3]);
}

}  // namespace tpu::import::onnx_graph
