// `tpusim import`: an fp32 ONNX model to a tpusim model folder (see nn_commands.h).
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "host/cli/nn_commands.h"
#include "host/cli/options.h"
#include "host/common/errors.h"
#include "host/data/mnist.h"
#include "host/import/onnx_import.h"
#include "host/nn/quantize.h"

namespace tpu::cli {
namespace {

struct ImportArgs {
  std::string onnx, out, name;
  CalibrationOptions cal;
  bool quantize = false, quiet = false, keep_batchnorm = false, time_first = false;
};

void Run(const ImportArgs& a) {
  CheckOutputFolder(a.out, nn::kModelFolder);  // before the work, not after it
  import::OnnxImportOptions opt;
  opt.name = a.name;
  opt.keep_batchnorm = a.keep_batchnorm;
  opt.time_first = a.time_first;
  if (!a.cal.dataset.empty()) {
    opt.dataset =
        a.cal.dataset == "none" ? "none" : data::DatasetName(data::ParseDataset(a.cal.dataset));
  }
  nn::Model m = import::ImportOnnx(a.onnx, opt);
  if (a.quantize) {
    CalibrationOptions cal = a.cal;
    if (cal.dataset == "none") cal.dataset.clear();
    nn::Quantize(&m, LoadCalibration(cal, m), cal.calibration);
  }
  nn::SaveModel(m, a.out);
  if (a.quiet) return;
  std::cout << nn::Summary(m);
  std::cout << fmt::format("wrote {} ({}) from {}\n", a.out, a.quantize ? "fp32 + int8" : "fp32",
                           a.onnx);
  if (!a.quantize) {
    std::cout << fmt::format("next: tpusim quantize --model {} --out {}-int8{}\n", a.out, a.out,
                             m.dataset == "none" ? " --synthetic 16" : "");
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
bias), Add of two activations (residual), Concat of channels, Relu, Clip(0, 6), MaxPool
and AveragePool (with padding), GlobalAveragePool, Flatten/Reshape before a dense layer,
BatchNormalization after a Conv/Gemm (folded into its weights; with --keep-batchnorm a
batch_norm layer of its own, to train with batch statistics); Dropout and Identity are
dropped and a final Softmax/LogSoftmax is kept as the last layer's softmax. The graph is a
directed acyclic graph from one N x C x H x W input to one output: torchvision's resnet18,
resnet50 and mobilenet_v2 import unmodified. A 1 x 32 x 32 input is taken for an MNIST
model (28 x 28 images padded by 2, pixel / 255) unless --dataset none; any other input takes
float values (run --inputs FILE.npy or --synthetic N). Anything else stops with the node,
the operator and what is supported; nothing is written then.

Examples:
  tpusim import models/onnx/torch_cnn.onnx --out torch-cnn --quantize
  tpusim import resnet18.onnx --out resnet18-int8 --quantize --synthetic 16
  tpusim run --model resnet18-int8 --synthetic 8 --config tpu-v1 --engine fast)");
  cmd->add_option("onnx", a->onnx, "the .onnx file")->required();
  cmd->add_option("--out", a->out, "model folder to write")->required();
  cmd->add_option("--name", a->name, "model name (default: the file's name)");
  cmd->add_flag("--quantize", a->quantize,
                "also quantize to int8 (as tpusim quantize), calibrated on --calibration "
                "training images, --inputs or --synthetic inputs");
  cmd->add_flag("--keep-batchnorm", a->keep_batchnorm,
                "keep each BatchNormalization as a batch_norm layer, to train it (tpusim train "
                "--model): batch statistics in training, running ones after; the default "
                "folds it into the layer before it, as inference runs it");
  cmd->add_flag("--time-first", a->time_first,
                "the model's 3-axis input is T x N x X (PyTorch's transformer layers with "
                "batch_first=False), not N x T x X; --inputs still take N x T x X");
  AddCalibrationOptions(cmd, &a->cal);
  cmd->add_flag("--quiet,-q", a->quiet, "print nothing but errors");
  cmd->callback([a] { Run(*a); });
}

}  // namespace tpu::cli
