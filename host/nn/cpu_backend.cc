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

float OutputScale(const Model& m) {
  // Pooling and flatten keep their input's scale: follow them back to the layer that set it.
  int i = static_cast<int>(m.layers.size()) - 1;
  while (i >= 0 && !m.layers[static_cast<size_t>(i)].quantized)
    i = m.layers[static_cast<size_t>(i)].inputs[0];
  return i < 0 ? m.input_scale : m.layers[static_cast<size_t>(i)].q.output_scale;
}

namespace {

// Runs inputs [first, first + count) and stores their predictions (and outputs) in `r`.
// int8 is set for the int8 backend, null for fp32.
void Classify(const Model& m, const Int8Net* int8, const InputSet& in, int64_t first, int64_t count,
              bool keep, InferResult* r) {
  const int64_t outputs = m.layers.back().out.Size();
  std::vector<int> p;
  if (int8) {
    const MatrixI8 y = int8->Forward(Int8Inputs(m, in, first, count)).back();
    p = ArgMaxInt8(y);
    if (keep) std::copy_n(y.data(), y.size(), r->int8_outputs.begin() + first * outputs);
  } else {
    ForwardCache cache;
    cache.keep_cols = false;
    Forward(m, Fp32Inputs(in, first, count), &cache);
    p = ArgMax(cache.acts.back());
    if (keep)
      std::copy_n(cache.acts.back().data(), cache.acts.back().size(),
                  r->fp32_outputs.begin() + first * outputs);
  }
  std::copy(p.begin(), p.end(), r->predictions.begin() + first);
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

InferResult InferCpu(const Model& m, const InputSet& in, int64_t images, CpuBackend b, int batch,
                     int threads, bool keep) {
  const std::optional<Int8Net> int8 = MakeInt8(m, b);
  InferResult r;
  r.images = std::min(images, in.count);
  r.predictions.assign(static_cast<size_t>(r.images), -1);
  if (keep) {
    const auto size = static_cast<size_t>(r.images * m.layers.back().out.Size());
    (int8 ? r.int8_outputs.resize(size) : r.fp32_outputs.resize(size));
  }
  const auto start = std::chrono::steady_clock::now();
  const int64_t chunks = (r.images + batch - 1) / batch;
  threads = std::max(1, threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int64_t c = t; c < chunks; c += threads) {  // batches dealt out round robin
        const int64_t b0 = c * batch, n = std::min<int64_t>(batch, r.images - b0);
        Classify(m, int8 ? &*int8 : nullptr, in, b0, n, keep, &r);
      }
    });
  }
  for (auto& th : pool) th.join();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (in.HasLabels()) {
    for (int64_t i = 0; i < r.images; ++i) {
      r.correct += r.predictions[static_cast<size_t>(i)] == in.labels[static_cast<size_t>(i)];
    }
  }
  return r;
}

double LatencyBatch1Ms(const Model& m, const InputSet& in, int64_t images, CpuBackend b) {
  images = std::max<int64_t>(1, std::min(images, in.count));
  const std::optional<Int8Net> int8 = MakeInt8(m, b);
  InferResult scratch;
  scratch.predictions.resize(static_cast<size_t>(images));
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < images; ++i)
    Classify(m, int8 ? &*int8 : nullptr, in, i, 1, /*keep=*/false, &scratch);
  return 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
         static_cast<double>(images);
}

}  // namespace tpu::nn
