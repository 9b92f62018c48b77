// The int8 arithmetic (arith/int8.h), quantization (quantize.cc), and the Eigen
// int8 backend (int8_net.cc) against the scalar reference (int8_reference.cc) at every
// layer.
#include "arith/int8.h"

#include <gtest/gtest.h>

#include <cmath>

#include "host/common/errors.h"
#include "host/nn/cpu_backend.h"
#include "host/nn/int8_net.h"
#include "host/nn/int8_reference.h"
#include "host/nn/quantize.h"
#include "tests/host/nn/nn_test_util.h"
#include "tests/mnist_test_util.h"

namespace tpu::nn {
namespace {

TEST(Int8OpsTest, RequantizeRoundsHalfUpAndClamps) {
  const int32_t half = 1 << 30;                          // multiplier 2^30 with shift 31: x 0.5
  EXPECT_EQ(arith::Requantize(3, half, 31, -128), 2);    // 1.5 -> 2
  EXPECT_EQ(arith::Requantize(-3, half, 31, -128), -1);  // -1.5 -> -1 (ties toward +infinity)
  EXPECT_EQ(arith::Requantize(-5, half, 31, -128), -2);  // -2.5 -> -2
  EXPECT_EQ(arith::Requantize(4, half, 31, -128), 2);
  EXPECT_EQ(arith::Requantize(1000, half, 31, -128), 127);
  EXPECT_EQ(arith::Requantize(-1000, half, 31, -128), -128);
  EXPECT_EQ(arith::Requantize(-1000, half, 31, 0), 0);              // fused ReLU
  EXPECT_EQ(arith::Requantize(INT32_MAX, INT32_MAX, 62, -128), 1);  // no 64-bit overflow
}

TEST(Int8OpsTest, AveragePoolRoundsHalfUp) {
  EXPECT_EQ(arith::AveragePool(2, 4), 1);    // 0.5 -> 1
  EXPECT_EQ(arith::AveragePool(-2, 4), 0);   // -0.5 -> 0
  EXPECT_EQ(arith::AveragePool(-3, 4), -1);  // -0.75 -> -1
  EXPECT_EQ(arith::AveragePool(5, 4), 1);    // 1.25 -> 1
  EXPECT_EQ(arith::AveragePool(508, 4), 127);
  EXPECT_EQ(arith::AveragePool(-512, 4), -128);
}

TEST(Int8OpsTest, PixelQuantization) {
  EXPECT_EQ(arith::QuantizePixel(0), 0);
  EXPECT_EQ(arith::QuantizePixel(255), 127);
  EXPECT_EQ(arith::QuantizePixel(128), 64);  // 63.75
  EXPECT_EQ(arith::QuantizePixel(2), 1);     // 0.996
}

// Halves away from zero, clamped; values far beyond int64 clamp too (fuzzing found a cast
// of 6.5e31 to int64, undefined behaviour: tests/fuzz/regressions/inputs/).
TEST(Int8OpsTest, InputQuantizationRoundsAwayFromZeroAndClampsAnyValue) {
  EXPECT_EQ(arith::QuantizeInput(0.5f, 1.0f), 1);
  EXPECT_EQ(arith::QuantizeInput(-0.5f, 1.0f), -1);
  EXPECT_EQ(arith::QuantizeInput(1.25f, 0.5f), 3);  // 2.5
  EXPECT_EQ(arith::QuantizeInput(126.6f, 1.0f), 127);
  EXPECT_EQ(arith::QuantizeInput(-128.4f, 1.0f), -128);
  EXPECT_EQ(arith::QuantizeInput(3e38f, 1e-30f), 127);
  EXPECT_EQ(arith::QuantizeInput(-3e38f, 1e-30f), -128);
  EXPECT_EQ(arith::QuantizeInput(6.5e31f, 1.0f), 127);
}

TEST(Int8OpsTest, ResidualProductRoundsHalfUpAndClamps) {
  EXPECT_EQ(arith::MulRequantize(127, 127, 1, 7, -128), 126);    // 16129 / 128 = 126.0
  EXPECT_EQ(arith::MulRequantize(3, 1, 1, 1, -128), 2);          // 1.5 rounds up
  EXPECT_EQ(arith::MulRequantize(-3, 1, 1, 1, -128), -1);        // -1.5 rounds up
  EXPECT_EQ(arith::MulRequantize(-128, -128, 1, 6, -128), 127);  // 256 clamps
  EXPECT_EQ(arith::MulRequantize(-100, 100, 1, 6, 0), 0);        // ReLU
  EXPECT_EQ(arith::MulRequantize(100, 100, 0x7fffffff, 62, -128), 0);
}

TEST(QuantizeTest, MultiplierIsAccurate) {
  for (double real : {0.5, 0.999999, 1e-3, 0.0123456, 3.0, 1e-9, 123.456}) {
    int32_t m = 0, s = 0;
    QuantizeMultiplier(real, &m, &s);
    ASSERT_GE(s, 1);
    ASSERT_LE(s, 62);
    if (m == 0) {
      EXPECT_LT(real, std::ldexp(1.0, -31));
      continue;
    }
    EXPECT_GE(m, 1 << 30);
    EXPECT_NEAR(std::ldexp(static_cast<double>(m), -s), real, real * std::ldexp(1.0, -30));
  }
  int32_t m = 0, s = 0;
  EXPECT_THROW(QuantizeMultiplier(std::ldexp(1.0, 31), &m, &s), UsageError);
}

TEST(QuantizeTest, QuantizationErrorsAreWithinHalfAStep) {
  Model m = test::AvgPoolModel(11);
  Quantize(&m, test::RandomImages(m, 50, 12), 50);
  ASSERT_TRUE(m.quantized);
  for (const Layer& l : m.layers) {
    if (!l.HasWeights()) continue;
    for (int64_t k = 0; k < l.weights.Size(); ++k) {
      const int c = static_cast<int>(k % l.out.c);
      const float s = l.q.weight_scales[c];
      EXPECT_LE(std::fabs(l.weights.data[k] - l.q.weights.data[k] * s), 0.5f * s + 1e-7f);
      EXPECT_LE(std::abs(l.q.weights.data[k]), 127);
    }
    for (int c = 0; c < l.out.c; ++c) {
      const double step = double{l.q.input_scale} * l.q.weight_scales[c];
      EXPECT_LE(std::fabs(l.bias.data[c] - l.q.bias.data[c] * step), 0.5 * step + 1e-9);
    }
  }
  EXPECT_THROW(Quantize(&m, test::RandomImages(m, 5, 1), 5), UsageError) << "twice";
}

void ExpectEigenEqualsReference(const Model& m, const data::MnistSet& s, int64_t images) {
  const std::vector<MatrixI8> eigen = Int8Net(m).Forward(s.pixels.data(), images);
  for (int64_t i = 0; i < images; ++i) {
    const auto ref = ReferenceInt8(m, s.Image(i));
    ASSERT_EQ(ref.size(), eigen.size());
    for (size_t l = 0; l < ref.size(); ++l) {
      const std::vector<int8_t> row(eigen[l].row(i).data(),
                                    eigen[l].row(i).data() + eigen[l].cols());
      ASSERT_EQ(row, ref[l]) << "image " << i << ", layer " << m.layers[l].name;
    }
  }
}

TEST(Int8NetTest, EigenEqualsScalarReferenceOnStridedSameModel) {
  Model m = test::StridedSameModel(21);
  Quantize(&m, test::RandomImages(m, 64, 22), 64);
  ExpectEigenEqualsReference(m, test::RandomImages(m, 40, 23), 40);
}

TEST(Int8NetTest, EigenEqualsScalarReferenceOnAvgPoolModel) {
  Model m = test::AvgPoolModel(24);
  Quantize(&m, test::RandomImages(m, 64, 25), 64);
  ExpectEigenEqualsReference(m, test::RandomImages(m, 40, 26), 40);
}

TEST(Int8NetTest, EigenEqualsScalarReferenceOnCommittedLenet5) {
  const Model m = LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  TPUSIM_MNIST_DIR_OR_SKIP(dir)
  ExpectEigenEqualsReference(m, data::LoadMnist(dir, false, 100), 100);
}

TEST(Int8NetTest, QuantizedRandomModelStaysCloseToFp32) {
  // On calibration-like data, int8 predictions mostly agree with fp32.
  Model m = test::AvgPoolModel(27);
  const data::MnistSet s = test::RandomImages(m, 300, 28);
  Quantize(&m, s, 300);
  const auto fp32 = InferCpu(m, s, s.count, CpuBackend::kFp32, 64, 2);
  const auto int8 = InferCpu(m, s, s.count, CpuBackend::kInt8, 64, 2);
  int64_t same = 0;
  for (int64_t i = 0; i < s.count; ++i) same += fp32.predictions[i] == int8.predictions[i];
  EXPECT_GT(same, s.count * 9 / 10);
}

}  // namespace
}  // namespace tpu::nn
