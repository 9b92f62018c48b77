// im2col: a convolution's input patches as the rows of a matrix, so the convolution is one
// matrix product. Rows: (image, oh, ow); columns: (kh, kw, c), matching weights stored
// kh x kw x c_in x c_out. Out-of-image taps (padding) are zero.
#pragma once

#include <Eigen/Core>
#include <algorithm>

#include "host/nn/model.h"

namespace tpu::nn {

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Calls f(image, patch_row, in_offset, col_offset) for every in-image tap of every
// window: patch_row is the row of the im2col matrix, in_offset the tap's first channel in
// the image (h x w x c), col_offset its first column in the patch row. Padding taps are
// skipped.
template <typename F>
void ForEachWindowTap(const Layer& l, int64_t batch, F&& f) {
  for (int64_t b = 0; b < batch; ++b) {
    for (int oh = 0; oh < l.out.h; ++oh) {
      for (int ow = 0; ow < l.out.w; ++ow) {
        const int64_t patch_row = (b * l.out.h + oh) * l.out.w + ow;
        for (int kh = 0; kh < l.kernel_h; ++kh) {
          const int ih = oh * l.stride + kh - l.pad_top;
          if (ih < 0 || ih >= l.in.h) continue;
          for (int kw = 0; kw < l.kernel_w; ++kw) {
            const int iw = ow * l.stride + kw - l.pad_left;
            if (iw < 0 || iw >= l.in.w) continue;
            f(b, patch_row, (int64_t{ih} * l.in.w + iw) * l.in.c,
              int64_t{kh * l.kernel_w + kw} * l.in.c);
          }
        }
      }
    }
  }
}

// x: one image per row, h x w x c. Returns (images * out_h * out_w) x (kh * kw * c_in), of
// type T (the int8 network forms its windows of int8 values in float, for the exact GEMM).
// Each kernel row that lies inside the image is kw * c contiguous values, copied at once.
template <typename T, typename X = T>
RowMatrix<T> Im2Col(const Layer& l, const RowMatrix<X>& x) {
  const int64_t k = int64_t{l.kernel_h} * l.kernel_w * l.in.c;
  const int64_t span = int64_t{l.kernel_w} * l.in.c;
  RowMatrix<T> cols(x.rows() * l.out.h * l.out.w, k);
  // Without padding every tap lies inside the image and every value is written.
  if (l.pad_top || l.pad_left || l.pad_bottom || l.pad_right) cols.setZero();
  for (int64_t b = 0; b < x.rows(); ++b) {
    const X* image = x.row(b).data();
    for (int oh = 0; oh < l.out.h; ++oh) {
      for (int ow = 0; ow < l.out.w; ++ow) {
        T* dst = cols.row((b * l.out.h + oh) * l.out.w + ow).data();
        const int iw0 = ow * l.stride - l.pad_left;
        for (int kh = 0; kh < l.kernel_h; ++kh, dst += span) {
          const int ih = oh * l.stride + kh - l.pad_top;
          if (ih < 0 || ih >= l.in.h) continue;
          const X* src = image + (int64_t{ih} * l.in.w + iw0) * l.in.c;
          if (iw0 >= 0 && iw0 + l.kernel_w <= l.in.w) {
            std::copy_n(src, span, dst);
            continue;
          }
          for (int kw = 0; kw < l.kernel_w; ++kw) {
            const int iw = iw0 + kw;
            if (iw >= 0 && iw < l.in.w) {
              std::copy_n(src + int64_t{kw} * l.in.c, l.in.c, dst + int64_t{kw} * l.in.c);
            }
          }
        }
      }
    }
  }
  return cols;
}

// The adjoint of Im2Col: adds the columns' values back into the images they came from.
template <typename T>
void Col2Im(const Layer& l, const RowMatrix<T>& cols, RowMatrix<T>* x) {
  ForEachWindowTap(l, x->rows(), [&](int64_t b, int64_t row, int64_t in, int64_t col) {
    T* d = x->row(b).data() + in;
    const T* s = cols.row(row).data() + col;
    for (int c = 0; c < l.in.c; ++c) d[c] += s[c];
  });
}

}  // namespace tpu::nn
