// CPU inference and training speed of the MNIST CNN (Google Benchmark): images/s of the
// cpu-fp32 and cpu-int8 backends at batch 1, 64 and 1024 (one thread, so the numbers
// compare across machines), and the time of one training epoch on both cores.
#include <benchmark/benchmark.h>

#include "host/data/mnist.h"
#include "host/nn/cpu_backend.h"
#include "host/nn/trainer.h"

namespace tpu {
namespace {

const data::MnistSet& TestSet() {
  static const data::MnistSet set = data::LoadMnist(data::FindMnistDir(""), false);
  return set;
}

const nn::Model& Lenet5() {
  static const nn::Model model = nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  return model;
}

void BM_Infer(benchmark::State& state, nn::CpuBackend backend) {
  const int batch = static_cast<int>(state.range(0));
  const int64_t images = std::max<int64_t>(batch, 2048);
  int64_t done = 0;
  for (auto _ : state) {
    const auto r = nn::InferCpu(Lenet5(), TestSet(), images, backend, batch, 1);
    benchmark::DoNotOptimize(r.correct);
    done += r.images;
  }
  state.counters["images_per_s"] =
      benchmark::Counter(static_cast<double>(done), benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_Infer, cpu_fp32, nn::CpuBackend::kFp32)
    ->Arg(1)
    ->Arg(64)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Infer, cpu_int8, nn::CpuBackend::kInt8)
    ->Arg(1)
    ->Arg(64)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_TrainEpoch(benchmark::State& state) {
  static const data::MnistSet train = data::LoadMnist(data::FindMnistDir(""), true);
  for (auto _ : state) {
    nn::Model m = nn::MakeLenet5(1);
    nn::AdamState adam = nn::AdamState::For(m);
    nn::TrainOptions o;  // batch 64, 2 threads
    benchmark::DoNotOptimize(nn::TrainEpoch(&m, train, 1, o, &adam).loss);
  }
}
BENCHMARK(BM_TrainEpoch)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(2);

}  // namespace
}  // namespace tpu

BENCHMARK_MAIN();
