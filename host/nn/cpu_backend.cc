// CPU inference backends (see cpu_backend.h).
#include "host/nn/cpu_backend.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "host/common/errors.h"
#include "host/nn/fp32_net.h"
#include "host/nn/int8_net.h"

namespace tpu::nn {

CpuBackend ParseCpuBackend(const std::string& name) {
  if (name == "cpu-fp32") return CpuBackend::kFp32;
  if (name == "cpu-int8") return CpuBackend::kInt8;
  throw UsageError("unknown backend '" + name +
                   "' (known: cpu-fp32, cpu-int8, and on an NVIDIA GPU cuda-int8, cuda-fp32)");
}

const char* CpuBackendName(CpuBackend b) {
  return b == CpuBackend::kFp32 ? "cpu-fp32" : "cpu-int8";
}

namespace {

// int8 is set for the int8 backend, null for fp32.
std::vector<int> Classify(const Model& m, const Int8Net* int8, const uint8_t* pixels,
                          int64_t count) {
  if (int8) return ArgMaxInt8(int8->Forward(pixels, count).back());
  ForwardCache cache;
  Forward(m, Fp32Input(pixels, count, m.input), &cache);
  return ArgMax(cache.acts.back());
}

// The prepared int8 network for the int8 backend; nothing for fp32.
std::optional<Int8Net> MakeInt8(const Model& m, CpuBackend b) {
  if (b != CpuBackend::kInt8) return std::nullopt;
  if (!m.quantized) {
    throw UsageError("model '" + m.name + "' has no int8 version; make one with tpusim quantize");
  }
  return std::optional<Int8Net>(std::in_place, m);
}

}  // namespace

InferResult InferCpu(const Model& m, const data::MnistSet& set, int64_t images, CpuBackend b,
                     int batch, int threads) {
  const std::optional<Int8Net> int8 = MakeInt8(m, b);
  InferResult r;
  r.images = std::min(images, set.count);
  r.predictions.assign(static_cast<size_t>(r.images), -1);
  const auto start = std::chrono::steady_clock::now();
  const int64_t chunks = (r.images + batch - 1) / batch;
  threads = std::max(1, threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int64_t c = t; c < chunks; c += threads) {  // batches dealt out round robin
        const int64_t b0 = c * batch, n = std::min<int64_t>(batch, r.images - b0);
        const std::vector<int> p = Classify(m, int8 ? &*int8 : nullptr, set.Image(b0), n);
        std::copy(p.begin(), p.end(), r.predictions.begin() + b0);
      }
    });
  }
  for (auto& th : pool) th.join();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int64_t i = 0; i < r.images; ++i) {
    r.correct += r.predictions[static_cast<size_t>(i)] == set.labels[static_cast<size_t>(i)];
  }
  return r;
}

double LatencyBatch1Ms(const Model& m, const data::MnistSet& set, int64_t images, CpuBackend b) {
  images = std::max<int64_t>(1, std::min(images, set.count));
  const std::optional<Int8Net> int8 = MakeInt8(m, b);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < images; ++i) Classify(m, int8 ? &*int8 : nullptr, set.Image(i), 1);
  return 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
         static_cast<double>(images);
}

}  // namespace tpu::nn
