// The ONNX graph being imported (onnx_import.h, docs/import.md), and what each operator's
// reader (readers.h) builds on: the model so far, the value each tensor holds, the
// constants, tensors and attributes read with clear errors naming the node.
#pragma once

#include <onnx/onnx_pb.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "host/import/onnx_import.h"
#include "host/nn/model.h"

namespace tpu::import::onnx_graph {

// A tensor the graph computes: the output of a tpusim layer (or the model's input), an
// image map (NCHW in ONNX, h x w x c in tpusim) or a vector (N x features). A vector made by
// flattening a C x H x W map is in (c, h, w) order in ONNX and (h, w, c) order in tpusim;
// `chw` remembers the map for the dense layer that reads it.
struct Value {
  int layer = nn::kModelInput;
  bool map = true;
  nn::Shape3 shape;         // the map's h, w, c; a vector: 1 x 1 x features
  nn::Shape3 chw{1, 1, 1};  // the map a vector was flattened from (h * w > 1: reorder)
  // Empty for those. Otherwise a tensor that only some readers take (sequences.cc), by the
  // roles of its axes: N the batch, T the steps, X the inputs, H the hidden units, 1 an axis
  // of one (ONNX's LSTM's directions): "NTX" or "TNX" the model's input sequences (`layer`
  // kModelInput); "T1NH", "TNH", "NTH" an LSTM's every step of h (`layer` the lstm layer,
  // which computes only the last step); "1NH" its last h; or one word: "cell" its last c,
  // "shape" sizes computed from a shape, "zeros" zeros of such sizes.
  std::string axes;
  // A transformer's tensor (tensors.cc, docs/import.md, "Transformers"): its ONNX axes in
  // order, each the product of its factors, outer first: 'N' the batch, '0' '1' '2' the h, w
  // and c axes of one image's values, which are `layer`'s output viewed as `shape` (a
  // reshape not yet made where they differ). Empty: not a tensor. An export of a batch of one
  // has no 'N' (every axis is the image's).
  std::vector<std::string> view;
  // Sizes known at import: a Shape's, and what Gather, Slice, Unsqueeze, Concat and
  // arithmetic make of them and of constants (`axes` "shape" too, for an LSTM's zero state).
  bool known = false;
  std::vector<int64_t> ints;
  // Part of a chain that becomes one layer (tensors.cc: a LayerNorm's, a GELU's, a matmul's
  // scaled operand): what part, the tensor `of` which it is, and a number (epsilon, a
  // divisor).
  std::string part, of;
  double k = 0;
};

// Whether l computes x W + b (a conv or dense layer, not an LSTM): what a bias, a scale, a
// BatchNorm or an activation may join.
bool LinearInWeights(const nn::Layer& l);

// v as an ordinary vector where its axes are N and H (and axes of one): an LSTM's last h.
Value Plain(Value v);

class OnnxGraph {
 public:
  OnnxGraph(const onnx::ModelProto& proto, std::string path, OnnxImportOptions options)
      : proto_(proto), path_(std::move(path)), opt_(std::move(options)) {}

  // The model the graph is, shapes inferred and checked; throws UsageError naming the file
  // (and the node) for anything it cannot represent exactly.
  nn::Model Run();

  const OnnxImportOptions& options() const { return opt_; }
  // The batch the graph was exported for (its input's first size; 1 where not fixed).
  int64_t batch() const { return batch_; }
  // The model so far: the layers of the nodes read until now.
  nn::Model& model() { return model_; }
  // How many nodes (and graph outputs) read tensor `name`.
  int Uses(const std::string& name) const {
    const auto it = uses_.find(name);
    return it == uses_.end() ? 0 : it->second;
  }
  // The zero paddings of Pad nodes, by their output, for the Conv or AveragePool that reads it.
  std::map<std::string, std::array<int64_t, 4>>& zero_pads() { return zero_pads_; }

  // Throws UsageError naming the file, and the node and its operator.
  [[noreturn]] void Fail(const std::string& what) const;
  [[noreturn]] void FailNode(const onnx::NodeProto& n, const std::string& what) const;
  // A node's name, or #index where it has none.
  std::string NodeName(const onnx::NodeProto& n) const;
  // Node n's input `input` as a constant (null: the optional input is absent); anything but
  // a constant is an error.
  const onnx::TensorProto* Constant(const onnx::NodeProto& n, int input) const;
  // A constant's values: float32 (finite), or int64; anything else is an error.
  std::vector<float> Floats(const onnx::NodeProto& n, const onnx::TensorProto& t,
                            bool infinities = false) const;
  std::vector<int64_t> Ints(const onnx::NodeProto& n, const onnx::TensorProto& t) const;
  // Node n's attribute `name` (null: absent), and its value of each type (`def`: absent).
  const onnx::AttributeProto* Attr(const onnx::NodeProto& n, const std::string& name) const;
  int64_t IntAttr(const onnx::NodeProto& n, const std::string& name, int64_t def) const;
  float FloatAttr(const onnx::NodeProto& n, const std::string& name, float def) const;
  std::vector<int64_t> IntsAttr(const onnx::NodeProto& n, const std::string& name,
                                std::vector<int64_t> def) const;
  std::string StringAttr(const onnx::NodeProto& n, const std::string& name,
                         const std::string& def) const;
  // An error unless every attribute of n is one of `known`.
  void OnlyAttrs(const onnx::NodeProto& n, std::initializer_list<const char*> known) const;
  // The value a node reads as its input `i` (a computed tensor, not a constant): an
  // ordinary one (Value::axes empty); an error names what anything else is.
  const Value& In(const onnx::NodeProto& n, int i) const;
  // The same, of any kind.
  const Value& Raw(const onnx::NodeProto& n, int i) const;
  // The constant named `name`, or null.
  const onnx::TensorProto* ConstantNamed(const std::string& name) const {
    const auto it = constants_.find(name);
    return it == constants_.end() ? nullptr : it->second;
  }
  // The value of tensor `name` computed so far, or null.
  const Value* Find(const std::string& name) const {
    const auto it = values_.find(name);
    return it == values_.end() ? nullptr : &it->second;
  }
  // Sets the value of a node's output other than its first (which its reader returns).
  void Define(const std::string& name, Value v) { values_[name] = std::move(v); }
  // Whether n's input i is a constant.
  bool IsConstant(const onnx::NodeProto& n, int i) const;
  // Adds `l` reading `inputs`, infers its shape and returns its output.
  Value Add(const onnx::NodeProto& n, nn::Layer l, std::vector<int> inputs);
  // A new layer name: base1, base2, ...
  std::string NextName(const std::string& base);
  // The layer whose output node n's input 0 is, when n may join it: a conv, dense or add
  // layer (or, with `weighted`, only conv and dense) without an activation yet, whose
  // output nothing else reads. nullptr otherwise.
  nn::Layer* Joinable(const onnx::NodeProto& n, bool weighted);
  // A Conv's or pooling's one stride, and its padding (auto_pad or pads) on layer l.
  int Stride(const onnx::NodeProto& n) const;
  void SetPadding(const onnx::NodeProto& n, nn::Layer* l) const;
  // Adds the zeros of a Pad node that `n` reads (PadNode) to the layer's padding.
  void ZeroPads(const onnx::NodeProto& n, nn::Layer* l) const;

 private:
  // How many nodes (and graph outputs) read each tensor: an activation, bias or BatchNorm
  // joins the layer before it only when nothing else reads that layer's output.
  void CountUses(const onnx::GraphProto& g);
  // The graph's one output must be the last layer's (tpusim's model output).
  void CheckOutput(const onnx::GraphProto& g);
  // The graph's one input: an N x C x H x W float image batch, N x T x X sequences (T x N x X
  // where an LSTM node reads it as it is), or N x T int64 token ids.
  void ReadInput(const onnx::GraphProto& g);
  // The model's input from the ONNX input `name` of `dims` (`text`: the dims for messages;
  // `tokens`: int64 token ids).
  void SetInput(const onnx::GraphProto& g, const std::string& name,
                const std::vector<int64_t>& dims, const std::string& text, bool tokens);
  // The model's data set and preprocessing (an MNIST model or float inputs).
  void SetDataset(const std::string& name);
  // A Constant node's tensor, as a constant.
  void AddConstant(const onnx::NodeProto& n);
  // A tensor's number of values (an error for impossible shapes and external data).
  int64_t Elements(const onnx::NodeProto& n, const onnx::TensorProto& t) const;
  // Node n, by its operator's reader (readers.h).
  void Node(const onnx::NodeProto& n);
  // nn::InferShapes over the model so far; its error names `what`.
  void Infer(const std::string& what);

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
  int64_t batch_ = 1;
};

}  // namespace tpu::import::onnx_graph
