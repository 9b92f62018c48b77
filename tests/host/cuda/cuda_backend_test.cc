// The CUDA backends on a GPU (label cuda): int8 logits equal the CPU int8 reference on
// 1,000 test images; fp32 predictions agree with the CPU fp32 backend. Without a GPU (or
// in a build without CUDA) every test skips, saying why.
#include "host/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include "host/common/errors.h"
#include "host/nn/cpu_backend.h"
#include "host/nn/int8_reference.h"

namespace tpu::cuda {
namespace {

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!Available(&why)) GTEST_SKIP() << "no GPU: " << why;
    try {
      dir_ = data::FindMnistDir("");
    } catch (const UsageError& e) {
      GTEST_SKIP() << e.what();
    }
  }
  std::string dir_;
};

TEST_F(CudaBackendTest, Int8LogitsEqualTheCpuReferenceOnAThousandImages) {
  const nn::Model m = nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  const data::MnistSet s = data::LoadMnist(dir_, false, 1000);
  const GpuResult r = InferCudaInt8(m, s, 1000, 256);
  ASSERT_EQ(r.logits_int8.size(), 1000u);
  for (int64_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(r.logits_int8[static_cast<size_t>(i)], nn::ReferenceInt8(m, s.Image(i)).back()) << i;
  }
}

TEST_F(CudaBackendTest, Fp32AgreesWithTheCpu) {
  const nn::Model m = nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  const data::MnistSet s = data::LoadMnist(dir_, false, 1000);
  const GpuResult r = InferCudaFp32(m, s, 1000, 256);
  const auto cpu = nn::InferCpu(m, s, 1000, nn::CpuBackend::kFp32, 64, 2);
  int64_t same = 0;
  for (int64_t i = 0; i < 1000; ++i) same += r.predictions[i] == cpu.predictions[i];
  EXPECT_GE(same, 995) << "tolerance: at most 0.5 % of predictions may flip on float rounding";
}

}  // namespace
}  // namespace tpu::cuda
