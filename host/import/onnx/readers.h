// Each ONNX operator's reader (docs/import.md), in a file of this folder (readers.def lists
// them; related operators share one, as activations.cc), found through one
// table by the node's op_type (readers.def lists them, readers.cc makes the table): a reader adds
// the node's layer to the model (or joins the layer before it: a bias, an activation, a BatchNorm)
// and returns the value of its output.
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>
#include <vector>

#include "host/import/onnx/onnx_graph.h"

namespace tpu::import::onnx_graph {

struct Reader {
  const char* op_type;
  Value (*read)(OnnxGraph& g, const onnx::NodeProto& n);
  const char* what;  // in the list of what is imported (Supported)
};

// The reader of op_type, or null: not imported.
const Reader* ReaderOf(const std::string& op_type);
// What tpusim imports, for the error that names a node it does not.
const std::string& Supported();

// The layer a node with a constant operand joins (an Add of a bias, a Mul of a scale): the
// one computing its other input, `data_input`, with weights (a Conv, Gemm or MatMul), no
// activation, and read by nothing else; null where there is none.
nn::Layer* WeightedBefore(OnnxGraph& g, const onnx::NodeProto& n, int data_input);

// A layer of `type` (named `prefix` and a number) joining two activations of one shape
// value by value (an add, a product); where the shapes differ, FailNode: `text` with a's and
// b's shapes for {a} and {b}, then "; tpusim <verbs> two activations of one shape".
Value JoinOfOneShape(OnnxGraph& g, const onnx::NodeProto& n, nn::LayerType type, const char* prefix,
                     const char* text, const char* verbs);

// A value of no layer: "shape" (sizes computed from a shape) or "zeros" (Value::axes).
Value Computed(const char* kind);

// A transformer's tensors (tensors.cc; Value::view). Whether v is one (not a chain's part).
bool IsTensor(const Value& v);
// view without the batch's factors (an export of a batch of one).
std::vector<std::string> WithoutBatch(std::vector<std::string> view);
// The ONNX sizes of tensor v.
std::vector<int64_t> DimsOf(const OnnxGraph& g, const Value& v);
// Node n's input i (of value `raw`) as a tensor: a map is N x C x H x W, a vector N x F.
Value TensorOf(OnnxGraph& g, const onnx::NodeProto& n, const Value& raw, int i);
Value TensorOf(OnnxGraph& g, const onnx::NodeProto& n, int i);
// v viewed as `dims` (a Reshape's: 0 and -1 resolved), its image's axes first put in ONNX
// order; an error where images would mix or need more than 3 axes.
Value Reshaped(OnnxGraph& g, const onnx::NodeProto& n, Value v, std::vector<int64_t> dims);
// v viewed as its own sizes, each axis's run of the image's values one axis of its layer's
// (made, by a reshape layer, where they are not).
Value Normalized(OnnxGraph& g, const onnx::NodeProto& n, const Value& v);
// v's values as its layer's output (a reshape layer added where v views them anew).
Value Materialized(OnnxGraph& g, const onnx::NodeProto& n, Value v);
// v with its image's axes in ONNX order (a transpose layer where they are not).
Value Canonical(OnnxGraph& g, const onnx::NodeProto& n, Value v);
// Normalized v whose last axis is its layer's c (a layer working along it: `what` it does).
Value PerRow(OnnxGraph& g, const onnx::NodeProto& n, const Value& v, const char* what);
// Layer l reading `inputs`, its output viewed as `like` is (of the new layer's shape).
Value AddTensorLayer(OnnxGraph& g, const onnx::NodeProto& n, nn::Layer l, std::vector<int> inputs,
                     const Value& like);
// The graph's output tensor v, each image's values in ONNX order (node n the last).
Value Finished(OnnxGraph& g, const onnx::NodeProto& n, const Value& v);
// What chains become one layer, for errors.
std::string PartChains();

// Sizes (chains.cc): node n's input i as sizes (a constant, or known), an Add, Sub, Mul or
// Div of sizes (nullopt: n is not one), and Shape, Gather and Concat of them.
std::vector<int64_t> IntsOf(OnnxGraph& g, const onnx::NodeProto& n, int i);
std::optional<Value> IntsNode(OnnxGraph& g, const onnx::NodeProto& n);
Value ShapeOfTensor(OnnxGraph& g, const onnx::NodeProto& n);
Value GatherInts(OnnxGraph& g, const onnx::NodeProto& n);
Value ConcatInts(OnnxGraph& g, const onnx::NodeProto& n);
Value KnownInts(std::vector<int64_t> ints);
// The chains' steps in Add and Mul (nullopt: n is not one); a tensor's softmax.
std::optional<Value> AddInChain(OnnxGraph& g, const onnx::NodeProto& n);
std::optional<Value> MulInChain(OnnxGraph& g, const onnx::NodeProto& n);
std::optional<Value> SoftmaxOfTensor(OnnxGraph& g, const onnx::NodeProto& n);
std::optional<Value> ExpandedConstant(OnnxGraph& g, const onnx::NodeProto& n);
// ViT's (tensor_layers.cc): a Concat that puts a constant for each image before a tensor, an
// Add of a constant to a tensor, a Gather of one index of a tensor's axis.
Value TensorPrepend(OnnxGraph& g, const onnx::NodeProto& n);
Value TensorAddConstant(OnnxGraph& g, const onnx::NodeProto& n, int constant_input);
Value TensorGather(OnnxGraph& g, const onnx::NodeProto& n);
Value TensorEmbedding(OnnxGraph& g, const onnx::NodeProto& n);

// The layers of tensors (tensor_layers.cc): a MatMul of two; weights on each position (k x
// units, stored transposed with trans_b); an Add or Mul of two of one shape; a Transpose, a
// Reshape, a Slice.
Value TensorMatMul(OnnxGraph& g, const onnx::NodeProto& n);
Value TensorDense(OnnxGraph& g, const onnx::NodeProto& n, const Value& x,
                  const std::vector<float>& w, int64_t k, int64_t units, bool trans_b);
Value TensorJoin(OnnxGraph& g, const onnx::NodeProto& n, nn::LayerType type, const char* prefix);
Value TensorTranspose(OnnxGraph& g, const onnx::NodeProto& n, const Value& v);
Value TensorReshape(OnnxGraph& g, const onnx::NodeProto& n);
Value TensorSlice(OnnxGraph& g, const onnx::NodeProto& n);

// The readers readers.def lists (ReadConv, ReadGemm, ...).
#define TPUSIM_ONNX(OP, READ, WHAT) Value READ(OnnxGraph& g, const onnx::NodeProto& n);
#include "host/import/onnx/readers.def"
#undef TPUSIM_ONNX

}  // namespace tpu::import::onnx_graph
