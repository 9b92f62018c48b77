// The CPU inference backends of `tpusim infer`: cpu-fp32 (Eigen float), cpu-int8 (Eigen
// integer, bit-exact with the scalar reference) and cpu-bf16 (the bfloat16 reference of a
// bf16 chip, docs/bf16.md), batched and multi-threaded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/nn/inputs.h"
#include "host/nn/model.h"

namespace tpu::nn {

enum class CpuBackend { kFp32, kInt8, kBf16 };

// The array size whose K tiles the cpu-bf16 backend adds in (docs/bf16.md): tpu-v2's.
inline constexpr int kDefaultBf16ArrayDim = 128;

// Throws UsageError for an unknown name (listing the known ones).
CpuBackend ParseCpuBackend(const std::string& name);
const char* CpuBackendName(CpuBackend b);

struct InferResult {
  int64_t images = 0;
  int64_t correct = 0;           // argmax == label (0 without labels)
  double seconds = 0;            // wall time of the batched run
  std::vector<int> predictions;  // per image
  // With `keep_outputs`: every image's last-layer output, images x outputs (fp32 and bf16:
  // the values; int8: the int8 values, of scale model.layers.back()'s output scale).
  std::vector<float> fp32_outputs;
  std::vector<int8_t> int8_outputs;
};

// Classifies the first `images` inputs in batches of `batch` on `threads` threads.
// cpu-bf16 adds in K tiles of `bf16_array_dim` rows.
InferResult InferCpu(const Model& model, const InputSet& inputs, int64_t images, CpuBackend backend,
                     int batch, int threads, bool keep_outputs = false,
                     int bf16_array_dim = kDefaultBf16ArrayDim);

// The same on a data set's images.
inline InferResult InferCpu(const Model& model, const data::MnistSet& set, int64_t images,
                            CpuBackend backend, int batch, int threads) {
  return InferCpu(model, InputsFromMnist(set, 0, model.input), images, backend, batch, threads);
}

// Mean wall time per image, in milliseconds, classifying `images` inputs one at a time on
// one thread.
double LatencyBatch1Ms(const Model& model, const InputSet& inputs, int64_t images,
                       CpuBackend backend, int bf16_array_dim = kDefaultBf16ArrayDim);

// The int8 scale of a quantized model's output (its last layer's).
float OutputScale(const Model& model);

}  // namespace tpu::nn
