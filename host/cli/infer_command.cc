// `tpusim infer`: run a model's inputs on a CPU (or GPU) backend (see nn_commands.h).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "host/cli/nn_commands.h"
#include "host/cli/options.h"
#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/revision.h"
#include "host/cuda/cuda_backend.h"
#include "host/data/mnist.h"
#include "host/nn/cpu_backend.h"

namespace tpu::cli {
namespace {

struct InferArgs : WorkloadOptions, OutputOptions {
  std::string backend = "cpu-int8";
  std::string logits, predictions;
  int batch = 64;
  int threads = 2;
  int64_t latency_images = 500;
  int array = nn::kDefaultBf16ArrayDim;  // cpu-bf16: the array whose K tiles it adds in
};

// cuda-int8 / cuda-fp32: the GPU backends, timed as kernels and as wall time with copies.
void RunGpu(const InferArgs& a) {
  if (a.images < 1 || a.batch < 1) throw UsageError("--images and --batch must be at least 1");
  if (!a.json.empty()) CheckWritable(a.json);
  if (!a.inputs.empty() || a.synthetic > 0 || !a.logits.empty() || !a.predictions.empty()) {
    throw UsageError(
        "the GPU backends run the MNIST test images; --inputs, --synthetic, --logits and "
        "--predictions are for cpu-fp32 and cpu-int8");
  }
  const nn::Model m = nn::LoadModel(a.model);
  if (m.IsGraph() || m.preprocess != "mnist32") {
    throw UsageError("the GPU backends run chains of layers on MNIST images; model '" + m.name +
                     "' is not one: use cpu-fp32 or cpu-int8");
  }
  const data::MnistSet test = nn::LoadTestSet(m, a.dataset, a.data, 0);
  if (a.images > test.count) {
    throw UsageError(
        fmt::format("--images {} is more than the {} test images", a.images, test.count));
  }
  const cuda::GpuResult r = a.backend == "cuda-int8"
                                ? cuda::InferCudaInt8(m, test, a.images, a.batch)
                                : cuda::InferCudaFp32(m, test, a.images, a.batch);
  const double accuracy = static_cast<double>(r.correct) / static_cast<double>(r.images);
  if (!a.quiet)
    std::cout << fmt::format(
        "tpusim infer: {} on {} MNIST test images ({}) on {}\n"
        "  accuracy      {:.2f} %  ({} of {} correct)\n"
        "  throughput    {:.0f} images/s wall incl. copies, {:.0f} images/s kernels only (batch "
        "{})\n",
        a.backend, r.images, a.model, r.device, 100 * accuracy, r.correct, r.images,
        static_cast<double>(r.images) / r.wall_seconds,
        static_cast<double>(r.images) / r.kernel_seconds, a.batch);
  if (!a.json.empty()) {
    nlohmann::json j = {{"tool", "tpusim infer"},
                        {"revision", kGitRevision},
                        {"backend", a.backend},
                        {"model", a.model},
                        {"device", r.device},
                        {"images", r.images},
                        {"correct", r.correct},
                        {"accuracy", accuracy},
                        {"batch", a.batch},
                        {"wall_seconds", r.wall_seconds},
                        {"kernel_seconds", r.kernel_seconds}};
    WriteFileAtomically(a.json, j.dump(2) + "\n");
  }
}

void Run(const InferArgs& a) {
  if (a.backend == "cuda-int8" || a.backend == "cuda-fp32") {
    RunGpu(a);
    return;
  }
  const nn::CpuBackend backend = nn::ParseCpuBackend(a.backend);
  if (a.images < 1 || a.batch < 1 || a.threads < 1) {
    throw UsageError("--images, --batch and --threads must be at least 1");
  }
  if (a.array < 2 || a.array > 512) {
    throw UsageError("--array " + std::to_string(a.array) + " is out of range; use 2 to 512");
  }
  for (const std::string* p : {&a.json, &a.logits, &a.predictions})
    if (!p->empty()) CheckWritable(*p);
  const nn::Model m = nn::LoadModel(a.model);
  const nn::InputSet in = LoadInputs(a, m);
  const bool keep = !a.logits.empty() || !a.predictions.empty();
  const nn::InferResult r =
      nn::InferCpu(m, in, in.count, backend, a.batch, a.threads, keep, a.array);
  const int64_t latency_images = std::min(in.count, a.latency_images);
  const double latency_ms = nn::LatencyBatch1Ms(m, in, latency_images, backend, a.array);
  const double accuracy = static_cast<double>(r.correct) / static_cast<double>(r.images);
  const double ips = static_cast<double>(r.images) / r.seconds;
  const int64_t outputs = m.layers.back().out.Size();
  const bool int8 = backend == nn::CpuBackend::kInt8;
  if (!a.logits.empty()) {
    if (int8)
      WriteLogits(a.logits, outputs, r.int8_outputs, nn::OutputScale(m));
    else
      WriteLogits(a.logits, outputs, r.fp32_outputs);
  }
  if (!a.predictions.empty()) {
    if (int8)
      WritePredictions(a.predictions, outputs, r.int8_outputs, in.labels);
    else
      WritePredictions(a.predictions, outputs, r.fp32_outputs, in.labels);
  }
  if (!a.quiet) {
    std::cout << fmt::format("tpusim infer: {} on {} {} ({}{})\n", a.backend, r.images, in.source,
                             a.model,
                             backend == nn::CpuBackend::kBf16
                                 ? fmt::format(", K tiles of a {} x {} array", a.array, a.array)
                                 : "");
    if (in.HasLabels()) {
      std::cout << fmt::format("  accuracy      {:.2f} %  ({} of {} correct)\n", 100 * accuracy,
                               r.correct, r.images);
    }
    std::cout << fmt::format(
        "  throughput    {:.0f} images/s  (batch {}, {} thread(s), {:.3f} s)\n"
        "  latency       {:.3f} ms per image at batch 1 (1 thread, mean of {} images)\n",
        ips, a.batch, a.threads, r.seconds, latency_ms, latency_images);
    if (!a.logits.empty()) std::cout << "  outputs       " << a.logits << "\n";
    if (!a.predictions.empty()) std::cout << "  predictions   " << a.predictions << "\n";
  }
  if (!a.json.empty()) {
    nlohmann::json j = {
        {"tool", "tpusim infer"}, {"revision", kGitRevision}, {"backend", a.backend},
        {"model", a.model},       {"inputs", in.source},      {"images", r.images},
        {"correct", r.correct},   {"images_per_second", ips}, {"seconds", r.seconds},
        {"batch", a.batch},       {"threads", a.threads},     {"latency_ms_batch1", latency_ms}};
    j["accuracy"] = in.HasLabels() ? nlohmann::json(accuracy) : nlohmann::json(nullptr);
    if (backend == nn::CpuBackend::kBf16) j["array_dim"] = a.array;
    WriteFileAtomically(a.json, j.dump(2) + "\n");
  }
}

}  // namespace

void AddInferCommand(CLI::App& app) {
  auto a = std::make_shared<InferArgs>();
  CLI::App* cmd = app.add_subcommand("infer", "Run a model's inputs on a CPU backend.");
  cmd->footer(R"(
Backends: cpu-fp32 (Eigen, float), cpu-int8 (Eigen, integer; bit-exact with the scalar
reference of docs/quantization.md) and cpu-bf16 (the fp32 model in bfloat16 with float32
sums, added in the order an --array N x N bf16 chip adds them: docs/bf16.md; no
quantization; one input at a time, slow). Reports accuracy (where the inputs have labels),
inputs/s of the batched run and the latency per input at batch 1. --logits writes every
input's outputs (float32 for cpu-fp32 and cpu-bf16; int8 and their scale for cpu-int8) to compare with
the framework the model came from; --predictions each input's class as CSV.

Examples:
  tpusim infer --backend cpu-int8 --model models/lenet5 --images 10000 --json r.json
  tpusim infer --backend cpu-fp32 --model resnet18 --inputs images.npy --logits y.npy
  tpusim infer --backend cpu-bf16 --model models/lenet5 --images 10000)");
  cmd->add_option("--backend", a->backend,
                  "cpu-fp32, cpu-int8, cpu-bf16, or on an NVIDIA GPU cuda-int8, cuda-fp32")
      ->capture_default_str();
  cmd->add_option("--array", a->array,
                  "cpu-bf16: the array size N whose N-row K tiles the sums are added in")
      ->capture_default_str();
  AddWorkloadOptions(cmd, a.get(), 10000);
  AddOutputOptions(cmd, a.get(), "write the results as JSON to this file");
  cmd->add_option("--batch", a->batch, "images per batch")->capture_default_str();
  cmd->add_option("--threads", a->threads, "worker threads")->capture_default_str();
  cmd->add_option("--logits", a->logits,
                  "write every input's outputs as N x outputs .npy (int8 backends: with their "
                  "scale in NAME.scale.npy)");
  cmd->add_option("--predictions", a->predictions,
                  "write each input's predicted class (and its label, where known) as CSV: "
                  "input,predicted,label");
  cmd->callback([a] { Run(*a); });
}

}  // namespace tpu::cli
