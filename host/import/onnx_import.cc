// ONNX to tpusim model (see onnx_import.h and docs/import.md; the graph and each
// operator's reader are in host/import/onnx/).
#include "host/import/onnx_import.h"

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "host/common/errors.h"
#include "host/import/onnx/onnx_graph.h"

namespace tpu::import {

nn::Model ImportOnnxBytes(const std::string& bytes, const std::string& path,
                          const OnnxImportOptions& options) {
  onnx::ModelProto proto;
  if (bytes.empty() || !proto.ParseFromString(bytes)) {
    throw UsageError(path +
                     ": not an ONNX model (the file is empty, truncated or of another kind); "
                     "export one with torch.onnx.export or tf2onnx");
  }
  nn::Model m = onnx_graph::OnnxGraph(proto, path, options).Run();
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
