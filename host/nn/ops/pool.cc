// Average and max pooling (2-D windows, with padding; a global average over the whole map).
// Max pooling ignores the padding (-infinity); average pooling counts it as zeros (PyTorch's
// count_include_pad).
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "arith/bf16.h"
#include "arith/int8.h"
#include "host/common/errors.h"
#include "host/nn/ops/op.h"

namespace tpu::nn::ops {
namespace {

// The window (the whole map for a global one), padding and output map.
void Infer(const Model& /*m*/, const std::string& where, Layer* l_ptr) {
  Layer& l = *l_ptr;
  const Shape3 cur = l.in;
  if (l.padding != "explicit") l.pad_top = l.pad_left = l.pad_bottom = l.pad_right = 0;
  if (l.global_pool) {
    if (l.type != LayerType::kAvgPool2d) throw UsageError(where + ": global pooling averages");
    l.pool_h = cur.h;
    l.pool_w = cur.w;
    l.pool_stride = 1;
  }
  if (l.pool_h < 1 || l.pool_w < 1 || l.pool_stride < 1 || l.pool_h > 4096 || l.pool_w > 4096 ||
      l.pool_stride > 4096) {
    throw UsageError(where + ": pool size and stride must lie in 1..4096");
  }
  if (int64_t{l.pool_h} * l.pool_w > (1 << 20)) {
    throw UsageError(where + ": a pooling window may hold at most 2^20 values");
  }
  if (l.global_pool && l.Padded()) throw UsageError(where + ": global pooling has no padding");
  if (l.pad_top < 0 || l.pad_left < 0 || l.pad_bottom < 0 || l.pad_right < 0 ||
      l.pad_top >= l.pool_h || l.pad_bottom >= l.pool_h || l.pad_left >= l.pool_w ||
      l.pad_right >= l.pool_w) {
    throw UsageError(where + ": pooling padding must be smaller than the window");
  }
  if (l.pool_h > cur.h + l.pad_top + l.pad_bottom || l.pool_w > cur.w + l.pad_left + l.pad_right) {
    throw UsageError(where + ": a " + std::to_string(l.pool_h) + " x " + std::to_string(l.pool_w) +
                     " window does not fit a " + std::to_string(cur.h) + " x " +
                     std::to_string(cur.w) + " input");
  }
  l.out = {(cur.h + l.pad_top + l.pad_bottom - l.pool_h) / l.pool_stride + 1,
           (cur.w + l.pad_left + l.pad_right - l.pool_w) / l.pool_stride + 1, cur.c};
}

// The input index of tap (i, j) of output pixel (oh, ow), channel c, or -1 in the padding.
int64_t Tap(const Layer& l, int oh, int ow, int i, int j, int c) {
  const int64_t y = int64_t{oh} * l.pool_stride + i - l.pad_top;
  const int64_t x = int64_t{ow} * l.pool_stride + j - l.pad_left;
  if (y < 0 || y >= l.in.h || x < 0 || x >= l.in.w) return -1;
  return (y * l.in.w + x) * l.in.c + c;
}

void Forward(const Layer& l, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/, MatrixF* y) {
  const MatrixF& x = *xs[0];
  y->resize(x.rows(), l.out.Size());
  const bool avg = l.type == LayerType::kAvgPool2d;
  const float inv = 1.0f / static_cast<float>(l.pool_h * l.pool_w);
  for (int64_t b = 0; b < x.rows(); ++b) {
    const float* in = x.row(b).data();
    float* out = y->row(b).data();
    for (int oh = 0; oh < l.out.h; ++oh)
      for (int ow = 0; ow < l.out.w; ++ow)
        for (int c = 0; c < l.out.c; ++c) {
          float acc = avg ? 0.0f : -INFINITY;
          for (int i = 0; i < l.pool_h; ++i)
            for (int j = 0; j < l.pool_w; ++j) {
              const int64_t t = Tap(l, oh, ow, i, j, c);
              if (t < 0) continue;
              acc = avg ? acc + in[t] : std::max(acc, in[t]);
            }
          out[(int64_t{oh} * l.out.w + ow) * l.out.c + c] = avg ? acc * inv : acc;
        }
  }
}

// Average: each tap takes dy / window; max: the first maximum takes it all.
void Backward(const Layer& l, const BackwardStep& s) {
  if (s.dx[0] == nullptr) return;
  const bool avg = l.type == LayerType::kAvgPool2d;
  const float inv = 1.0f / static_cast<float>(l.pool_h * l.pool_w);
  MatrixF& dx = *s.dx[0];
  dx.resize(s.x().rows(), l.in.Size());
  dx.setZero();
  for (int64_t b = 0; b < s.x().rows(); ++b)
    for (int oh = 0; oh < l.out.h; ++oh)
      for (int ow = 0; ow < l.out.w; ++ow)
        for (int c = 0; c < l.out.c; ++c) {
          const int64_t o = (int64_t{oh} * l.out.w + ow) * l.out.c + c;
          bool routed = false;
          for (int i = 0; i < l.pool_h; ++i)
            for (int j = 0; j < l.pool_w; ++j) {
              const int64_t in = Tap(l, oh, ow, i, j, c);
              if (in < 0) continue;  // padding
              if (avg) {
                dx(b, in) += s.dy(b, o) * inv;
              } else if (!routed && s.x()(b, in) == s.y(b, o)) {
                dx(b, in) += s.dy(b, o);
                routed = true;
              }
            }
        }
}

// The int8 rule: the 2 x 2 average floor((sum + 2) / 4), or over other windows the sum
// times 1 / n (arith::AverageMultiplier); the maximum; the padding zeros in the average
// (which counts them), ignored by the maximum.
void Int8(const Layer& l, const std::vector<const int8_t*>& xs,
          const std::vector<int>& /*channels*/, int8_t* y) {
  const int8_t* x = xs[0];
  const bool avg = l.type == LayerType::kAvgPool2d;
  if (l.pool_h == 2 && l.pool_w == 2 && l.pool_stride == 2 && !l.Padded()) {  // LeNet's
    const int64_t row = int64_t{l.in.w} * l.in.c, c_n = l.in.c;
    for (int oh = 0; oh < l.out.h; ++oh)
      for (int ow = 0; ow < l.out.w; ++ow) {
        const int8_t* p = x + 2 * oh * row + 2 * ow * c_n;
        int8_t* o = y + (int64_t{oh} * l.out.w + ow) * c_n;
        for (int64_t c = 0; c < c_n; ++c) {
          const int8_t a = p[c], b = p[c + c_n], d = p[row + c], e = p[row + c_n + c];
          // floor((sum + 2) / 4), the 2 x 2 average (AveragePool with n = 4), exactly
          o[c] = avg ? static_cast<int8_t>((int32_t{a} + b + d + e + 2) >> 2)
                     : std::max(std::max(a, b), std::max(d, e));
        }
      }
    return;
  }
  uint32_t multiplier = 0, shift = 0;  // once per layer: arith::AverageMultiplier divides
  arith::AverageMultiplier(l.pool_h * l.pool_w, &multiplier, &shift);
  for (int oh = 0; oh < l.out.h; ++oh)
    for (int ow = 0; ow < l.out.w; ++ow)
      for (int c = 0; c < l.out.c; ++c) {
        // The padding: zeros in the average (which counts them), ignored by the maximum.
        int32_t sum = 0, mx = -128;
        for (int i = 0; i < l.pool_h; ++i)
          for (int j = 0; j < l.pool_w; ++j) {
            const int64_t ih = int64_t{oh} * l.pool_stride + i - l.pad_top;
            const int64_t iw = int64_t{ow} * l.pool_stride + j - l.pad_left;
            if (ih < 0 || ih >= l.in.h || iw < 0 || iw >= l.in.w) continue;
            const int8_t v = x[(ih * l.in.w + iw) * l.in.c + c];
            sum += v;
            mx = std::max<int32_t>(mx, v);
          }
        y[(size_t(oh) * l.out.w + ow) * l.out.c + c] =
            avg ? arith::Requantize(sum, multiplier, shift, -128) : static_cast<int8_t>(mx);
      }
}

// model.json: "size": n or [h, w] (a global pooling has none), "stride", "padding":
// [top, left, bottom, right].
void Read(const nlohmann::json& lj, const std::string& where, Layer* l) {
  if (l->global_pool) return;
  const nlohmann::json size = lj.value("size", nlohmann::json(2));
  if (size.is_array()) {
    const auto k = size.get<std::vector<int>>();
    if (k.size() != 2) throw UsageError(where + ": size must be n or [h, w]");
    l->pool_h = k[0];
    l->pool_w = k[1];
  } else {
    l->pool_h = l->pool_w = size.get<int>();
  }
  l->pool_stride = lj.value("stride", l->pool_h == l->pool_w ? l->pool_h : 1);
  if (l->pool_h != l->pool_w && !lj.contains("stride")) {
    throw UsageError(where + ": a " + std::to_string(l->pool_h) + " x " +
                     std::to_string(l->pool_w) + " window needs a 'stride'");
  }
  if (lj.contains("padding")) ReadExplicitPadding(lj["padding"], where, l);
}

void Write(const Layer& l, nlohmann::json* lj) {
  if (l.global_pool) return;
  if (l.pool_h == l.pool_w) {
    (*lj)["size"] = l.pool_h;
  } else {
    (*lj)["size"] = {l.pool_h, l.pool_w};
  }
  (*lj)["stride"] = l.pool_stride;
  if (l.Padded()) (*lj)["padding"] = {l.pad_top, l.pad_left, l.pad_bottom, l.pad_right};
}

// Padding came with version 2.
int Version(const Layer& l) { return l.Padded() ? 2 : 1; }

// An average pooling the chip does not fuse runs as a depthwise convolution whose weights
// are bfloat16(1 / (kh x kw)) (and zeros off the diagonal), no bias, no activation.
void Bf16Prepare(Bf16Layer* p) {
  const Layer& l = *p->layer;
  if (l.type != LayerType::kAvgPool2d || p->fused) return;
  Layer c = l;
  c.type = LayerType::kConv2d;
  c.depthwise = true;
  c.kernel_h = l.pool_h;
  c.kernel_w = l.pool_w;
  c.stride = l.pool_stride;
  c.activation = Activation::kNone;
  const int64_t ch = l.in.c, taps = int64_t{l.pool_h} * l.pool_w;
  c.weights.shape = {l.pool_h, l.pool_w, ch, ch};
  c.weights.data.assign(static_cast<size_t>(taps * ch * ch), 0.0f);
  for (int64_t t = 0; t < taps; ++t)
    for (int64_t k = 0; k < ch; ++k)
      c.weights.data[static_cast<size_t>((t * ch + k) * ch + k)] = 1.0f / static_cast<float>(taps);
  c.bias.shape = {ch};
  c.bias.data.assign(static_cast<size_t>(ch), 0.0f);
  p->conv = std::move(c);
  Bf16RoundWeights(p);
}

// A fused 2 x 2, stride 2 pooling of bf16 values (Bf16Pool: the maximum, or the float32
// sum in window order times 1/4).
Bf16Values FusedBf16(const Layer& l, const Bf16Values& x) {
  Bf16Values y(static_cast<size_t>(l.out.Size()));
  const bool avg = l.type == LayerType::kAvgPool2d;
  for (int oh = 0; oh < l.out.h; ++oh)
    for (int ow = 0; ow < l.out.w; ++ow)
      for (int c = 0; c < l.out.c; ++c) {
        uint16_t v[4];
        for (int q = 0; q < 4; ++q) v[q] = x[static_cast<size_t>(Tap(l, oh, ow, q / 2, q % 2, c))];
        y[static_cast<size_t>((int64_t{oh} * l.out.w + ow) * l.out.c + c)] =
            arith::Bf16Pool(v, avg);
      }
  return y;
}

// Max pooling not fused: each tap through the identity tile, the accumulators keeping the
// larger (Fp32Max); padding never wins.
Bf16Values MaxBf16(const Layer& l, const Bf16Values& x) {
  Bf16Values y(static_cast<size_t>(l.out.Size()));
  for (int oh = 0; oh < l.out.h; ++oh)
    for (int ow = 0; ow < l.out.w; ++ow)
      for (int c = 0; c < l.out.c; ++c) {
        std::optional<uint32_t> m;
        for (int i = 0; i < l.pool_h; ++i)
          for (int j = 0; j < l.pool_w; ++j) {
            const int64_t t = Tap(l, oh, ow, i, j, c);
            if (t < 0) continue;
            const uint32_t v = arith::Fp32OfBf16(Bf16ThroughArray(x[static_cast<size_t>(t)]));
            m = m ? arith::Fp32Max(*m, v) : v;
          }
        y[static_cast<size_t>((int64_t{oh} * l.out.w + ow) * l.out.c + c)] =
            arith::Bf16OfFp32(m.value_or(0));
      }
  return y;
}

// The bfloat16 rule (docs/bf16.md, "Networks"): fused into the convolution before it, a
// 2 x 2 pooling on its bf16 outputs; else an average as its convolution, a maximum through
// the array.
Bf16Values Bf16(const Bf16Layer& p, const std::vector<const Bf16Values*>& xs) {
  if (p.conv) return Bf16Multiplied(p, xs);
  if (p.fused) return FusedBf16(*p.layer, *xs[0]);
  return MaxBf16(*p.layer, *xs[0]);
}

// Average and max pooling: one definition, each rule reading which from the layer's type.
OpDef PoolDef(LayerType type, const char* name) {
  OpDef d;
  d.type = type;
  d.name = name;
  d.read = Read;
  d.write = Write;
  d.version = Version;
  d.infer = Infer;
  d.macs = NoMacs;
  d.forward = Forward;
  d.backward = Backward;
  d.int8 = Int8;
  d.quantize = KeepScale;
  d.bf16_prepare = Bf16Prepare;
  d.bf16 = Bf16;
  return d;
}

}  // namespace

const OpDef& AvgPool2dOp() {
  static const OpDef op = PoolDef(LayerType::kAvgPool2d, "avgpool2d");
  return op;
}

const OpDef& MaxPool2dOp() {
  static const OpDef op = PoolDef(LayerType::kMaxPool2d, "maxpool2d");
  return op;
}

}  // namespace tpu::nn::ops
