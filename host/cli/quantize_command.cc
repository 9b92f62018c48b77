// `tpusim quantize`: post-training int8 quantization of an fp32 model (see nn_commands.h).
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "host/cli/nn_commands.h"
#include "host/cli/options.h"
#include "host/common/errors.h"
#include "host/data/mnist.h"
#include "host/nn/cpu_backend.h"
#include "host/nn/quantize.h"

namespace tpu::cli {
namespace {

struct QuantizeArgs {
  std::string model, out, data, dataset;
  int64_t calibration = 2000;
  bool quiet = false;
};

void Run(const QuantizeArgs& a) {
  if (a.calibration < 1) throw UsageError("--calibration must be at least 1 image");
  nn::Model m = nn::LoadModel(a.model);
  const std::string dir = data::FindDatasetDir(DatasetFor(a.dataset, m), a.data);
  const data::MnistSet train = data::LoadMnist(dir, /*train=*/true, a.calibration);
  nn::Quantize(&m, train, a.calibration);
  nn::SaveModel(m, a.out);
  if (a.quiet) return;
  const data::MnistSet test = data::LoadMnist(dir, /*train=*/false);
  const auto fp32 = nn::InferCpu(m, test, test.count, nn::CpuBackend::kFp32, 256, 2);
  const auto int8 = nn::InferCpu(m, test, test.count, nn::CpuBackend::kInt8, 256, 2);
  std::cout << fmt::format(
      "quantized {} with {} calibration images (the first of the training set); wrote {}\n"
      "  test accuracy: fp32 {:.2f} %, int8 {:.2f} % ({:+.2f} points)\n",
      a.model, train.count, a.out, 100.0 * fp32.correct / fp32.images,
      100.0 * int8.correct / int8.images,
      100.0 * (int8.correct - fp32.correct) / static_cast<double>(fp32.images));
}

}  // namespace

void AddQuantizeCommand(CLI::App& app) {
  auto a = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Post-training int8 quantization of an fp32 model (docs/quantization.md).");
  cmd->footer(R"(
Weights: symmetric int8 per output channel; biases: int32; activations: one scale per
tensor, max(|fp32 output|) / 127 over the calibration images. Writes a model folder with
both the fp32 and the int8 tensors, then prints fp32 and int8 test accuracy.

Example:
  tpusim quantize --model my-lenet5 --out my-lenet5-int8)");
  cmd->add_option("--model", a->model, "fp32 model folder")->required();
  cmd->add_option("--out", a->out, "model folder to write")->required();
  cmd->add_option("--data", a->data, "folder with the data set's IDX files");
  cmd->add_option("--dataset", a->dataset,
                  "mnist or fashion-mnist (default: the one the model was trained on)");
  cmd->add_option("--calibration", a->calibration, "training images used for calibration")
      ->capture_default_str();
  cmd->add_flag("--quiet,-q", a->quiet, "print nothing but errors");
  cmd->callback([a] { Run(*a); });
}

}  // namespace tpu::cli
