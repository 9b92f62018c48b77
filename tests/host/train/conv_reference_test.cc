// The convolution's training arithmetic in C++ (host/train/conv_reference.h) against the
// chip's runs: each function, given an example's inputs (examples/training/make_*.py wrote
// them, with numpy's expected outputs, which the chip meets bit for bit on both engines:
// VectorExamplesTest), gives the example's expected output bit for bit. Three independent
// writings of one arithmetic (numpy, C++, the programs) agree.
#include "host/train/conv_reference.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

namespace tpu::train {
namespace {

constexpr int kN = 128;  // tpu-v2's lanes

// Rows [first, first + rows) of a file of bfloat16 rows of kN lanes, lanes [0, lanes) each.
Bf16Values Rows(const std::string& file, int64_t first, int64_t rows, int lanes) {
  std::ifstream f(std::string(TPUSIM_SOURCE_DIR "/examples/training/") + file, std::ios::binary);
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(f), {}};
  Bf16Values out;
  for (int64_t r = first; r < first + rows; ++r)
    for (int l = 0; l < lanes; ++l) {
      const size_t at = static_cast<size_t>((r * kN + l) * 2);
      EXPECT_LT(at + 1, bytes.size()) << file;
      if (at + 1 >= bytes.size()) return out;
      out.push_back(static_cast<uint16_t>(bytes[at] | bytes[at + 1] << 8));
    }
  return out;
}

// conv_grad: two 32 x 32 maps (packed 128 pixels a row at 0x8000), dZ 1,800 rows of 6 lanes
// (at 0x10000); dWᵀ, 6 rows of 10 lanes.
TEST(ConvReferenceTest, WeightGradientIsTheChipsConvGradExample) {
  const Bf16Values x = Rows("conv_grad.host.bin", 0x8000 / 256, 16, kN);
  WindowShape w;
  w.kh = w.kw = 3;
  w.out_h = w.out_w = 30;
  const Bf16Values f = ReceptiveFields(x, {2, 32, 32, 1}, w);
  ASSERT_EQ(f.size(), 1800u * 10u);
  const Bf16Values dz = Rows("conv_grad.host.bin", 0x10000 / 256, 1800, 6);
  EXPECT_EQ(WeightGradientT(dz, f, 1800, 6, 10, kN), Rows("conv_grad.expected.bin", 0, 6, 10));
}

// conv_input_grad: W as the forward tile (54 rows (ky, kx, i), 16 lanes o, at 0x8000), dZ
// two 13 x 13 maps of 16 channels (at 0x18000); dX, 450 rows, lanes 0-5 (the lanes past
// them hold what the program's transposed loads brought, never read).
TEST(ConvReferenceTest, InputGradientIsTheChipsConvInputGradExample) {
  const Bf16Values w = Rows("conv_input_grad.host.bin", 0x8000 / 256, 54, 16);
  const Bf16Values dz = Rows("conv_input_grad.host.bin", 0x18000 / 256, 2 * 13 * 13, 16);
  EXPECT_EQ(ConvInputGradient(dz, {2, 13, 13, 16}, w, 3, 3, 6, kN),
            Rows("conv_input_grad.expected.bin", 0, 450, 6));
}

// pool_fwd: two 30 x 30 maps of 6 channels (at 0x0) pooled to 15 x 15, 450 rows of 6 lanes.
TEST(ConvReferenceTest, AvgPoolIsTheChipsPoolFwdExample) {
  const Bf16Values h = Rows("pool_fwd.host.bin", 0, 1800, 6);
  EXPECT_EQ(AvgPool(h, {2, 30, 30, 6}, kN), Rows("pool_fwd.expected.bin", 0, 450, 6));
}

// pool_grad: two pooled 6 x 6 maps of 16 channels (at 0x0); their gradient spread back over
// 12 x 12 maps, 288 rows of 16 lanes.
TEST(ConvReferenceTest, AvgPoolGradientIsTheChipsPoolGradExample) {
  const Bf16Values dp = Rows("pool_grad.host.bin", 0, 72, 16);
  EXPECT_EQ(AvgPoolGradient(dp, {2, 6, 6, 16}, kN), Rows("pool_grad.expected.bin", 0, 288, 16));
}

// The window's rows by hand: a 3 x 3 map of one channel, kernel 2 x 2, padding 1, stride 2;
// dilated, the same map read with a zero between its pixels.
TEST(ConvReferenceTest, WindowRowsReadThePaddingAndTheDilationAsZeros) {
  const Bf16Values map = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  WindowShape w;
  w.kh = w.kw = 2;
  w.stride_y = w.stride_x = 2;
  w.pad_top = w.pad_left = 1;
  w.out_h = w.out_w = 2;
  EXPECT_EQ(WindowRows(map, {1, 3, 3, 1}, w),
            (Bf16Values{0, 0, 0, 1, 0, 0, 2, 3, 0, 4, 0, 7, 5, 6, 8, 9}));
  w.dilated = true;
  w.stride_y = w.stride_x = 1;
  w.out_h = w.out_w = 2;
  EXPECT_EQ(WindowRows(map, {1, 3, 3, 1}, w),
            (Bf16Values{0, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0}));
}

}  // namespace
}  // namespace tpu::train
