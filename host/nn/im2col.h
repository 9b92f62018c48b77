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

// x: one image per row, h x w x c. Returns (images * out_h * out_w) x (kh * kw * c_in).
template <typename T>
RowMatrix<T> Im2Col(const Layer& l, const RowMatrix<T>& x) {
  const int64_t batch = x.rows();
  RowMatrix<T> cols =
      RowMatrix<T>::Zero(batch * l.out.h * l.out.w, int64_t{l.kernel_h} * l.kernel_w * l.in.c);
  for (int64_t b = 0; b < batch; ++b) {
    const T* img = x.row(b).data();
    for (int oh = 0; oh < l.out.h; ++oh) {
      for (int ow = 0; ow < l.out.w; ++ow) {
        T* dst = cols.row((b * l.out.h + oh) * l.out.w + ow).data();
        for (int kh = 0; kh < l.kernel_h; ++kh) {
          const int ih = oh * l.stride + kh - l.pad_top;
          if (ih < 0 || ih >= l.in.h) continue;
          for (int kw = 0; kw < l.kernel_w; ++kw) {
            const int iw = ow * l.stride + kw - l.pad_left;
            if (iw < 0 || iw >= l.in.w) continue;
            std::copy_n(img + (int64_t{ih} * l.in.w + iw) * l.in.c, l.in.c,
                        dst + (kh * l.kernel_w + kw) * l.in.c);
          }
        }
      }
    }
  }
  return cols;
}

}  // namespace tpu::nn
