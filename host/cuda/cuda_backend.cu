// CUDA kernels and their host side for the CNN (see cuda_backend.h): one thread per output
// value, calling the same per-value functions the CPU test checks (cnn_ops.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "host/common/errors.h"
#include "host/cuda/cnn_ops.h"
#include "host/cuda/cuda_backend.h"

namespace tpu::cuda {
namespace {

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw RuntimeError(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
  }
}

// A device buffer freed on scope exit.
template <typename T>
struct DeviceArray {
  T* p = nullptr;
  size_t n = 0;
  DeviceArray() = default;
  explicit DeviceArray(size_t count) : n(count) {
    if (count) Check(cudaMalloc(&p, count * sizeof(T)), "cudaMalloc");
  }
  explicit DeviceArray(const std::vector<T>& v) : DeviceArray(v.size()) {
    if (n) Check(cudaMemcpy(p, v.data(), n * sizeof(T), cudaMemcpyHostToDevice), "copy to GPU");
  }
  DeviceArray(DeviceArray&& o) noexcept : p(o.p), n(o.n) { o.p = nullptr; }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    std::swap(p, o.p);
    std::swap(n, o.n);
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() {
    if (p) cudaFree(p);
  }
};

__global__ void QuantizeKernel(const uint8_t* pixels, int8_t* x, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) x[i] = arith::QuantizePixel(pixels[i]);
}

__global__ void ScaleKernel(const uint8_t* pixels, float* x, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) x[i] = pixels[i] / 255.0f;
}

__global__ void LayerInt8Kernel(LayerDesc d, const int8_t* x, int64_t in_size, const int8_t* w,
                                const int32_t* bias, const int32_t* mult, const int32_t* shift,
                                int8_t* y, int64_t out_size, int64_t total) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= total) return;
  const int64_t b = i / out_size, o = i % out_size;
  y[i] = LayerOutInt8(d, x + b * in_size, w, bias, mult, shift, o);
}

__global__ void LayerFp32Kernel(LayerDesc d, const float* x, int64_t in_size, const float* w,
                                const float* bias, float* y, int64_t out_size, int64_t total) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= total) return;
  const int64_t b = i / out_size, o = i % out_size;
  y[i] = LayerOutFp32(d, x + b * in_size, w, bias, o);
}

unsigned Blocks(int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

std::string DeviceName() {
  cudaDeviceProp p{};
  int dev = 0;
  cudaGetDevice(&dev);
  cudaGetDeviceProperties(&p, dev);
  return p.name;
}

void RequireGpu() {
  std::string why;
  if (!Available(&why)) throw RuntimeError("no usable NVIDIA GPU for the CUDA backends: " + why);
}

struct Timer {
  cudaEvent_t a{}, b{};
  Timer() {
    Check(cudaEventCreate(&a), "cudaEventCreate");
    Check(cudaEventCreate(&b), "cudaEventCreate");
  }
  ~Timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
};

}  // namespace

bool Built() { return true; }

bool Available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = cudaGetErrorString(e);
    cudaGetLastError();  // clear it
    return false;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device found";
    return false;
  }
  return true;
}

namespace {

// One network on the GPU, layer by layer: int8 (T = int8_t) or fp32 (T = float).
template <typename T>
GpuResult Infer(const nn::Model& m, const data::MnistSet& set, int64_t images, int batch) {
  constexpr bool kInt8 = std::is_same_v<T, int8_t>;
  using Bias = std::conditional_t<kInt8, int32_t, float>;
  RequireGpu();
  const auto start = std::chrono::steady_clock::now();
  struct DevLayer {
    LayerDesc d;
    DeviceArray<T> w;
    DeviceArray<Bias> bias;
    DeviceArray<int32_t> mult, shift;  // int8 only
  };
  std::vector<DevLayer> layers;
  int64_t max_act = m.input.Size();
  for (const nn::Layer& l : m.layers) {
    DevLayer dl{Describe(l), {}, {}, {}, {}};
    if (l.HasWeights()) {
      if constexpr (kInt8) {
        dl.w = DeviceArray<T>(OutputMajor(l, l.q.weights.data));
        dl.bias = DeviceArray<Bias>(l.q.bias.data);
        dl.mult = DeviceArray<int32_t>(l.q.multiplier);
        dl.shift = DeviceArray<int32_t>(l.q.shift);
      } else {
        dl.w = DeviceArray<T>(OutputMajor(l, l.weights.data));
        dl.bias = DeviceArray<Bias>(l.bias.data);
      }
    }
    max_act = std::max(max_act, OutSize(dl.d));
    layers.push_back(std::move(dl));
  }
  GpuResult r;
  r.device = DeviceName();
  r.images = std::min(images, set.count);
  DeviceArray<uint8_t> pixels(static_cast<size_t>(batch * set.image_size));
  DeviceArray<T> a(static_cast<size_t>(batch * max_act)), b(static_cast<size_t>(batch * max_act));
  Timer t;
  float kernel_ms_total = 0;
  for (int64_t first = 0; first < r.images; first += batch) {
    const int64_t n = std::min<int64_t>(batch, r.images - first);
    const int64_t in_pixels = n * set.image_size;
    Check(cudaMemcpy(pixels.p, set.Image(first), static_cast<size_t>(in_pixels),
                     cudaMemcpyHostToDevice),
          "copy images");
    Check(cudaEventRecord(t.a), "event");
    if constexpr (kInt8) {
      QuantizeKernel<<<Blocks(in_pixels), 256>>>(pixels.p, a.p, in_pixels);
    } else {
      ScaleKernel<<<Blocks(in_pixels), 256>>>(pixels.p, a.p, in_pixels);
    }
    T *x = a.p, *y = b.p;
    int64_t in_size = m.input.Size();
    for (const DevLayer& l : layers) {
      const int64_t out = OutSize(l.d);
      if constexpr (kInt8) {
        LayerInt8Kernel<<<Blocks(n * out), 256>>>(l.d, x, in_size, l.w.p, l.bias.p, l.mult.p,
                                                  l.shift.p, y, out, n * out);
      } else {
        LayerFp32Kernel<<<Blocks(n * out), 256>>>(l.d, x, in_size, l.w.p, l.bias.p, y, out,
                                                  n * out);
      }
      std::swap(x, y);
      in_size = out;
    }
    Check(cudaEventRecord(t.b), "event");
    Check(cudaEventSynchronize(t.b), "kernels");
    float ms = 0;
    cudaEventElapsedTime(&ms, t.a, t.b);
    kernel_ms_total += ms;
    std::vector<T> logits(static_cast<size_t>(n * in_size));
    Check(cudaMemcpy(logits.data(), x, logits.size() * sizeof(T), cudaMemcpyDeviceToHost),
          "copy logits");
    for (int64_t i = 0; i < n; ++i) {
      const auto li = logits.begin() + i * in_size;
      const int best = static_cast<int>(std::max_element(li, li + in_size) - li);
      r.predictions.push_back(best);
      r.correct += best == set.labels[static_cast<size_t>(first + i)];
      if constexpr (kInt8) r.logits_int8.emplace_back(li, li + in_size);
    }
  }
  r.kernel_seconds = kernel_ms_total / 1000.0;
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace

GpuResult InferCudaInt8(const nn::Model& m, const data::MnistSet& set, int64_t images, int batch) {
  if (!m.quantized) {
    throw UsageError("model '" + m.name + "' has no int8 version; make one with tpusim quantize");
  }
  return Infer<int8_t>(m, set, images, batch);
}

GpuResult InferCudaFp32(const nn::Model& m, const data::MnistSet& set, int64_t images, int batch) {
  return Infer<float>(m, set, images, batch);
}

}  // namespace tpu::cuda
