// Each ONNX operator's reader (docs/import.md), in a file of this folder (readers.def lists
// them; related operators share one, as activations.cc), found through one
// table by the node's op_type (readers.def lists them, readers.cc makes the table): a reader adds
// the node's layer to the model (or joins the layer before it: a bias, an activation, a BatchNorm)
// and returns the value of its output.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

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

// The readers readers.def lists (ReadConv, ReadGemm, ...).
#define TPUSIM_ONNX(OP, READ, WHAT) Value READ(OnnxGraph& g, const onnx::NodeProto& n);
#include "host/import/onnx/readers.def"
#undef TPUSIM_ONNX

}  // namespace tpu::import::onnx_graph
