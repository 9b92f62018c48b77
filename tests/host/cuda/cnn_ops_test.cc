// The per-value layer functions the CUDA kernels run (host/cuda/cnn_ops.h), run here on the
// CPU: every int8 layer output equals the int8 reference, and fp32 predictions agree with
// the CPU fp32 backend. This checks the GPU arithmetic without a GPU.
#include "host/cuda/cnn_ops.h"

#include <gtest/gtest.h>

#include "host/common/errors.h"
#include "host/nn/cpu_backend.h"
#include "host/nn/int8_reference.h"
#include "host/nn/quantize.h"
#include "tests/host/nn/nn_test_util.h"
#include "tests/mnist_test_util.h"

namespace tpu::cuda {
namespace {

// The whole network for one image, value by value, as the kernels compute it.
std::vector<std::vector<int8_t>> RunInt8(const nn::Model& m, const uint8_t* pixels) {
  std::vector<int8_t> x(static_cast<size_t>(m.input.Size()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = arith::QuantizePixel(pixels[i]);
  std::vector<std::vector<int8_t>> outs;
  for (const nn::Layer& l : m.layers) {
    const LayerDesc d = Describe(l);
    const std::vector<int8_t> w =
        l.HasWeights() ? OutputMajor(l, l.q.weights.data) : std::vector<int8_t>{};
    std::vector<int8_t> y(static_cast<size_t>(OutSize(d)));
    for (int64_t o = 0; o < OutSize(d); ++o) {
      y[static_cast<size_t>(o)] =
          LayerOutInt8(d, x.data(), w.data(), l.HasWeights() ? l.q.bias.data.data() : nullptr,
                       l.q.multiplier.data(), l.q.shift.data(), o);
    }
    outs.push_back(y);
    x = y;
  }
  return outs;
}

int RunFp32(const nn::Model& m, const uint8_t* pixels) {
  std::vector<float> x(static_cast<size_t>(m.input.Size()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = pixels[i] / 255.0f;
  for (const nn::Layer& l : m.layers) {
    const LayerDesc d = Describe(l);
    const std::vector<float> w =
        l.HasWeights() ? OutputMajor(l, l.weights.data) : std::vector<float>{};
    std::vector<float> y(static_cast<size_t>(OutSize(d)));
    for (int64_t o = 0; o < OutSize(d); ++o) {
      y[static_cast<size_t>(o)] = LayerOutFp32(d, x.data(), w.data(), l.bias.data.data(), o);
    }
    x = y;
  }
  return static_cast<int>(std::max_element(x.begin(), x.end()) - x.begin());
}

void ExpectEqualsReference(const nn::Model& m, const data::MnistSet& s) {
  for (int64_t i = 0; i < s.count; ++i) {
    ASSERT_EQ(RunInt8(m, s.Image(i)), nn::ReferenceInt8(m, s.Image(i))) << "image " << i;
  }
  const auto cpu = nn::InferCpu(m, s, s.count, nn::CpuBackend::kFp32, 16, 1);
  int64_t same = 0;
  for (int64_t i = 0; i < s.count; ++i)
    same += RunFp32(m, s.Image(i)) == cpu.predictions[static_cast<size_t>(i)];
  EXPECT_GE(same, s.count * 98 / 100) << "fp32 predictions agree with the CPU fp32 backend";
}

TEST(CnnOpsTest, StridedSameModel) {
  nn::Model m = test::StridedSameModel(31);
  nn::Quantize(&m, test::RandomImages(m, 64, 32), 64);
  ExpectEqualsReference(m, test::RandomImages(m, 40, 33));
}

TEST(CnnOpsTest, AvgPoolModel) {
  nn::Model m = test::AvgPoolModel(34);
  nn::Quantize(&m, test::RandomImages(m, 64, 35), 64);
  ExpectEqualsReference(m, test::RandomImages(m, 40, 36));
}

TEST(CnnOpsTest, CommittedLenetOnMnist) {
  TPUSIM_MNIST_DIR_OR_SKIP(dir)
  const nn::Model m = nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  ExpectEqualsReference(m, data::LoadMnist(dir, false, 50));
}

}  // namespace
}  // namespace tpu::cuda
