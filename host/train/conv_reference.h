// The CPU reference of a convolution's training arithmetic on the chip, piece by piece, as
// the examples in examples/training/ run it (docs/training.md, "A training step written
// out"): the window stage's rows, the receptive fields with the bias lane's 1, the weight
// gradient dWᵀ = dZᵀ F with the pixels as the reduction, the input gradient through the
// flipped kernel, and the average pooling and its gradient through windows. Values are
// bfloat16 bit patterns; every sum is the array's (arith::Bf16Gemm: K in tiles of n, each
// tile's column sums added into the accumulators) and every result leaves through the
// activation unit's rounding, so each function equals the chip's run bit for bit
// (tests/train/conv_reference_test.cc checks them against the examples' outputs).
#pragma once

#include <cstdint>
#include <vector>

namespace tpu::train {

// Maps of `images` images, h x w pixels of c channels: value [image][y][x][c].
struct MapShape {
  int images = 1, h = 1, w = 1, c = 1;
  int64_t Values() const { return int64_t{images} * h * w * c; }
};

// A window over a map (docs/isa.md, "Convolution windows"): kernel, stride, padding on the
// top and left (bottom and right as the output needs), the output's size, `dilated`: the
// map read as if a zero lay between its pixels, across and down, and `pad_min`: the padding
// read as the most negative bfloat16 (a max pooling's) instead of +0.
struct WindowShape {
  int kh = 1, kw = 1, stride_y = 1, stride_x = 1, pad_top = 0, pad_left = 0, out_h = 1, out_w = 1;
  bool dilated = false, pad_min = false;
  int64_t Lanes(int c) const { return int64_t{kh} * kw * c; }
};

using Bf16Values = std::vector<uint16_t>;

// A value through the array (a product with an identity's one 1) and the activation unit
// with `bias` (float32 bits): exact but for the bias, a -0 made +0.
uint16_t ThroughArray(uint16_t v, uint32_t bias = 0);

// The rows the window stage forms, image after image and each output pixel in raster
// order: lane (ky kw + kx) c + ch is the map's value under tap (ky, kx), +0 where the tap
// falls outside the map or on a dilation's zero (with `pad_min`, the most negative
// bfloat16). images x out_h x out_w rows of
// kh kw c lanes.
Bf16Values WindowRows(const Bf16Values& maps, const MapShape& m, const WindowShape& w);

// A convolution's receptive fields F as a training step forms them: the window's rows
// through the identity, then the activation unit's bias of 1 in lane kh kw c (the bias
// input's constant) and +0 elsewhere. Rows of kh kw c + 1 lanes.
Bf16Values ReceptiveFields(const Bf16Values& maps, const MapShape& m, const WindowShape& w);

// dWᵀ = dZᵀ F: `pixels` rows of dz (`outs` lanes) and of F (`ins` lanes), the pixels the
// sum's index in chunks of n, rounded by the activation unit: outs x ins values.
Bf16Values WeightGradientT(const Bf16Values& dz, const Bf16Values& f, int64_t pixels, int outs,
                           int ins, int n);

// The input gradient of a stride-1 valid convolution whose forward tile holds `w` as rows
// (ky, kx, i) and lanes o: a window over dz (`dz_shape`: the forward pass's output, o
// channels) padded by k - 1 through the flipped kernel, rounded: the forward input's
// pixels, `ins` lanes each.
Bf16Values ConvInputGradient(const Bf16Values& dz, const MapShape& dz_shape, const Bf16Values& w,
                             int kh, int kw, int ins, int n);
// The same for a convolution of forward window `fwd` (kernel, padding on the top and left at
// most the kernel's side less 1, stride 1 or 2) over an in_h x in_w map: a window over dz
// padded by the kernel's side less 1 less the forward padding, read dilated for stride 2
// (an output pixel's gradient reaches the input pixels its taps read), out in_h x in_w.
Bf16Values ConvInputGradient(const Bf16Values& dz, const MapShape& dz_shape, const Bf16Values& w,
                             const WindowShape& fwd, int in_h, int in_w, int ins, int n);

// A 2 x 2 average pooling (stride 2) in raster order: a window of kernel 2 x 2, stride 2,
// through a tile of four identities times 1/4 (the four exact products added in the taps'
// order), rounded. `h`: the maps before the pooling (even sides).
Bf16Values AvgPool(const Bf16Values& h, const MapShape& h_shape, int n);

// A 2 x 2 average pooling's gradient (stride 2): each output pixel of the map before the
// pooling takes its window's pooled gradient times 1/4, as one dilated window (kernel 2 x 2,
// padding 1) through a tile of four identities times 1/4, rounded. `dp`: the pooled maps.
Bf16Values AvgPoolGradient(const Bf16Values& dp, const MapShape& dp_shape, int n);

}  // namespace tpu::train
