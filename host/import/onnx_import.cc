// ONNX to tpusim model (see onnx_import.h and docs/import.md).
#include "host/import/onnx_import.h"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "host/common/errors.h"

namespace tpu::import {
namespace {

constexpr const char* kSupported =
    "Conv (groups 1 or depthwise), Gemm, MatMul, Add (a bias, or two activations: a residual "
    "add), Concat (of channels), Relu, Clip(0, 6), MaxPool, AveragePool, GlobalAveragePool, "
    "Flatten, Reshape (to [batch, features]), BatchNormalization (after Conv/Gemm), Dropout, "
    "Identity, Pad (zeros, read by a Conv or AveragePool), and a final Softmax/LogSoftmax";

constexpr int64_t kMaxElements = int64_t{1} << 31;

// A tensor the graph computes: the output of a tpusim layer (or the model's input), an
// image map (NCHW in ONNX, h x w x c in tpusim) or a vector (N x features). A vector made by
// flattening a C x H x W map is in (c, h, w) order in ONNX and (h, w, c) order in tpusim;
// `chw` remembers the map for the dense layer that reads it.
struct Value {
  int layer = nn::kModelInput;
  bool map = true;
  nn::Shape3 shape;         // the map's h, w, c; a vector: 1 x 1 x features
  nn::Shape3 chw{1, 1, 1};  // the map a vector was flattened from (h * w > 1: reorder)
};

class Importer {
 public:
  Importer(const onnx::ModelProto& proto, std::string path, OnnxImportOptions options)
      : proto_(proto), path_(std::move(path)), opt_(std::move(options)) {}

  nn::Model Run() {
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
    CheckOutput(g);
    Infer("the last node");
    return model_;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const { throw UsageError(path_ + ": " + what); }
  [[noreturn]] void FailNode(const onnx::NodeProto& n, const std::string& what) const {
    throw UsageError(fmt::format("{}: node '{}' ({}): {}", path_, NodeName(n), n.op_type(), what));
  }
  std::string NodeName(const onnx::NodeProto& n) const {
    return n.name().empty() ? fmt::format("#{}", node_index_) : n.name();
  }

  // How many nodes (and graph outputs) read each tensor: an activation, bias or BatchNorm
  // joins the layer before it only when nothing else reads that layer's output.
  void CountUses(const onnx::GraphProto& g) {
    for (const onnx::NodeProto& n : g.node())
      for (const std::string& in : n.input()) ++uses_[in];
    for (const onnx::ValueInfoProto& o : g.output()) ++uses_[o.name()];
  }

  // The graph's one output must be the last layer's (tpusim's model output).
  void CheckOutput(const onnx::GraphProto& g) {
    if (g.output_size() != 1) {
      Fail(
          fmt::format("the graph has {} outputs; tpusim imports models with one", g.output_size()));
    }
    const std::string& name = g.output(0).name();
    const auto it = values_.find(name);
    if (it == values_.end() || it->second.layer != static_cast<int>(model_.layers.size()) - 1) {
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

  void ReadInput(const onnx::GraphProto& g) {
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
    if (!type.has_tensor_type() || type.tensor_type().elem_type() != onnx::TensorProto::FLOAT) {
      Fail("input '" + input->name() + "' is not a float tensor; export the fp32 model");
    }
    const auto& shape = type.tensor_type().shape();
    std::vector<int64_t> dims;
    for (const auto& d : shape.dim()) dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    std::string text;
    for (int64_t d : dims) text += (text.empty() ? "" : " x ") + (d < 0 ? "?" : std::to_string(d));
    if (dims.size() != 4) {
      Fail(fmt::format(
          "input '{}' is {} ({} dimensions); tpusim imports image networks, whose input is an "
          "N x C x H x W batch: a sequence (Conv1d, nn.LSTM, a transformer's tokens) or a flat "
          "vector is not an input it takes (docs/import.md lists what it imports; tpusim lstm "
          "runs LSTM layers)",
          input->name(), text.empty() ? "a scalar" : text, dims.size()));
    }
    if (dims[1] <= 0 || dims[2] <= 0 || dims[3] <= 0 || dims[1] > 65536 || dims[2] > 65536 ||
        dims[3] > 65536) {
      Fail(
          fmt::format("input '{}' is {} ({} dimensions); tpusim imports an N x C x H x W image "
                      "batch with C, H and W fixed: export with a fixed input size",
                      input->name(), text.empty() ? "a scalar" : text, dims.size()));
    }
    model_.input = {static_cast<int>(dims[2]), static_cast<int>(dims[3]),
                    static_cast<int>(dims[1])};
    // No data set given: a 1 x 32 x 32 input is an MNIST model, anything else takes float
    // inputs (--inputs, --synthetic).
    const bool mnist_shape = model_.input == nn::Shape3{32, 32, 1};
    model_.dataset = !opt_.dataset.empty() ? opt_.dataset : mnist_shape ? "mnist" : "none";
    model_.preprocess = model_.dataset == "none" ? "none" : "mnist32";
    if (model_.preprocess == "mnist32" && !mnist_shape) {
      Fail(fmt::format(
          "input '{}' is {} x {} x {} (C x H x W); a model for {} takes 28 x 28 grey images "
          "padded to 1 x 32 x 32 (pixel / 255; preprocess mnist32): export it for that input, "
          "or import it without {} to run it on {} or {} data",
          input->name(), dims[1], dims[2], dims[3], model_.dataset, Field("dataset"),
          Field("inputs"), Field("synthetic")));
    }
    Value v;
    v.shape = model_.input;
    values_[input->name()] = v;
  }

  void AddConstant(const onnx::NodeProto& n) {
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.name() == "value" && a.has_t() && n.output_size() == 1) {
        constants_[n.output(0)] = &a.t();
        return;
      }
    }
    FailNode(n, "only Constant nodes holding a tensor ('value') are supported");
  }

  // ---- tensors and attributes ---------------------------------------------------------

  const onnx::TensorProto* Constant(const onnx::NodeProto& n, int input) const {
    if (n.input_size() <= input || n.input(input).empty()) return nullptr;
    auto it = constants_.find(n.input(input));
    if (it == constants_.end()) {
      FailNode(n, "input '" + n.input(input) +
                      "' must be a constant (an initializer); tpusim imports fixed weights");
    }
    return it->second;
  }

  int64_t Elements(const onnx::NodeProto& n, const onnx::TensorProto& t) const {
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

  std::vector<float> Floats(const onnx::NodeProto& n, const onnx::TensorProto& t) const {
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
      if (!std::isfinite(x)) FailNode(n, "tensor '" + t.name() + "' holds NaN or infinity");
    }
    return v;
  }

  std::vector<int64_t> Ints(const onnx::NodeProto& n, const onnx::TensorProto& t) const {
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

  const onnx::AttributeProto* Attr(const onnx::NodeProto& n, const std::string& name) const {
    for (const onnx::AttributeProto& a : n.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  int64_t IntAttr(const onnx::NodeProto& n, const std::string& name, int64_t def) const {
    const auto* a = Attr(n, name);
    return a ? a->i() : def;
  }
  float FloatAttr(const onnx::NodeProto& n, const std::string& name, float def) const {
    const auto* a = Attr(n, name);
    return a ? a->f() : def;
  }
  std::vector<int64_t> IntsAttr(const onnx::NodeProto& n, const std::string& name,
                                std::vector<int64_t> def) const {
    const auto* a = Attr(n, name);
    if (!a) return def;
    return {a->ints().begin(), a->ints().end()};
  }
  std::string StringAttr(const onnx::NodeProto& n, const std::string& name,
                         const std::string& def) const {
    const auto* a = Attr(n, name);
    return a ? a->s() : def;
  }
  void OnlyAttrs(const onnx::NodeProto& n, std::initializer_list<const char*> known) const {
    for (const onnx::AttributeProto& a : n.attribute()) {
      bool ok = false;
      for (const char* k : known) ok |= a.name() == k;
      if (!ok) FailNode(n, "attribute '" + a.name() + "' is not supported");
    }
  }

  // ---- the graph ------------------------------------------------------------------------

  // The value a node reads as its input `i` (a computed tensor, not a constant).
  const Value& In(const onnx::NodeProto& n, int i) const {
    if (n.input_size() <= i || n.input(i).empty()) FailNode(n, "an input is missing");
    const auto it = values_.find(n.input(i));
    if (it == values_.end()) {
      FailNode(n, "reads '" + n.input(i) +
                      "', which no node before it computes (the graph must list nodes in order)");
    }
    return it->second;
  }
  bool IsConstant(const onnx::NodeProto& n, int i) const {
    return n.input_size() > i && constants_.count(n.input(i)) != 0;
  }

  void Node(const onnx::NodeProto& n) {
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
    Value out;
    if (op == "Conv") {
      out = Conv(n);
    } else if (op == "Gemm" || op == "MatMul") {
      out = Dense(n);
    } else if (op == "Add") {
      out = AddNode(n);
    } else if (op == "Concat") {
      out = ConcatNode(n);
    } else if (op == "BatchNormalization") {
      out = BatchNorm(n);
    } else if (op == "Relu") {
      OnlyAttrs(n, {});
      out = Activate(n, nn::Activation::kRelu);
    } else if (op == "Clip") {
      out = Clip(n);
    } else if (op == "MaxPool" || op == "AveragePool") {
      out = Pool(n);
    } else if (op == "GlobalAveragePool") {
      out = GlobalPool(n);
    } else if (op == "Flatten" || op == "Reshape") {
      out = Flatten(n);
    } else if (op == "Pad") {
      out = PadNode(n);
    } else if (op == "Dropout" || op == "Identity") {
      if (op == "Dropout" && n.input_size() > 2 && !n.input(2).empty()) {
        const onnx::TensorProto* training = Constant(n, 2);  // a bool
        bool on = training->raw_data().find_first_not_of('\0') != std::string::npos;
        for (int v : training->int32_data()) on |= v != 0;
        if (on) FailNode(n, "dropout in training mode; export the model in eval() mode");
      }
      out = In(n, 0);
    } else if (op == "Softmax" || op == "LogSoftmax") {
      out = Softmax(n);
    } else {
      FailNode(n, std::string("not supported; tpusim imports ") + kSupported);
    }
    values_[n.output(0)] = out;
  }

  void Infer(const std::string& what) {
    try {
      nn::InferShapes(&model_);
    } catch (const UsageError& e) {
      Fail(what + ": " + e.what());
    }
  }

  // Adds `l` reading `inputs`, infers its shape and returns its output.
  Value Add(const onnx::NodeProto& n, nn::Layer l, std::vector<int> inputs) {
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

  std::string NextName(const std::string& base) { return base + std::to_string(++count_[base]); }

  // The layer whose output node n's input 0 is, when n may join it: a conv, dense or add
  // layer (or, with `weighted`, only conv and dense) without an activation yet, whose
  // output nothing else reads. nullptr otherwise.
  nn::Layer* Joinable(const onnx::NodeProto& n, bool weighted) {
    const Value& v = In(n, 0);
    if (v.layer == nn::kModelInput || uses_[n.input(0)] != 1) return nullptr;
    nn::Layer& l = model_.layers[static_cast<size_t>(v.layer)];
    const bool kind = l.HasWeights() || (!weighted && l.type == nn::LayerType::kAdd);
    return kind && l.activation == nn::Activation::kNone ? &l : nullptr;
  }

  Value Conv(const onnx::NodeProto& n) {
    OnlyAttrs(n, {"group", "kernel_shape", "strides", "pads", "dilations", "auto_pad"});
    const Value& x = In(n, 0);
    if (!x.map) FailNode(n, "a convolution needs an image map, not a flattened vector");
    const onnx::TensorProto* wt = Constant(n, 1);
    if (!wt) FailNode(n, "has no weights");
    const std::vector<float> w = Floats(n, *wt);
    if (wt->dims_size() != 4) FailNode(n, "weights must be O x I x kh x kw (2-D convolutions)");
    const int64_t o = wt->dims(0), i = wt->dims(1), kh = wt->dims(2), kw = wt->dims(3);
    const int64_t group = IntAttr(n, "group", 1);
    const int c = x.shape.c;
    nn::Layer l;
    l.type = nn::LayerType::kConv2d;
    if (group == 1) {
      if (i != c)
        FailNode(n, fmt::format("weights expect {} input channels; the input has {}", i, c));
    } else if (group == c && i == 1 && o == c) {
      l.depthwise = true;
    } else {
      FailNode(n, fmt::format("groups = {} ({} filters of {} channels on {} channels): tpusim "
                              "imports groups = 1 and depthwise convolutions (groups = "
                              "channels, one filter per channel)",
                              group, o, i, c));
    }
    if (o < 1 || kh < 1 || kw < 1 || o > 65536 || kh > 1024 || kw > 1024) {
      FailNode(n, "impossible weight shape");
    }
    const auto ks = IntsAttr(n, "kernel_shape", {kh, kw});
    if (ks != std::vector<int64_t>{kh, kw}) FailNode(n, "kernel_shape does not match the weights");
    for (int64_t d : IntsAttr(n, "dilations", {1, 1})) {
      if (d != 1) FailNode(n, "dilation other than 1 is not supported");
    }
    l.stride = Stride(n);
    SetPadding(n, &l);
    ZeroPads(n, &l);
    l.name = NextName(l.depthwise ? "dwconv" : "conv");
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
    if (const onnx::TensorProto* bt = Constant(n, 2)) {
      const std::vector<float> b = Floats(n, *bt);
      if (static_cast<int64_t>(b.size()) != o) FailNode(n, "bias size is not the output channels");
      l.bias.data = b;
    }
    return Add(n, std::move(l), {x.layer});
  }

  int Stride(const onnx::NodeProto& n) const {
    const auto s = IntsAttr(n, "strides", {1, 1});
    if (s.size() != 2 || s[0] != s[1] || s[0] < 1 || s[0] > 64) {
      FailNode(n, "strides must be equal on both axes (tpusim layers have one stride)");
    }
    return static_cast<int>(s[0]);
  }

  void SetPadding(const onnx::NodeProto& n, nn::Layer* l) const {
    const std::string auto_pad = StringAttr(n, "auto_pad", "NOTSET");
    const auto pads = IntsAttr(n, "pads", {0, 0, 0, 0});
    if (pads.size() != 4) FailNode(n, "pads must have 4 values (top, left, bottom, right)");
    for (int64_t p : pads) {
      if (p < 0 || p > 1024) FailNode(n, "pads must lie in 0..1024");
    }
    if (auto_pad == "SAME_UPPER") {
      l->padding = "same";
    } else if (auto_pad == "VALID" ||
               (auto_pad == "NOTSET" && pads == std::vector<int64_t>(4, 0))) {
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

  Value Dense(const onnx::NodeProto& n) {
    const bool gemm = n.op_type() == "Gemm";
    if (gemm)
      OnlyAttrs(n, {"alpha", "beta", "transA", "transB"});
    else
      OnlyAttrs(n, {});
    const Value x = In(n, 0);
    if (x.map && (x.shape.h != 1 || x.shape.w != 1)) {
      FailNode(n, "needs a flattened input; put Flatten before it");
    }
    const onnx::TensorProto* bt = Constant(n, 1);
    if (!bt) FailNode(n, "has no weights");
    const std::vector<float> b = Floats(n, *bt);
    if (bt->dims_size() != 2) FailNode(n, "weights must be a matrix");
    const bool trans_b = gemm && IntAttr(n, "transB", 0) != 0;
    if (gemm && (IntAttr(n, "transA", 0) != 0 || FloatAttr(n, "alpha", 1.0f) != 1.0f ||
                 FloatAttr(n, "beta", 1.0f) != 1.0f)) {
      FailNode(n, "only alpha = beta = 1 and transA = 0 are supported");
    }
    const int64_t k = trans_b ? bt->dims(1) : bt->dims(0);
    const int64_t units = trans_b ? bt->dims(0) : bt->dims(1);
    const int64_t features = x.shape.Size();
    if (k != features) {
      FailNode(n, fmt::format("weights expect {} inputs; the input has {} features", k, features));
    }
    if (units < 1 || units > 1 << 20) FailNode(n, "impossible weight shape");
    nn::Layer l;
    l.type = nn::LayerType::kDense;
    l.name = NextName("fc");
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
      if (const onnx::TensorProto* ct = Constant(n, 2)) {
        const std::vector<float> c = Floats(n, *ct);
        if (static_cast<int64_t>(c.size()) != units) {
          FailNode(n, "bias C must have one value per output (no other broadcast is supported)");
        }
        l.bias.data = c;
      }
    }
    int input = x.layer;
    if (x.map) {  // a 1 x 1 map: tpusim's dense layers read a flattened vector
      nn::Layer f;
      f.type = nn::LayerType::kFlatten;
      f.name = NextName("flatten");
      input = Add(n, std::move(f), {x.layer}).layer;
    }
    return Add(n, std::move(l), {input});
  }

  // Add: a bias (one input a constant) joins the layer before it; two activations make a
  // residual add.
  Value AddNode(const onnx::NodeProto& n) {
    OnlyAttrs(n, {});
    if (n.input_size() != 2) FailNode(n, "Add takes two inputs");
    if (IsConstant(n, 0) || IsConstant(n, 1)) return AddBias(n, IsConstant(n, 1) ? 1 : 0);
    const Value a = In(n, 0), b = In(n, 1);
    if (a.map != b.map || !(a.shape == b.shape)) {
      FailNode(n, fmt::format("adds a {} x {} x {} {} to a {} x {} x {} {}; tpusim adds two "
                              "activations of one shape (no broadcast)",
                              b.shape.h, b.shape.w, b.shape.c, b.map ? "map" : "vector", a.shape.h,
                              a.shape.w, a.shape.c, a.map ? "map" : "vector"));
    }
    nn::Layer l;
    l.type = nn::LayerType::kAdd;
    l.name = NextName("add");
    Value v = Add(n, std::move(l), {a.layer, b.layer});
    v.map = a.map;
    v.chw = a.chw;
    return v;
  }

  Value AddBias(const onnx::NodeProto& n, int constant_input) {
    const onnx::NodeProto* node = &n;
    const int data_input = 1 - constant_input;
    const Value& x = In(n, data_input);
    const bool alone = uses_[n.input(data_input)] == 1;
    nn::Layer* l = x.layer == nn::kModelInput || !alone
                       ? nullptr
                       : &model_.layers[static_cast<size_t>(x.layer)];
    if (!l || !l->HasWeights() || l->activation != nn::Activation::kNone) {
      FailNode(*node,
               "an Add of a constant must directly follow a Conv, Gemm or MatMul whose "
               "output nothing else reads (tpusim adds it to that layer's bias)");
    }
    const onnx::TensorProto* t = Constant(n, constant_input);
    const std::vector<float> b = Floats(n, *t);
    if (static_cast<int64_t>(b.size()) != l->out.c) {
      FailNode(n, fmt::format("adds {} values to {} output channels; tpusim imports Add of a "
                              "constant as a per-channel bias",
                              b.size(), l->out.c));
    }
    for (size_t c = 0; c < b.size(); ++c) l->bias.data[c] += b[c];
    return x;
  }

  Value ConcatNode(const onnx::NodeProto& n) {
    OnlyAttrs(n, {"axis"});
    if (IntAttr(n, "axis", 0) != 1) FailNode(n, "tpusim concatenates channels (axis = 1) only");
    if (n.input_size() < 2) FailNode(n, "Concat needs two or more inputs");
    std::vector<int> inputs;
    for (int i = 0; i < n.input_size(); ++i) {
      if (IsConstant(n, i)) FailNode(n, "concatenates a constant; tpusim concatenates activations");
      const Value& v = In(n, i);
      if (!v.map) FailNode(n, "concatenates flattened vectors; tpusim concatenates maps");
      inputs.push_back(v.layer);
    }
    nn::Layer l;
    l.type = nn::LayerType::kConcat;
    l.name = NextName("concat");
    return Add(n, std::move(l), inputs);
  }

  Value BatchNorm(const onnx::NodeProto& n) {
    OnlyAttrs(n, {"epsilon", "momentum", "training_mode", "spatial"});
    if (IntAttr(n, "training_mode", 0) != 0) FailNode(n, "export the model in eval() mode");
    nn::Layer* joined = Joinable(n, /*weighted=*/true);
    if (!joined) {
      FailNode(n,
               "BatchNormalization must directly follow a Conv, Gemm or MatMul whose output "
               "nothing else reads, before any activation (tpusim folds it into its weights)");
    }
    nn::Layer& l = *joined;
    const float eps = FloatAttr(n, "epsilon", 1e-5f);
    std::vector<std::vector<float>> p;
    for (int i = 1; i <= 4; ++i) {
      const onnx::TensorProto* t = Constant(n, i);
      if (!t) FailNode(n, "needs scale, B, mean and var");
      p.push_back(Floats(n, *t));
      if (static_cast<int64_t>(p.back().size()) != l.out.c) {
        FailNode(n, "its parameters do not have one value per channel");
      }
    }
    const int64_t cout = l.out.c, rows = l.weights.Size() / cout;
    for (int64_t c = 0; c < cout; ++c) {
      const auto ci = static_cast<size_t>(c);
      if (!(p[3][ci] + eps > 0)) FailNode(n, "a variance plus epsilon is not positive");
      const double s = p[0][ci] / std::sqrt(double{p[3][ci]} + eps);
      for (int64_t r = 0; r < rows; ++r) {
        float& w = l.weights.data[static_cast<size_t>(r * cout + c)];
        w = static_cast<float>(w * s);
      }
      l.bias.data[ci] = static_cast<float>((l.bias.data[ci] - p[2][ci]) * s + p[1][ci]);
    }
    return In(n, 0);
  }

  Value Activate(const onnx::NodeProto& n, nn::Activation a) {
    if (nn::Layer* l = Joinable(n, /*weighted=*/false)) {
      l->activation = a;
      return In(n, 0);
    }
    // ReLU and ReLU6 are monotonic, so after a max pooling they equal the same activation
    // before it: Conv -> MaxPool -> Relu becomes a conv with ReLU, then the pooling.
    const Value& x = In(n, 0);
    if (x.layer != nn::kModelInput && uses_[n.input(0)] == 1) {
      const nn::Layer& pool = model_.layers[static_cast<size_t>(x.layer)];
      if (pool.type == nn::LayerType::kMaxPool2d && pool.inputs[0] != nn::kModelInput) {
        nn::Layer& before = model_.layers[static_cast<size_t>(pool.inputs[0])];
        const std::vector<std::vector<int>> readers = model_.Consumers();
        if (before.HasWeights() && before.activation == nn::Activation::kNone &&
            readers[static_cast<size_t>(pool.inputs[0])].size() == 1) {
          before.activation = a;
          return x;
        }
      }
    }
    FailNode(n, n.op_type() +
                    " must follow a Conv, Gemm, MatMul or a residual Add whose output nothing "
                    "else reads (tpusim applies it in that layer), or a MaxPool of one");
  }

  Value Clip(const onnx::NodeProto& n) {
    OnlyAttrs(n, {"min", "max"});
    float lo = FloatAttr(n, "min", -INFINITY), hi = FloatAttr(n, "max", INFINITY);
    if (const onnx::TensorProto* t = Constant(n, 1)) {
      const auto v = Floats(n, *t);
      if (v.size() != 1) FailNode(n, "min must be a scalar");
      lo = v[0];
    }
    if (const onnx::TensorProto* t = Constant(n, 2)) {
      const auto v = Floats(n, *t);
      if (v.size() != 1) FailNode(n, "max must be a scalar");
      hi = v[0];
    }
    if (lo == 0.0f && hi == 6.0f) return Activate(n, nn::Activation::kRelu6);
    if (lo == 0.0f && std::isinf(hi)) return Activate(n, nn::Activation::kRelu);
    FailNode(n, fmt::format("Clip({}, {}): tpusim imports Clip(0, 6) (ReLU6) and Clip(0) (ReLU)",
                            lo, hi));
  }

  // PyTorch writes a Pad of zeros before an AveragePool with padding (count_include_pad,
  // its default) and sometimes an empty one. Zeros around the map's height and width become
  // the padding of the Conv or AveragePool that reads them (ZeroPads), which pad with zeros
  // that count; anything else is refused.
  Value PadNode(const onnx::NodeProto& n) {
    OnlyAttrs(n, {"mode", "pads", "value"});
    if (StringAttr(n, "mode", "constant") != "constant")
      FailNode(n, "only constant padding (with zeros) is supported");
    std::vector<int64_t> pads = IntsAttr(n, "pads", {});
    if (const onnx::TensorProto* t = Constant(n, 1)) pads = Ints(n, *t);
    bool zero_value = FloatAttr(n, "value", 0.0f) == 0.0f;
    if (n.input_size() > 2 && !n.input(2).empty()) {
      const onnx::TensorProto* v = Constant(n, 2);
      if (!v) FailNode(n, "the padding value must be a constant");
      for (float f : Floats(n, *v)) zero_value = zero_value && f == 0.0f;
    }
    const Value& x = In(n, 0);
    if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) return x;
    if (!zero_value) FailNode(n, "padding with a value other than 0 is not supported");
    if (!x.map || pads.size() != 8 || pads[0] || pads[1] || pads[4] || pads[5]) {
      FailNode(n,
               "only padding of an image map's height and width is supported (pads [0, 0, "
               "top, left, 0, 0, bottom, right])");
    }
    for (int64_t p : pads)
      if (p < 0 || p > 1024) FailNode(n, "pads must lie in 0..1024");
    zero_pads_[n.output(0)] = {pads[2], pads[3], pads[6], pads[7]};
    return x;
  }

  // Adds the zeros of a Pad node that `n` reads (PadNode) to the layer's padding.
  void ZeroPads(const onnx::NodeProto& n, nn::Layer* l) const {
    const auto it = zero_pads_.find(n.input(0));
    if (it == zero_pads_.end()) return;
    if (l->padding == "same") FailNode(n, "a Pad node before auto_pad SAME_UPPER");
    l->padding = "explicit";
    l->pad_top += static_cast<int>(it->second[0]);
    l->pad_left += static_cast<int>(it->second[1]);
    l->pad_bottom += static_cast<int>(it->second[2]);
    l->pad_right += static_cast<int>(it->second[3]);
  }

  Value Pool(const onnx::NodeProto& n) {
    OnlyAttrs(n, {"kernel_shape", "strides", "pads", "auto_pad", "ceil_mode", "dilations",
                  "storage_order", "count_include_pad"});
    const Value& x = In(n, 0);
    if (!x.map) FailNode(n, "pooling needs an image map");
    if (n.output_size() > 1 && !n.output(1).empty())
      FailNode(n, "the Indices output is not supported");
    const auto k = IntsAttr(n, "kernel_shape", {});
    if (k.size() != 2 || k[0] < 1 || k[1] < 1 || k[0] > 4096 || k[1] > 4096) {
      FailNode(n, "kernel_shape must be [kh, kw]");
    }
    const std::string auto_pad = StringAttr(n, "auto_pad", "NOTSET");
    if (auto_pad != "NOTSET" && auto_pad != "VALID") FailNode(n, "auto_pad '" + auto_pad + "'");
    if (IntAttr(n, "ceil_mode", 0) != 0) FailNode(n, "ceil_mode = 1 is not supported");
    for (int64_t d : IntsAttr(n, "dilations", {1, 1})) {
      if (d != 1) FailNode(n, "dilation other than 1 is not supported");
    }
    nn::Layer l;
    const bool avg = n.op_type() == "AveragePool";
    l.type = avg ? nn::LayerType::kAvgPool2d : nn::LayerType::kMaxPool2d;
    l.name = NextName(avg ? "avgpool" : "maxpool");
    l.pool_h = static_cast<int>(k[0]);
    l.pool_w = static_cast<int>(k[1]);
    l.pool_stride = Stride(n);
    const auto pads = IntsAttr(n, "pads", {0, 0, 0, 0});
    if (pads.size() != 4) FailNode(n, "pads must have 4 values (top, left, bottom, right)");
    if (pads != std::vector<int64_t>(4, 0)) {
      if (avg && IntAttr(n, "count_include_pad", 0) == 0) {
        FailNode(n,
                 "average pooling with padding that the average does not count "
                 "(count_include_pad = 0) is not supported; tpusim averages over the whole "
                 "window (PyTorch's default, count_include_pad=True)");
      }
      for (int64_t p : pads)
        if (p < 0 || p > 1024) FailNode(n, "pads must lie in 0..1024");
      l.padding = "explicit";
      l.pad_top = static_cast<int>(pads[0]);
      l.pad_left = static_cast<int>(pads[1]);
      l.pad_bottom = static_cast<int>(pads[2]);
      l.pad_right = static_cast<int>(pads[3]);
    }
    ZeroPads(n, &l);
    return Add(n, std::move(l), {x.layer});
  }

  Value GlobalPool(const onnx::NodeProto& n) {
    OnlyAttrs(n, {});
    const Value& x = In(n, 0);
    if (!x.map) FailNode(n, "pooling needs an image map");
    nn::Layer l;
    l.type = nn::LayerType::kAvgPool2d;
    l.global_pool = true;
    l.name = NextName("gap");
    return Add(n, std::move(l), {x.layer});
  }

  Value Flatten(const onnx::NodeProto& n) {
    const Value x = In(n, 0);
    const int64_t features = x.shape.Size();
    if (n.op_type() == "Flatten") {
      OnlyAttrs(n, {"axis"});
      if (IntAttr(n, "axis", 1) != 1) FailNode(n, "only axis = 1 (batch x features) is supported");
    } else {
      OnlyAttrs(n, {"allowzero"});
      const onnx::TensorProto* t = Constant(n, 1);
      if (!t) FailNode(n, "has no shape");
      const auto s = Ints(n, *t);
      const bool ok = s.size() == 2 && (s[1] == features || (s[1] == -1 && s[0] != -1)) &&
                      (s[0] == -1 || s[0] == 0 || s[0] >= 1);
      if (!ok) FailNode(n, fmt::format("tpusim imports Reshape to [batch, {}] only", features));
    }
    if (!x.map) return x;  // already a vector
    nn::Layer l;
    l.type = nn::LayerType::kFlatten;
    l.name = NextName("flatten");
    Value v = Add(n, std::move(l), {x.layer});
    v.chw = x.shape;
    return v;
  }

  Value Softmax(const onnx::NodeProto& n) {
    nn::Layer* l = Joinable(n, /*weighted=*/true);
    if (!l || l->type != nn::LayerType::kDense || uses_[n.output(0)] != 1 ||
        In(n, 0).layer != static_cast<int>(model_.layers.size()) - 1) {
      FailNode(n,
               "only a final Softmax/LogSoftmax after a dense layer (Gemm/MatMul) is "
               "supported");
    }
    l->activation = nn::Activation::kSoftmax;
    return In(n, 0);
  }

  const onnx::ModelProto& proto_;
  std::string path_;
  OnnxImportOptions opt_;
  nn::Model model_;
  std::map<std::string, const onnx::TensorProto*> constants_;
  std::map<std::string, int> count_;
  std::map<std::string, Value> values_;  // every tensor computed so far
  // Outputs of Pad nodes of zeros: their top, left, bottom, right (PadNode).
  std::map<std::string, std::array<int64_t, 4>> zero_pads_;
  std::map<std::string, int> uses_;  // how many nodes (and outputs) read each tensor
  int node_index_ = 0;
};

}  // namespace

nn::Model ImportOnnxBytes(const std::string& bytes, const std::string& path,
                          const OnnxImportOptions& options) {
  onnx::ModelProto proto;
  if (bytes.empty() || !proto.ParseFromString(bytes)) {
    throw UsageError(path +
                     ": not an ONNX model (the file is empty, truncated or of another kind); "
                     "export one with torch.onnx.export or tf2onnx");
  }
  nn::Model m = Importer(proto, path, options).Run();
  m.name = options.name.empty() ? std::filesystem::path(path).stem().string() : options.name;
  return m;
}

nn::Model ImportOnnx(const std::string& path, const OnnxImportOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot open '" + path + "'");
  std::ostringstream s;
  s << in.rdbuf();
  if (!in.good() && !in.eof()) throw UsageError("cannot read '" + path + "'");
  return ImportOnnxBytes(s.str(), path, options);
}

}  // namespace tpu::import
