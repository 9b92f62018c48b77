// One output value of each layer of the CNN, int8 and fp32, as plain functions that run on
// the host and on CUDA devices alike: the CUDA kernels (cuda_backend.cu) launch one thread
// per output value, and tests/host/cuda/cnn_ops_test.cc runs the very same functions on
// the CPU against the int8 reference. The int8 arithmetic is arith/int8.h.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "arith/int8.h"
#include "host/common/errors.h"
#include "host/nn/model.h"

namespace tpu::cuda {

// A layer as the kernels see it: shapes and hyperparameters, no tensors.
struct LayerDesc {
  int type = 0;  // nn::LayerType
  int in_h = 1, in_w = 1, in_c = 1, out_h = 1, out_w = 1, out_c = 1;
  int kernel_h = 1, kernel_w = 1, stride = 1, pad_top = 0, pad_left = 0;
  int pool_h = 2, pool_w = 2, pool_stride = 2;
  int relu = 0;  // 1: ReLU, 6: ReLU6 (int8: both clamp at zero, docs/quantization.md)
};

// Layer l for the kernels; UsageError for an operation they do not run. The kernels switch
// on the type (device code cannot call the operation table's host functions), so they run
// the operations of a chain, as TPU v1's CNNs are: convolutions, dense layers, pooling and
// flatten (docs/developing.md, "An operation").
inline LayerDesc Describe(const nn::Layer& l) {
  if (!l.HasWeights() && !l.IsPool() && l.type != nn::LayerType::kFlatten) {
    throw UsageError("layer '" + l.name + "' is a " + l.TypeName() +
                     "; the CUDA backends run convolutions, dense layers, pooling and flatten");
  }
  LayerDesc d;
  d.type = static_cast<int>(l.type);
  d.in_h = l.in.h, d.in_w = l.in.w, d.in_c = l.in.c;
  d.out_h = l.out.h, d.out_w = l.out.w, d.out_c = l.out.c;
  d.kernel_h = l.kernel_h, d.kernel_w = l.kernel_w, d.stride = l.stride;
  d.pad_top = l.pad_top, d.pad_left = l.pad_left;
  d.pool_h = l.pool_h, d.pool_w = l.pool_w, d.pool_stride = l.pool_stride;
  d.relu = l.activation == nn::Activation::kRelu6 ? 6 : nn::ClampsAtZero(l.activation) ? 1 : 0;
  return d;
}

// The input index of tap (i, j) of pooling output (oh, ow), channel c.
TPU_HOST_DEVICE inline int64_t PoolTap(const LayerDesc& d, int oh, int ow, int i, int j, int c) {
  return ((int64_t{oh} * d.pool_stride + i) * d.in_w + int64_t{ow} * d.pool_stride + j) * d.in_c +
         c;
}

inline int64_t OutSize(const LayerDesc& d) { return int64_t{d.out_h} * d.out_w * d.out_c; }

// Weights reordered for the kernels: output channel major, so that the input channels a
// thread multiplies are contiguous (conv: [oc][kh][kw][ic]; dense: [oc][ic]).
template <typename T>
std::vector<T> OutputMajor(const nn::Layer& l, const std::vector<T>& w) {
  const int64_t k = static_cast<int64_t>(w.size()) / l.out.c;
  std::vector<T> t(w.size());
  for (int64_t i = 0; i < k; ++i)
    for (int oc = 0; oc < l.out.c; ++oc)
      t[static_cast<size_t>(oc * k + i)] = w[static_cast<size_t>(i * l.out.c + oc)];
  return t;
}

// Four int8 products summed into an int32: the device's dp4a instruction, or the same sum.
TPU_HOST_DEVICE inline int32_t Dot4(const int8_t* a, const int8_t* b, int32_t acc) {
#if defined(__CUDA_ARCH__)
  int32_t pa, pb;
  memcpy(&pa, a, 4);
  memcpy(&pb, b, 4);
  return __dp4a(pa, pb, acc);
#else
  return acc + a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3];
#endif
}

TPU_HOST_DEVICE inline int32_t DotInt8(const int8_t* a, const int8_t* b, int n, int32_t acc) {
  int i = 0;
  for (; i + 4 <= n; i += 4) acc = Dot4(a + i, b + i, acc);
  for (; i < n; ++i) acc += int32_t{a[i]} * b[i];
  return acc;
}

// Output `o` (h x w x c order) of a conv, dense or pooling layer for one image, int8.
// w: output-major weights; bias, multiplier, shift: per output channel.
TPU_HOST_DEVICE inline int8_t LayerOutInt8(const LayerDesc& d, const int8_t* x, const int8_t* w,
                                           const int32_t* bias, const int32_t* mult,
                                           const int32_t* shift, int64_t o) {
  const int oc = static_cast<int>(o % d.out_c);
  const int64_t pixel = o / d.out_c;
  const int oh = static_cast<int>(pixel / d.out_w), ow = static_cast<int>(pixel % d.out_w);
  const int32_t lo = d.relu ? 0 : -128;
  switch (static_cast<nn::LayerType>(d.type)) {
    case nn::LayerType::kConv2d: {
      int32_t acc = bias[oc];
      const int8_t* wo = w + static_cast<int64_t>(oc) * d.kernel_h * d.kernel_w * d.in_c;
      for (int kh = 0; kh < d.kernel_h; ++kh)
        for (int kw = 0; kw < d.kernel_w; ++kw) {
          const int ih = oh * d.stride + kh - d.pad_top, iw = ow * d.stride + kw - d.pad_left;
          if (ih < 0 || ih >= d.in_h || iw < 0 || iw >= d.in_w) continue;  // zero padding
          acc = DotInt8(x + (int64_t{ih} * d.in_w + iw) * d.in_c,
                        wo + (int64_t{kh} * d.kernel_w + kw) * d.in_c, d.in_c, acc);
        }
      return arith::Requantize(acc, mult[oc], shift[oc], lo);
    }
    case nn::LayerType::kDense:
      return arith::Requantize(DotInt8(x, w + int64_t{oc} * d.in_c, d.in_c, bias[oc]), mult[oc],
                               shift[oc], lo);
    case nn::LayerType::kAvgPool2d:
    case nn::LayerType::kMaxPool2d: {
      int32_t sum = 0, mx = -128;
      for (int i = 0; i < d.pool_h; ++i)
        for (int j = 0; j < d.pool_w; ++j) {
          const int8_t v = x[PoolTap(d, oh, ow, i, j, oc)];
          sum += v;
          mx = v > mx ? v : mx;
        }
      return d.type == static_cast<int>(nn::LayerType::kAvgPool2d)
                 ? arith::AveragePool(sum, d.pool_h * d.pool_w)
                 : static_cast<int8_t>(mx);
    }
    case nn::LayerType::kFlatten:
      return x[o];
    default:
      break;  // the rest Describe refuses: the GPU backends run chains only
  }
  return 0;
}

// The same in fp32 (weights and bias as trained; ReLU; softmax is left to the argmax).
TPU_HOST_DEVICE inline float LayerOutFp32(const LayerDesc& d, const float* x, const float* w,
                                          const float* bias, int64_t o) {
  const int oc = static_cast<int>(o % d.out_c);
  const int64_t pixel = o / d.out_c;
  const int oh = static_cast<int>(pixel / d.out_w), ow = static_cast<int>(pixel % d.out_w);
  switch (static_cast<nn::LayerType>(d.type)) {
    case nn::LayerType::kConv2d:
    case nn::LayerType::kDense: {
      float acc = bias[oc];
      const bool conv = d.type == static_cast<int>(nn::LayerType::kConv2d);
      const int kh_n = conv ? d.kernel_h : 1, kw_n = conv ? d.kernel_w : 1;
      const float* wo = w + static_cast<int64_t>(oc) * kh_n * kw_n * d.in_c;
      for (int kh = 0; kh < kh_n; ++kh)
        for (int kw = 0; kw < kw_n; ++kw) {
          const int ih = conv ? oh * d.stride + kh - d.pad_top : 0;
          const int iw = conv ? ow * d.stride + kw - d.pad_left : 0;
          if (ih < 0 || ih >= d.in_h || iw < 0 || iw >= d.in_w) continue;
          const float* xi = conv ? x + (int64_t{ih} * d.in_w + iw) * d.in_c : x;
          const float* wi = wo + (int64_t{kh} * kw_n + kw) * d.in_c;
          for (int ic = 0; ic < d.in_c; ++ic) acc += xi[ic] * wi[ic];
        }
      if (d.relu && acc < 0) return 0.0f;
      return d.relu == 6 && acc > 6.0f ? 6.0f : acc;
    }
    case nn::LayerType::kAvgPool2d:
    case nn::LayerType::kMaxPool2d: {
      float sum = 0, mx = -3.4e38f;
      for (int i = 0; i < d.pool_h; ++i)
        for (int j = 0; j < d.pool_w; ++j) {
          const float v = x[PoolTap(d, oh, ow, i, j, oc)];
          sum += v;
          mx = v > mx ? v : mx;
        }
      return d.type == static_cast<int>(nn::LayerType::kAvgPool2d) ? sum / (d.pool_h * d.pool_w)
                                                                   : mx;
    }
    case nn::LayerType::kFlatten:
      return x[o];
    default:
      break;  // as in LayerOutInt8
  }
  return 0;
}

}  // namespace tpu::cuda
