// See conv_reference.h. Every value that crosses the array unchanged (a transpose, the
// window's rows through the identity) is what the chip writes: its float32 value plus +0,
// rounded, which turns a -0 into +0.
#include "host/train/conv_reference.h"

#include "arith/bf16.h"
#include "arith/fp32.h"
#include "host/train/step_arith.h"

namespace tpu::train {

uint16_t ThroughArray(uint16_t v, uint32_t bias) {
  return arith::Bf16OfFp32(arith::Fp32Add(arith::Fp32OfBf16(v), bias));
}

namespace {

using arith::Fp32Add;
using arith::Fp32OfBf16;

constexpr uint16_t kBf16Quarter = 0x3e80;  // 1/4

// The array's product of a (m x k) and b (k x cols), K in chunks of n, rounded by the
// activation unit (parameter set 0: bias +0, no bound).
Bf16Values RoundedProduct(const Bf16Values& a, const Bf16Values& b, int64_t m, int64_t k,
                          int64_t cols, int n) {
  return chip::Activate(chip::Product(a, b, m, k, cols, n), false);
}

// Whether tap (y, x) of the (possibly dilated) map lies on a pixel; *y and *x become it.
bool OnPixel(const MapShape& m, bool dilated, int* y, int* x) {
  if (*y < 0 || *x < 0) return false;
  if (dilated) {
    if (*y % 2 != 0 || *x % 2 != 0) return false;
    *y /= 2;
    *x /= 2;
  }
  return *y < m.h && *x < m.w;
}

}  // namespace

Bf16Values WindowRows(const Bf16Values& maps, const MapShape& m, const WindowShape& w) {
  const int64_t lanes = w.Lanes(m.c);
  Bf16Values rows(static_cast<size_t>(int64_t{m.images} * w.out_h * w.out_w * lanes),
                  w.pad_min ? arith::kBf16Lowest : 0);
  size_t at = 0;
  for (int b = 0; b < m.images; ++b)
    for (int oy = 0; oy < w.out_h; ++oy)
      for (int ox = 0; ox < w.out_w; ++ox)
        for (int ky = 0; ky < w.kh; ++ky)
          for (int kx = 0; kx < w.kw; ++kx, at += static_cast<size_t>(m.c)) {
            int y = oy * w.stride_y + ky - w.pad_top, x = ox * w.stride_x + kx - w.pad_left;
            if (!OnPixel(m, w.dilated, &y, &x)) continue;
            const int64_t pixel = (int64_t{b} * m.h + y) * m.w + x;
            for (int c = 0; c < m.c; ++c)
              rows[at + static_cast<size_t>(c)] = maps[static_cast<size_t>(pixel * m.c + c)];
          }
  return rows;
}

Bf16Values ReceptiveFields(const Bf16Values& maps, const MapShape& m, const WindowShape& w) {
  const Bf16Values rows = WindowRows(maps, m, w);
  const int64_t lanes = w.Lanes(m.c), pixels = static_cast<int64_t>(rows.size()) / lanes;
  Bf16Values f(static_cast<size_t>(pixels * (lanes + 1)));
  for (int64_t p = 0; p < pixels; ++p) {
    for (int64_t e = 0; e < lanes; ++e)
      f[static_cast<size_t>(p * (lanes + 1) + e)] =
          ThroughArray(rows[static_cast<size_t>(p * lanes + e)]);
    f[static_cast<size_t>(p * (lanes + 1) + lanes)] = ThroughArray(0, arith::kFp32One);
  }
  return f;
}

Bf16Values WeightGradientT(const Bf16Values& dz, const Bf16Values& f, int64_t pixels, int outs,
                           int ins, int n) {
  return RoundedProduct(chip::Transposed(dz, pixels, outs), f, outs, pixels, ins, n);
}

Bf16Values ConvInputGradient(const Bf16Values& dz, const MapShape& dz_shape, const Bf16Values& w,
                             int kh, int kw, int ins, int n) {
  WindowShape fwd;
  fwd.kh = kh;
  fwd.kw = kw;
  return ConvInputGradient(dz, dz_shape, w, fwd, dz_shape.h + kh - 1, dz_shape.w + kw - 1, ins, n);
}

Bf16Values ConvInputGradient(const Bf16Values& dz, const MapShape& dz_shape, const Bf16Values& w,
                             const WindowShape& fwd, int in_h, int in_w, int ins, int n) {
  const int outs = dz_shape.c, kh = fwd.kh, kw = fwd.kw;
  // W'': rows (ky, kx, o) of the flipped kernel, lanes i; each a transposed value of w.
  Bf16Values flipped(static_cast<size_t>(int64_t{kh} * kw * outs * ins));
  for (int ky = 0; ky < kh; ++ky)
    for (int kx = 0; kx < kw; ++kx)
      for (int o = 0; o < outs; ++o)
        for (int i = 0; i < ins; ++i) {
          const int64_t tap = int64_t{kh - 1 - ky} * kw + (kw - 1 - kx);
          flipped[static_cast<size_t>(((int64_t{ky} * kw + kx) * outs + o) * ins + i)] =
              ThroughArray(w[static_cast<size_t>((tap * ins + i) * outs + o)]);
        }
  WindowShape win;
  win.kh = kh;
  win.kw = kw;
  win.pad_top = kh - 1 - fwd.pad_top;
  win.pad_left = kw - 1 - fwd.pad_left;
  win.out_h = in_h;
  win.out_w = in_w;
  win.dilated = fwd.stride_y == 2;
  const Bf16Values rows = WindowRows(dz, dz_shape, win);
  const int64_t k = win.Lanes(outs);
  return RoundedProduct(rows, flipped, static_cast<int64_t>(rows.size()) / k, k, ins, n);
}

namespace {

// Four identities times 1/4, one a tap of a 2 x 2 window: row q c + ch, lane ch.
Bf16Values Quarters(int c) {
  Bf16Values quarters(static_cast<size_t>(4 * c * c), 0);
  for (int q = 0; q < 4; ++q)
    for (int ch = 0; ch < c; ++ch)
      quarters[static_cast<size_t>((q * c + ch) * c + ch)] = kBf16Quarter;
  return quarters;
}

}  // namespace

Bf16Values AvgPool(const Bf16Values& h, const MapShape& h_shape, int n) {
  const int c = h_shape.c;
  WindowShape win;
  win.kh = win.kw = win.stride_y = win.stride_x = 2;
  win.out_h = h_shape.h / 2;
  win.out_w = h_shape.w / 2;
  const Bf16Values rows = WindowRows(h, h_shape, win);
  return RoundedProduct(rows, Quarters(c), static_cast<int64_t>(rows.size()) / (4 * c), 4 * c, c,
                        n);
}

Bf16Values AvgPoolGradient(const Bf16Values& dp, const MapShape& dp_shape, int n) {
  const int c = dp_shape.c;
  WindowShape win;
  win.kh = win.kw = 2;
  win.pad_top = win.pad_left = 1;
  win.out_h = 2 * dp_shape.h;
  win.out_w = 2 * dp_shape.w;
  win.dilated = true;
  const Bf16Values rows = WindowRows(dp, dp_shape, win);
  return RoundedProduct(rows, Quarters(c), static_cast<int64_t>(rows.size()) / (4 * c), 4 * c, c,
                        n);
}

}  // namespace tpu::train
