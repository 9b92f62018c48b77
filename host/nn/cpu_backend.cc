// CPU inference backends (see cpu_backend.h).
#include "host/nn/cpu_backend.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "arith/bf16.h"
#include "host/common/errors.h"
#include "host/nn/bf16_net.h"
#include "host/nn/fp32_net.h"
#include "host/nn/int8_net.h"

namespace tpu::nn {

CpuBackend ParseCpuBackend(const std::string& name) {
  if (name == "cpu-fp32") return CpuBackend::kFp32;
  if (name == "cpu-int8") return CpuBackend::kInt8;
  if (name == "cpu-bf16") return CpuBackend::kBf16;
  throw UsageError("unknown backend '" + name +
                   "' (known: cpu-fp32, cpu-int8, cpu-bf16, and on an NVIDIA GPU cuda-int8, "
                   "cuda-fp32)");
}

const char* CpuBackendName(CpuBackend b) {
  return b == CpuBackend::kFp32 ? "cpu-fp32" : b == CpuBackend::kInt8 ? "cpu-int8" : "cpu-bf16";
}

float OutputScale(const Model& m) {
  // Pooling and flatten keep their input's scale: follow them back to the layer that set it.
  int i = static_cast<int>(m.layers.size()) - 1;
  while (i >= 0 && !m.layers[static_cast<size_t>(i)].quantized)
    i = m.layers[static_cast<size_t>(i)].inputs[0];
  return i < 0 ? m.input_scale : m.layers[static_cast<size_t>(i)].q.output_scale;
}

namespace {

// What a backend prepares once per model: the int8 network, or the bf16 one.
struct Prepared {
  std::optional<Int8Net> int8;
  std::optional<Bf16Net> bf16;
};

Prepared Prepare(const Model& m, CpuBackend b, int bf16_array_dim) {
  Prepared p;
  if (b == CpuBackend::kInt8) {
    if (!m.quantized) {
      throw UsageError("model '" + m.name + "' has no int8 version; make one with tpusim quantize");
    }
    p.int8.emplace(m);
  } else if (b == CpuBackend::kBf16) {
    p.bf16.emplace(m, bf16_array_dim);
  }
  return p;
}

// Inputs [first, first + count) through the bf16 network, one at a time.
std::vector<int> ClassifyBf16(const Bf16Net& net, const Model& m, const InputSet& in, int64_t first,
                              int64_t count, float* outputs) {
  const RowMatrix<float> x = Fp32Inputs(in, first, count);
  const int64_t n_out = m.layers.back().out.Size();
  std::vector<int> p;
  for (int64_t i = 0; i < count; ++i) {
    const std::vector<uint16_t> y = net.Forward(x.row(i).data()).back();
    p.push_back(ArgMaxBf16(y));
    if (outputs)
      for (int64_t j = 0; j < n_out; ++j)
        outputs[i * n_out + j] = arith::FloatOfBits(arith::Fp32OfBf16(y[static_cast<size_t>(j)]));
  }
  return p;
}

// Runs inputs [first, first + count) and stores their predictions (and outputs) in `r`.
void Classify(const Model& m, const Prepared& net, const InputSet& in, int64_t first, int64_t count,
              bool keep, InferResult* r) {
  const int64_t outputs = m.layers.back().out.Size();
  std::vector<int> p;
  if (net.int8) {
    const MatrixI8 y = net.int8->Forward(Int8Inputs(m, in, first, count)).back();
    p = ArgMaxInt8(y);
    if (keep) std::copy_n(y.data(), y.size(), r->int8_outputs.begin() + first * outputs);
  } else if (net.bf16) {
    p = ClassifyBf16(*net.bf16, m, in, first, count,
                     keep ? &r->fp32_outputs[static_cast<size_t>(first * outputs)] : nullptr);
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

}  // namespace

InferResult InferCpu(const Model& m, const InputSet& in, int64_t images, CpuBackend b, int batch,
                     int threads, bool keep, int bf16_array_dim) {
  const Prepared net = Prepare(m, b, bf16_array_dim);
  InferResult r;
  r.images = std::min(images, in.count);
  r.predictions.assign(static_cast<size_t>(r.images), -1);
  if (keep) {
    const auto size = static_cast<size_t>(r.images * m.layers.back().out.Size());
    (net.int8 ? r.int8_outputs.resize(size) : r.fp32_outputs.resize(size));
  }
  const auto start = std::chrono::steady_clock::now();
  const int64_t chunks = (r.images + batch - 1) / batch;
  threads = std::max(1, threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int64_t c = t; c < chunks; c += threads) {  // batches dealt out round robin
        const int64_t b0 = c * batch, n = std::min<int64_t>(batch, r.images - b0);
        Classify(m, net, in, b0, n, keep, &r);
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

double LatencyBatch1Ms(const Model& m, const InputSet& in, int64_t images, CpuBackend b,
                       int bf16_array_dim) {
  images = std::max<int64_t>(1, std::min(images, in.count));
  const Prepared net = Prepare(m, b, bf16_array_dim);
  InferResult scratch;
  scratch.predictions.resize(static_cast<size_t>(images));
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < images; ++i) Classify(m, net, in, i, 1, /*keep=*/false, &scratch);
  return 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
         static_cast<double>(images);
}

}  // namespace tpu::nn
