// The CUDA GPU backends of `tpusim infer`: cuda-int8 (bit-exact with the CPU int8
// reference: the same arithmetic, host/cuda/cnn_ops.h, with dp4a) and cuda-fp32, both
// batched. Plain C++ interface; the CUDA code is in cuda_backend.cu, built when CMake finds
// nvcc (TPUSIM_CUDA). Without a usable GPU at run time, the backends throw RuntimeError.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/data/mnist.h"
#include "host/nn/model.h"

namespace tpu::cuda {

// Whether this build has the CUDA backends at all.
bool Built();
// Whether a GPU can run them now; `why` says what is missing (any CUDA error counts:
// without a driver, cudaGetDeviceCount reports "driver version is insufficient").
bool Available(std::string* why);

struct GpuResult {
  int64_t images = 0, correct = 0;
  std::vector<int> predictions;
  std::vector<std::vector<int8_t>> logits_int8;  // int8 backend: per image
  double wall_seconds = 0;                       // including host-device copies
  double kernel_seconds = 0;                     // kernels only (CUDA events)
  std::string device;
};

// Throws RuntimeError when no GPU is usable or CUDA fails, UsageError for a model
// without an int8 version (int8 backend).
GpuResult InferCudaInt8(const nn::Model& model, const data::MnistSet& set, int64_t images,
                        int batch);
GpuResult InferCudaFp32(const nn::Model& model, const data::MnistSet& set, int64_t images,
                        int batch);

}  // namespace tpu::cuda
