// The CPU inference backends of `tpusim infer`: cpu-fp32 (Eigen float) and cpu-int8
// (Eigen integer, bit-exact with the scalar reference), batched and multi-threaded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/data/mnist.h"
#include "host/nn/model.h"

namespace tpu::nn {

enum class CpuBackend { kFp32, kInt8 };

// Throws UsageError for an unknown name (listing the known ones).
CpuBackend ParseCpuBackend(const std::string& name);
const char* CpuBackendName(CpuBackend b);

struct InferResult {
  int64_t images = 0;
  int64_t correct = 0;
  double seconds = 0;            // wall time of the batched run
  std::vector<int> predictions;  // per image
};

// Classifies the first `images` images of `set` in batches of `batch` on `threads` threads.
InferResult InferCpu(const Model& model, const data::MnistSet& set, int64_t images,
                     CpuBackend backend, int batch, int threads);

// Mean wall time per image, in milliseconds, classifying `images` images one at a time on
// one thread.
double LatencyBatch1Ms(const Model& model, const data::MnistSet& set, int64_t images,
                       CpuBackend backend);

}  // namespace tpu::nn
