// Each ONNX operator's reader (docs/import.md), one file each (conv.cc, gemm.cc, add.cc,
// concat.cc, batch_norm.cc, activations.cc, pool.cc, flatten.cc, pad.cc), found through one
// table by the node's op_type (readers.cc): a reader adds the node's layer to the model (or
// joins the layer before it: a bias, an activation, a BatchNorm) and returns the value of
// its output.
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

// The readers (readers.cc lists them).
Value ReadConv(OnnxGraph& g, const onnx::NodeProto& n);
Value ReadGemm(OnnxGraph& g, const onnx::NodeProto& n);
Value ReadAdd(OnnxGraph& g, const onnx::NodeProto& n);
Value ReadConcat(OnnxGraph& g, const onnx::NodeProto& n);
Value ReadBatchNorm(OnnxGraph& g, const onnx::NodeProto& n);
Value ReadRelu(OnnxGraph& g, const onnx::NodeProto& n);
Value ReadClip(OnnxGraph& g, const onnx::NodeProto& n);
Value ReadSoftmax(OnnxGraph& g, const onnx::NodeProto& n);
Value ReadPool(OnnxGraph& g, const onnx::NodeProto& n);
Value ReadGlobalPool(OnnxGraph& g, const onnx::NodeProto& n);
Value ReadFlatten(OnnxGraph& g, const onnx::NodeProto& n);
Value ReadPad(OnnxGraph& g, const onnx::NodeProto& n);

}  // namespace tpu::import::onnx_graph
