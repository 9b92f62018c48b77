// `tpusim import`: an fp32 ONNX model to a tpusim model folder (see nn_commands.h).
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "host/cli/nn_commands.h"
#include "host/common/errors.h"
#include "host/data/mnist.h"
#include "host/import/onnx_import.h"
#include "host/nn/quantize.h"

namespace tpu::cli {
namespace {

struct ImportArgs {
  std::string onnx, out, name, data, dataset = "mnist";
  bool quantize = false, quiet = false;
  int64_t calibration = 2000;
};

void Run(const ImportArgs& a) {
  if (a.calibration < 1) throw UsageError("--calibration must be at least 1 image");
  const data::Dataset dataset = data::ParseDataset(a.dataset);
  import::OnnxImportOptions opt;
  opt.name = a.name;
  opt.dataset = data::DatasetName(dataset);
  nn::Model m = import::ImportOnnx(a.onnx, opt);
  if (a.quantize) {
    const std::string dir = data::FindDatasetDir(dataset, a.data);
    nn::Quantize(&m, data::LoadMnist(dir, /*train=*/true, a.calibration), a.calibration);
  }
  nn::SaveModel(m, a.out);
  if (a.quiet) return;
  std::cout << nn::Summary(m);
  std::cout << fmt::format("wrote {} ({}) from {}\n", a.out, a.quantize ? "fp32 + int8" : "fp32",
                           a.onnx);
  if (!a.quantize) {
    std::cout << fmt::format("next: tpusim quantize --model {} --out {}-int8\n", a.out, a.out);
  }
}

}  // namespace

void AddImportCommand(CLI::App& app) {
  auto a = std::make_shared<ImportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "import", "Import an fp32 ONNX model as a tpusim model folder (docs/import.md).");
  cmd->footer(R"(
Reads the ONNX file with Debian's ONNX library and writes a model folder (model.json and
one .npy per tensor, docs/model-format.md) that every tpusim command runs: infer on the
CPU, quantize, run on the simulated TPU, compare.

Supported: Conv (stride, padding, groups 1 or depthwise), Gemm and MatMul (+ Add as a
bias), Relu, Clip(0, 6), MaxPool, AveragePool, GlobalAveragePool, Flatten/Reshape before
a dense layer, BatchNormalization after a Conv/Gemm (folded into its weights); Dropout and
Identity are dropped and a final Softmax/LogSoftmax is kept as the last layer's softmax.
The graph must be one chain from a 1 x 32 x 32 image input (28 x 28 images padded by 2,
pixel / 255) to the output. Anything else stops with the node, the operator and what is
supported; nothing is written then.

Examples:
  tpusim import models/onnx/torch_cnn.onnx --out torch-cnn
  tpusim import models/onnx/torch_cnn.onnx --out torch-cnn-int8 --quantize
  tpusim run --model torch-cnn-int8 --images 100 --engine fast)");
  cmd->add_option("onnx", a->onnx, "the .onnx file")->required();
  cmd->add_option("--out", a->out, "model folder to write")->required();
  cmd->add_option("--name", a->name, "model name (default: the file's name)");
  cmd->add_option("--dataset", a->dataset, "what the model classifies: mnist or fashion-mnist")
      ->capture_default_str();
  cmd->add_flag("--quantize", a->quantize,
                "also quantize to int8 (as tpusim quantize) with --calibration training images");
  cmd->add_option("--calibration", a->calibration, "training images for --quantize")
      ->capture_default_str();
  cmd->add_option("--data", a->data, "folder with the data set's IDX files (--quantize)");
  cmd->add_flag("--quiet,-q", a->quiet, "print nothing but errors");
  cmd->callback([a] { Run(*a); });
}

}  // namespace tpu::cli
