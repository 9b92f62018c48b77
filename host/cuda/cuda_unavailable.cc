// The CUDA backends in a build without nvcc (see cuda_backend.h): they say so.
#include "host/common/errors.h"
#include "host/cuda/cuda_backend.h"

namespace tpu::cuda {
namespace {

[[noreturn]] void NotBuilt() {
  throw UsageError(
      "this tpusim was built without CUDA (nvcc was not found when CMake "
      "configured it); install the CUDA toolkit and reconfigure: cmake -B build "
      "-DTPUSIM_CUDA=ON");
}

}  // namespace

bool Built() { return false; }

bool Available(std::string* why) {
  if (why) *why = "this build has no CUDA backends";
  return false;
}

GpuResult InferCudaInt8(const nn::Model&, const data::MnistSet&, int64_t, int) { NotBuilt(); }
GpuResult InferCudaFp32(const nn::Model&, const data::MnistSet&, int64_t, int) { NotBuilt(); }

}  // namespace tpu::cuda
