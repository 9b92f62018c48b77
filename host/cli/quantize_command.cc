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
  std::string model, out;
  CalibrationOptions cal;
  bool quiet = false;
};

void Run(const QuantizeArgs& a) {
  CheckOutputFolder(a.out, nn::kModelFolder);  // before the work, not after it
  nn::Model m = nn::LoadModel(a.model);
  const nn::InputSet cal = LoadCalibration(a.cal, m);
  const int64_t used = std::min(a.cal.calibration, cal.count);
  nn::Quantize(&m, cal, a.cal.calibration);
  nn::SaveModel(m, a.out);
  if (a.quiet) return;
  std::cout << fmt::format("quantized {} with {} calibration inputs ({} {}); wrote {}\n", a.model,
                           used, cal.count, cal.source, a.out);
  if (m.dataset != "none" && a.cal.inputs.empty() && a.cal.synthetic == 0) {
    const data::MnistSet test =
        data::LoadMnist(data::FindDatasetDir(nn::DatasetFor(a.cal.dataset, m), a.cal.data), false);
    const auto fp32 = nn::InferCpu(m, test, test.count, nn::CpuBackend::kFp32, 256, 2);
    const auto int8 = nn::InferCpu(m, test, test.count, nn::CpuBackend::kInt8, 256, 2);
    std::cout << fmt::format(
        "  test accuracy: fp32 {:.2f} %, int8 {:.2f} % ({:+.2f} points)\n",
        100.0 * fp32.correct / fp32.images, 100.0 * int8.correct / int8.images,
        100.0 * (int8.correct - fp32.correct) / static_cast<double>(fp32.images));
    return;
  }
  // No labels: how often the int8 network picks the fp32 network's class.
  const auto fp32 = nn::InferCpu(m, cal, used, nn::CpuBackend::kFp32, 16, 2);
  const auto int8 = nn::InferCpu(m, cal, used, nn::CpuBackend::kInt8, 16, 2);
  int64_t same = 0;
  for (int64_t i = 0; i < used; ++i)
    same += fp32.predictions[static_cast<size_t>(i)] == int8.predictions[static_cast<size_t>(i)];
  std::cout << fmt::format(
      "  int8 picks the fp32 network's class for {} of the {} calibration inputs\n", same, used);
}

}  // namespace

void AddQuantizeCommand(CLI::App& app) {
  auto a = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Post-training int8 quantization of an fp32 model (docs/quantization.md).");
  cmd->footer(R"(
Weights: symmetric int8 per output channel; biases: int32; activations: one scale per
tensor, max(|fp32 output|) / 127 over the calibration inputs (the training images of the
model's data set, or --inputs, or --synthetic for models without one). Writes a model folder
with both the fp32 and the int8 tensors, then prints fp32 and int8 test accuracy (or, without
labels, how often int8 agrees with fp32).

Examples:
  tpusim quantize --model my-lenet5 --out my-lenet5-int8
  tpusim quantize --model resnet18 --out resnet18-int8 --synthetic 16)");
  cmd->add_option("--model", a->model, "fp32 model folder")->required();
  cmd->add_option("--out", a->out, "model folder to write")->required();
  AddCalibrationOptions(cmd, &a->cal);
  cmd->add_flag("--quiet,-q", a->quiet, "print nothing but errors");
  cmd->callback([a] { Run(*a); });
}

}  // namespace tpu::cli
