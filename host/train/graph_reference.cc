// See graph_reference.h.
#include "host/train/graph_reference.h"

#include <fmt/format.h>

#include <functional>

#include "arith/bf16.h"
#include "arith/fp32.h"
#include "arith/vector.h"
#include "host/common/errors.h"
#include "host/train/conv_reference.h"
#include "host/train/dense_model.h"
#include "host/train/dense_reference.h"
#include "host/train/step_arith.h"
#include "host/train/step_image.h"

namespace tpu::train {
// Its own namespace: the library's unity build puts this file beside the other references,
// whose helpers have the same names.
namespace graph_ref {
namespace {

using chip::Half;
using nn::Layer;
using nn::LayerType;

MapShape ShapeOf(const nn::Shape3& s, int batch) { return {batch, s.h, s.w, s.c}; }

// A layer's weights then its bias as rows of the array's tile, in bfloat16 (vector op=copy
// of the float32 master weights): in + 1 rows of `out` lanes.
Half TileRows(const Layer& l) {
  Half rows;
  for (float v : l.weights.data) rows.push_back(Bf16Of(v));
  for (float v : l.bias.data) rows.push_back(Bf16Of(v));
  return rows;
}

bool IsZero(uint16_t v) { return arith::Fp32Equal(arith::Fp32OfBf16(v), 0); }

const uint32_t kSix = arith::BitsOfFloat(6.0f);

// The activate's flags for layer l's activation: the ReLU, and ReLU6's bound.
bool Relu(const Layer& l) {
  return l.activation == nn::Activation::kRelu || l.activation == nn::Activation::kRelu6;
}
uint32_t UpperOf(const Layer& l) {
  return l.activation == nn::Activation::kRelu6 ? kSix : arith::kFp32Inf;
}

// Whether the activation of layer l passed an output value's gradient on: the ReLU's (the
// value not 0), ReLU6's (not 0 and not 6).
bool Passes(const Layer& l, uint16_t out) {
  return !IsZero(out) && (l.activation != nn::Activation::kRelu6 ||
                          !arith::Fp32Equal(arith::Fp32OfBf16(out), kSix));
}

// Where the activation gave 0 (or ReLU6 gave 6), the gradient is 0 (vector equal, then
// select, once for each).
Half Masked(const Layer& l, const Half& grad, const Half& out) {
  Half masked(grad.size());
  for (size_t i = 0; i < grad.size(); ++i) masked[i] = Passes(l, out[i]) ? grad[i] : 0;
  return masked;
}

// Rows of `cols` values with a last column of 1 (the bias lane): rows x (cols + 1).
Half WithOnes(const Half& x, int64_t rows, int64_t cols) {
  Half out;
  for (int64_t r = 0; r < rows; ++r) {
    out.insert(out.end(), x.begin() + r * cols, x.begin() + (r + 1) * cols);
    out.push_back(Bf16Of(1.0f));
  }
  return out;
}

WindowShape ConvWindowOf(const Layer& l) {
  WindowShape w;
  w.kh = l.kernel_h;
  w.kw = l.kernel_w;
  w.stride_y = w.stride_x = l.stride;
  w.pad_top = l.pad_top;
  w.pad_left = l.pad_left;
  w.out_h = l.out.h;
  w.out_w = l.out.w;
  return w;
}

// An average pooling's tile: kh kw identities times 1/(kh kw) rounded to bfloat16, one a tap
// of its window (a global one's: the whole map's): row t c + ch, lane ch.
Half MeanTile(const Layer& l) {
  const int64_t taps = int64_t{l.pool_h} * l.pool_w, c = l.in.c;
  const uint16_t inv = Bf16Of(1.0f / static_cast<float>(taps));
  Half tile(static_cast<size_t>(taps * c * c), 0);
  for (int64_t t = 0; t < taps; ++t)
    for (int64_t ch = 0; ch < c; ++ch) tile[static_cast<size_t>((t * c + ch) * c + ch)] = inv;
  return tile;
}

// The window of an average pooling (a global one's: the whole map, one output pixel) and of
// its gradient: a window over the pooled map padded by the kernel's side less 1 less the
// padding, read dilated for stride 2, through the same tile (its taps are alike), out to the
// whole map: a pixel no window read takes +0, from a window of padding alone.
WindowShape MeanWindow(const Layer& l, bool gradient) {
  WindowShape w;
  w.kh = l.pool_h;
  w.kw = l.pool_w;
  if (gradient) {
    w.pad_top = l.pool_h - 1 - l.pad_top;
    w.pad_left = l.pool_w - 1 - l.pad_left;
    w.dilated = !l.global_pool && l.pool_stride == 2;
    w.out_h = l.in.h;
    w.out_w = l.in.w;
    return w;
  }
  w.stride_y = w.stride_x = l.global_pool ? 1 : l.pool_stride;
  w.pad_top = l.pad_top;
  w.pad_left = l.pad_left;
  w.out_h = l.out.h;
  w.out_w = l.out.w;
  return w;
}

// The array's product of a window's rows and a tile of `cols` lanes, rounded.
Half WindowProduct(const Half& maps, const MapShape& m, const WindowShape& w, const Half& tile,
                   int64_t cols, int n) {
  const Half rows = WindowRows(maps, m, w);
  const int64_t k = w.Lanes(m.c);
  return chip::Activate(
      chip::Product(rows, tile, static_cast<int64_t>(rows.size()) / k, k, cols, n), false);
}

// A max pooling's window (`gradient` false: the padding reads the most negative bfloat16,
// which never wins) and its gradient's: a window over the pooled map padded by the kernel's
// side less 1 less the padding, read dilated for stride 2, whose tap T - 1 - t meets, for
// each input pixel, the pooled pixel whose window's tap t it is (T taps).
WindowShape MaxWindow(const Layer& l, bool gradient) {
  WindowShape w;
  w.kh = l.pool_h;
  w.kw = l.pool_w;
  if (gradient) {
    w.pad_top = l.pool_h - 1 - l.pad_top;
    w.pad_left = l.pool_w - 1 - l.pad_left;
    w.dilated = l.pool_stride == 2;
    w.out_h = l.in.h;
    w.out_w = l.in.w;
    return w;
  }
  w.stride_y = w.stride_x = l.pool_stride;
  w.pad_top = l.pad_top;
  w.pad_left = l.pad_left;
  w.out_h = l.out.h;
  w.out_w = l.out.w;
  w.pad_min = true;
  return w;
}

// Tap t's values through the array (each through the identity, a `matmul window` of K-tile
// t): `rows`, a window's rows (WindowRows) of `taps` taps of c lanes each; float32 sums.
chip::Bits TapProduct(const Half& rows, int64_t taps, int64_t c, int64_t t, int n) {
  const int64_t pixels = static_cast<int64_t>(rows.size()) / (taps * c);
  Half lanes;
  for (int64_t p = 0; p < pixels; ++p) {
    const auto from = rows.begin() + (p * taps + t) * c;
    lanes.insert(lanes.end(), from, from + c);
  }
  Half id(static_cast<size_t>(c * c), 0);
  for (int64_t ch = 0; ch < c; ++ch) id[static_cast<size_t>(ch * c + ch)] = Bf16Of(1.0f);
  return chip::Product(lanes, id, pixels, c, c, n);
}

// A max pooling: tap after tap through the identity, the accumulators keeping the larger
// (`matmul max`: Fp32Max), rounded; each tap's values, rounded, after one another into *taps.
Half MaxPool(const Layer& l, const Half& in, int batch, int n, Half* taps) {
  const int64_t count = int64_t{l.pool_h} * l.pool_w;
  chip::Bits acc;
  taps->clear();
  const Half rows = WindowRows(in, ShapeOf(l.in, batch), MaxWindow(l, false));
  for (int64_t t = 0; t < count; ++t) {
    const chip::Bits p = TapProduct(rows, count, l.in.c, t, n);
    const Half rounded = chip::Activate(p, false);
    taps->insert(taps->end(), rounded.begin(), rounded.end());
    if (t == 0) {
      acc = p;
      continue;
    }
    for (size_t j = 0; j < acc.size(); ++j) acc[j] = arith::Fp32Max(acc[j], p[j]);
  }
  return chip::Activate(acc, Relu(l), UpperOf(l));
}

// A map of more than N channels in channel blocks of N (docs/training.md, "Channel blocks"):
// the chip pools each block by itself, and so does the reference. Block j of x (c channels a
// pixel): channels [j n, (j + 1) n) of each pixel.
Half BlockOf(const Half& x, int64_t c, int64_t j, int n) {
  if (c <= n) return x;
  Half b;
  for (size_t p = 0; p < x.size() / static_cast<size_t>(c); ++p) {
    const auto from = x.begin() + static_cast<int64_t>(p) * c + j * n;
    b.insert(b.end(), from, from + n);
  }
  return b;
}
// Block j's values (n channels a pixel) into *x's pixels (c channels a pixel).
template <typename T>
void PutBlock(const std::vector<T>& b, int64_t c, int64_t j, int n, std::vector<T>* x) {
  for (size_t i = 0; i < b.size(); ++i) {
    const size_t p = i / static_cast<size_t>(n), ch = i % static_cast<size_t>(n);
    (*x)[p * static_cast<size_t>(c) + static_cast<size_t>(j * n) + ch] = b[i];
  }
}
// A pooling `l` as it pools one block: its maps' channels the block's.
Layer BlockLayer(const Layer& l, int n) {
  Layer b = l;
  b.in.c = b.out.c = std::min(l.in.c, n);
  return b;
}
int64_t Blocks(const Layer& l, int n) { return (l.in.c + n - 1) / n; }

// pool(b, block j of x) for each channel block of pooling l, the results merged into maps of
// l.out.c channels a pixel.
Half ByBlocks(const Layer& l, const Half& x, int n,
              const std::function<Half(const Layer&, const Half&, int64_t)>& pool) {
  if (l.in.c <= n) return pool(l, x, 0);  // one block
  const Layer b = BlockLayer(l, n);
  Half y;
  for (int64_t j = 0; j < Blocks(l, n); ++j) {
    const Half yj = pool(b, BlockOf(x, l.in.c, j, n), j);
    if (j == 0) y.resize(yj.size() / static_cast<size_t>(n) * static_cast<size_t>(l.out.c));
    PutBlock(yj, l.out.c, j, n, &y);
  }
  return y;
}

// A vector-unit operation on bfloat16 operands, its float32 result rounded.
uint16_t VectorOf(uint32_t (*op)(uint32_t, uint32_t), uint16_t a, uint16_t b) {
  return arith::Bf16OfFp32(op(arith::Fp32OfBf16(a), arith::Fp32OfBf16(b)));
}

// A max pooling's gradient: the first tap whose value equals the maximum takes the pixel's
// gradient (vector equal, a select of +0 where an earlier tap took it, max into the taken
// mask, mul into the gradient's share D_t), and each tap's shares go back to the pixels they
// came from through the gradient's window (K-tile T - 1 - t), added in the accumulators
// tap after tap, rounded once.
// The tap that took each value's gradient into *chosen.
Half MaxPoolBackward(const Layer& l, const Half& dy, const Half& y, const Half& taps, int batch,
                     int n, std::vector<int32_t>* chosen) {
  const int64_t count = int64_t{l.pool_h} * l.pool_w;
  const size_t size = y.size();
  Half taken(size);
  chosen->assign(size, -1);
  chip::Bits acc;
  for (int64_t t = 0; t < count; ++t) {
    Half e(size), d(size);
    for (size_t j = 0; j < size; ++j) {
      e[j] = VectorOf(arith::Fp32Equal, taps[static_cast<size_t>(t) * size + j], y[j]);
      if (t > 0) {
        e[j] = arith::Bf16OfFp32(
            arith::Fp32Select(arith::Fp32OfBf16(taken[j]), 0, arith::Fp32OfBf16(e[j])));
      }
      taken[j] = t == 0 ? e[j] : VectorOf(arith::Fp32Max, taken[j], e[j]);
      d[j] = VectorOf(arith::Fp32Mul, dy[j], e[j]);
      if (!IsZero(e[j])) (*chosen)[j] = static_cast<int32_t>(t);
    }
    const chip::Bits p = TapProduct(WindowRows(d, ShapeOf(l.out, batch), MaxWindow(l, true)), count,
                                    l.out.c, count - 1 - t, n);
    if (t == 0) {
      acc = p;
      continue;
    }
    for (size_t j = 0; j < acc.size(); ++j) acc[j] = arith::Fp32Add(acc[j], p[j]);
  }
  return chip::Activate(acc, false);
}

// A global pooling's gradient where PoolGradientIsCopied: each image's pooled gradient (a
// row of the block's n channels in dz) through one tap's tile, rounded, copied to every pixel
// of its map.
Half CopiedPoolGradient(const Layer& b, const Half& dz, int n) {
  const uint16_t inv = Bf16Of(1.0f / static_cast<float>(int64_t{b.pool_h} * b.pool_w));
  Half tile(static_cast<size_t>(n) * n, 0);
  for (int ch = 0; ch < n; ++ch) tile[static_cast<size_t>(ch) * n + ch] = inv;
  const int64_t images = static_cast<int64_t>(dz.size()) / n, pixels = int64_t{b.in.h} * b.in.w;
  const Half g = chip::Activate(chip::Product(dz, tile, images, n, n, n), false);
  Half out;
  for (int64_t t = 0; t < images; ++t)
    for (int64_t p = 0; p < pixels; ++p)
      out.insert(out.end(), g.begin() + t * n, g.begin() + (t + 1) * n);
  return out;
}

// An average pooling of each channel block.
Half AvgPoolBlocks(const Layer& l, const Half& in, int batch, int n) {
  return ByBlocks(l, in, n, [&](const Layer& b, const Half& x_b, int64_t) {
    return WindowProduct(x_b, ShapeOf(b.in, batch), MeanWindow(b, false), MeanTile(b), b.in.c, n);
  });
}

// MaxPool of each channel block, each block's taps after the one before's into *taps.
Half MaxPoolBlocks(const Layer& l, const Half& in, int batch, int n, Half* taps) {
  taps->clear();
  return ByBlocks(l, in, n, [&](const Layer& b, const Half& x_b, int64_t) {
    Half taps_b;
    Half y = MaxPool(b, x_b, batch, n, &taps_b);
    taps->insert(taps->end(), taps_b.begin(), taps_b.end());
    return y;
  });
}

// MaxPoolBackward of each channel block (MaxPool's taps, block after block), the taps that
// took each value's gradient into *chosen.
Half MaxPoolBlocksBackward(const Layer& l, const Half& dy, const Half& y, const Half& taps,
                           int batch, int n, std::vector<int32_t>* chosen) {
  chosen->assign(y.size(), -1);
  const size_t per = taps.size() / static_cast<size_t>(Blocks(l, n));
  return ByBlocks(l, dy, n, [&](const Layer& b, const Half& dy_b, int64_t j) {
    const Half taps_b(taps.begin() + static_cast<int64_t>(per) * j,
                      taps.begin() + static_cast<int64_t>(per) * (j + 1));
    std::vector<int32_t> chosen_b;
    Half dx = MaxPoolBackward(b, dy_b, BlockOf(y, l.out.c, j, n), taps_b, batch, n, &chosen_b);
    if (l.out.c <= n) *chosen = chosen_b;
    if (l.out.c > n) PutBlock(chosen_b, l.out.c, j, n, chosen);
    return dx;
  });
}

// Layer l's activation of a bfloat16 value on the vector unit: the larger of it and +0
// (vector max: a -0 becomes +0, NaN stays NaN), then for ReLU6 the smaller of that and 6
// (vector min); none, the value.
uint16_t VectorRelu(uint16_t v, const Layer& l) {
  if (!Relu(l)) return v;
  const uint16_t y = arith::Bf16OfFp32(arith::Fp32Max(arith::Fp32OfBf16(v), 0));
  return UpperOf(l) == kSix ? arith::Bf16OfFp32(arith::Fp32Min(arith::Fp32OfBf16(y), kSix)) : y;
}

// relu(a + b) as the vector unit computes it: the float32 sum rounded to bfloat16 (vector
// add), then VectorRelu.
uint16_t AddRelu(uint16_t a, uint16_t b, const Layer& l) {
  return VectorRelu(chip::CoreSum(a, b), l);
}

// Batch normalization on the vector unit (docs/training.md, "Batch normalization on the
// chip"): every operation float32, on bfloat16 operands read exactly, its result rounded to
// bfloat16 where it is written so.
using chip::Bits;
uint32_t Vec(hw::VectorOp op, uint32_t a, uint32_t b) { return arith::VectorLane(op, a, b, 0); }
Bits Wide(const Half& h) {
  Bits w(h.size());
  for (size_t i = 0; i < h.size(); ++i) w[i] = arith::Fp32OfBf16(h[i]);
  return w;
}
uint32_t Const(const std::vector<float>& k, int i) {
  return arith::BitsOfFloat(k[static_cast<size_t>(i)]);
}
// v times a constant, lane by lane.
Bits Times(Bits v, uint32_t k) {
  for (uint32_t& x : v) x = Vec(hw::VectorOp::kMul, x, k);
  return v;
}

// A batch normalization's statistics of a batch: each channel's mean, biased variance and
// 1 / sqrt(variance + epsilon).
struct BnStats {
  Bits mean, var, inv;
};

// y = gamma x^ + beta (then the activation), x^ = (x - mean) inv rounded to bfloat16 into
// *xhat, over `rows` rows of the layer's channels.
Half BatchNormForward(const Layer& l, const Half& x, int64_t rows, Half* xhat, BnStats* st) {
  using hw::VectorOp;
  const int64_t c = l.out.c;
  const std::vector<float> k = chip::BatchNormConstants(l.epsilon, l.momentum, rows);
  const Bits x32 = Wide(x);
  st->mean = Times(chip::RowSum(x32, rows, c), Const(k, chip::kBnInvM));
  Bits d(x32.size());
  for (size_t i = 0; i < d.size(); ++i) {
    const uint32_t v = Vec(VectorOp::kSub, x32[i], st->mean[i % static_cast<size_t>(c)]);
    d[i] = Vec(VectorOp::kMul, v, v);
  }
  st->var = Times(chip::RowSum(d, rows, c), Const(k, chip::kBnInvM));
  st->inv.clear();
  for (uint32_t v : st->var)
    st->inv.push_back(Vec(VectorOp::kRsqrt, Vec(VectorOp::kAdd, v, Const(k, chip::kBnEps)), 0));
  xhat->resize(x.size());
  Half y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t ch = i % static_cast<size_t>(c);
    (*xhat)[i] = arith::Bf16OfFp32(
        Vec(VectorOp::kMul, Vec(VectorOp::kSub, x32[i], st->mean[ch]), st->inv[ch]));
    const uint32_t t =
        Vec(VectorOp::kMul, arith::Fp32OfBf16((*xhat)[i]), arith::BitsOfFloat(l.weights.data[ch]));
    y[i] = VectorRelu(
        arith::Bf16OfFp32(Vec(VectorOp::kAdd, t, arith::BitsOfFloat(l.bias.data[ch]))), l);
  }
  return y;
}

// A batch normalization's backward pass from dy (its activation's mask applied): dgamma =
// sum dy x^ and dbeta = sum dy (float32 sums, rounded) into *gw and *gb; its input's gradient
// dx = gamma inv (dy - (dbeta / m + x^ dgamma / m)) returned (none without `input`).
Half BatchNormBackward(const Layer& l, const Half& dy, const Half& xhat, const BnStats& st,
                       int64_t rows, bool input, std::vector<float>* gw, std::vector<float>* gb) {
  using hw::VectorOp;
  const int64_t c = l.out.c;
  const std::vector<float> k = chip::BatchNormConstants(l.epsilon, l.momentum, rows);
  const Bits dy32 = Wide(dy), xh32 = Wide(xhat);
  const Bits b = chip::RowSum(dy32, rows, c);
  Bits p(dy32.size());
  for (size_t i = 0; i < p.size(); ++i) p[i] = Vec(VectorOp::kMul, dy32[i], xh32[i]);
  const Bits g = chip::RowSum(p, rows, c);
  gw->clear();
  gb->clear();
  for (int64_t ch = 0; ch < c; ++ch) {
    gw->push_back(FloatOfBf16Bits(arith::Bf16OfFp32(g[static_cast<size_t>(ch)])));
    gb->push_back(FloatOfBf16Bits(arith::Bf16OfFp32(b[static_cast<size_t>(ch)])));
  }
  if (!input) return {};
  const Bits bm = Times(b, Const(k, chip::kBnInvM)), gm = Times(g, Const(k, chip::kBnInvM));
  Half dx(dy.size());
  for (size_t i = 0; i < dx.size(); ++i) {
    const size_t ch = i % static_cast<size_t>(c);
    const uint32_t kg = Vec(VectorOp::kMul, arith::BitsOfFloat(l.weights.data[ch]), st.inv[ch]);
    uint32_t t = Vec(VectorOp::kMul, xh32[i], gm[ch]);
    t = Vec(VectorOp::kAdd, t, bm[ch]);
    t = Vec(VectorOp::kSub, dy32[i], t);
    dx[i] = arith::Bf16OfFp32(Vec(VectorOp::kMul, t, kg));
  }
  return dx;
}

// Each pixel's channels of the inputs, one after the other, each through the array (a
// product with an identity shifted to its channels' lanes).
Half Concatenated(const std::vector<const Half*>& xs, const std::vector<int>& channels,
                  int64_t pixels) {
  Half y;
  for (int64_t p = 0; p < pixels; ++p)
    for (size_t k = 0; k < xs.size(); ++k)
      for (int64_t c = 0; c < channels[k]; ++c)
        y.push_back(ThroughArray((*xs[k])[static_cast<size_t>(p * channels[k] + c)]));
  return y;
}

// The step's forward values: each layer's output (after its activation) and what its
// backward pass needs (a convolution's receptive fields F, a dense layer's input with the
// bias column).
struct Forward {
  std::vector<Half> out, kept;  // a batch normalization's kept: x^
  std::vector<BnStats> bn;
  const Half& Of(int input, const Half& x) const {
    return input == nn::kModelInput ? x : out[static_cast<size_t>(input)];
  }
};

// Layer i's output from its inputs' values (x: the model's input).
Half LayerForward(const nn::Model& m, size_t i, const Half& x, int batch, int n, Forward* f) {
  const Layer& l = m.layers[i];
  const Half& in = f->Of(l.inputs[0], x);
  const bool relu = Relu(l);
  const MapShape s = ShapeOf(l.in, batch);
  switch (l.type) {
    case LayerType::kConv2d: {
      f->kept[i] = ReceptiveFields(in, s, ConvWindowOf(l));
      const int64_t pixels = int64_t{batch} * l.out.h * l.out.w;
      const int64_t k = ConvWindowOf(l).Lanes(l.in.c) + 1;
      return chip::Activate(chip::Product(f->kept[i], TileRows(l), pixels, k, l.out.c, n), relu,
                            UpperOf(l));
    }
    case LayerType::kDense:
      f->kept[i] = WithOnes(in, batch, l.in.Size());
      return chip::Activate(
          chip::Product(f->kept[i], TileRows(l), batch, l.in.Size() + 1, l.out.c, n), relu,
          UpperOf(l));
    case LayerType::kAvgPool2d:
      return AvgPoolBlocks(l, in, batch, n);
    case LayerType::kMaxPool2d:
      return MaxPoolBlocks(l, in, batch, n, &f->kept[i]);
    case LayerType::kAdd: {
      const Half& b = f->Of(l.inputs[1], x);
      Half y(in.size());
      for (size_t j = 0; j < y.size(); ++j) y[j] = AddRelu(in[j], b[j], l);
      return y;
    }
    case LayerType::kConcat: {
      std::vector<const Half*> xs;
      std::vector<int> channels;
      for (int k : l.inputs) {
        xs.push_back(&f->Of(k, x));
        channels.push_back(m.OutputOf(k).c);
      }
      return Concatenated(xs, channels, int64_t{batch} * l.out.h * l.out.w);
    }
    case LayerType::kBatchNorm:
      return BatchNormForward(l, in, int64_t{batch} * l.out.h * l.out.w, &f->kept[i], &f->bn[i]);
    default:  // a flatten: the same values in the same order
      return in;
  }
}

// The gradients by each layer's output (grads[i]), summed as they arrive.
struct Backward {
  std::vector<Half> grads;
  // Adds `g` into the gradient of what `input` produced (none for the model's input).
  void Add(int input, Half g) {
    if (input == nn::kModelInput) return;
    Half& sum = grads[static_cast<size_t>(input)];
    if (sum.empty()) {
      sum = std::move(g);
      return;
    }
    for (size_t j = 0; j < sum.size(); ++j) sum[j] = chip::CoreSum(sum[j], g[j]);
  }
};

// A weighted layer's gradient (from dWᵀ, outs x (ins + 1)) into its layout: rows of `ins`
// then the bias.
void PutGradient(const Half& gt, int64_t ins, int64_t outs, std::vector<float>* w,
                 std::vector<float>* b) {
  w->assign(static_cast<size_t>(ins * outs), 0);
  b->assign(static_cast<size_t>(outs), 0);
  for (int64_t o = 0; o < outs; ++o) {
    for (int64_t k = 0; k < ins; ++k)
      (*w)[static_cast<size_t>(k * outs + o)] =
          FloatOfBf16Bits(gt[static_cast<size_t>(o * (ins + 1) + k)]);
    (*b)[static_cast<size_t>(o)] = FloatOfBf16Bits(gt[static_cast<size_t>(o * (ins + 1) + ins)]);
  }
}

// Wᵀ without the bias row: what the transposed load of a dense layer's tile gives.
Half DenseInputTile(const Layer& l) {
  const Half w = TileRows(l);
  const int64_t ins = l.in.Size(), outs = l.out.c;
  Half wt(static_cast<size_t>(outs * ins));
  for (int64_t r = 0; r < ins; ++r)
    for (int64_t o = 0; o < outs; ++o)
      wt[static_cast<size_t>(o * ins + r)] = w[static_cast<size_t>(r * outs + o)];
  return wt;
}

// A weighted layer's backward pass from dz (its activation's mask applied): its gradient
// into g, its input's gradient returned (empty where its input is the model's).
Half WeightedBackward(const Layer& l, const Half& dz, const Half& kept, int batch, int n,
                      std::vector<float>* gw, std::vector<float>* gb) {
  const bool dense = l.type == LayerType::kDense;
  const int64_t rows = dense ? batch : int64_t{batch} * l.out.h * l.out.w, outs = l.out.c;
  const int64_t ins = dense ? l.in.Size() : ConvWindowOf(l).Lanes(l.in.c);
  PutGradient(WeightGradientT(dz, kept, rows, static_cast<int>(outs), static_cast<int>(ins + 1), n),
              ins, outs, gw, gb);
  if (l.depthwise)  // the expanded kernels' zeros take none (vector select of +0)
    for (int64_t k = 0; k < ins; ++k)
      for (int64_t o = 0; o < outs; ++o)
        if (k % l.in.c != o) (*gw)[static_cast<size_t>(k * outs + o)] = 0;

  if (l.inputs[0] == nn::kModelInput) return {};
  if (dense)
    return chip::Activate(chip::Product(dz, DenseInputTile(l), batch, outs, ins, n), false);
  Half w = TileRows(l);
  w.resize(static_cast<size_t>(ins * outs));  // the weights without the bias row
  return ConvInputGradient(dz, ShapeOf(l.out, batch), w, ConvWindowOf(l), l.in.h, l.in.w, l.in.c,
                           n);
}

// Layer i's backward pass from the gradient of its output: its inputs' gradients added in.
void LayerBackward(const nn::Model& m, size_t i, const Forward& f, int batch, int n, Backward* bw,
                   ConvNetGradients* g) {
  const Layer& l = m.layers[i];
  Half dz = std::move(bw->grads[i]);
  if (dz.empty()) return;  // nothing reads it
  if (Relu(l)) dz = Masked(l, dz, f.out[i]);
  switch (l.type) {
    case LayerType::kConv2d:
    case LayerType::kDense:
      return bw->Add(l.inputs[0], WeightedBackward(l, dz, f.kept[i], batch, n, &g->w[i], &g->b[i]));
    case LayerType::kAvgPool2d:
      return bw->Add(l.inputs[0],
                     ByBlocks(l, dz, n, [&](const Layer& b, const Half& dz_b, int64_t) {
                       if (PoolGradientIsCopied(l, n)) return CopiedPoolGradient(b, dz_b, n);
                       return WindowProduct(dz_b, ShapeOf(b.out, batch), MeanWindow(b, true),
                                            MeanTile(b), b.in.c, n);
                     }));
    case LayerType::kMaxPool2d:
      return bw->Add(l.inputs[0],
                     MaxPoolBlocksBackward(l, dz, f.out[i], f.kept[i], batch, n, &g->max_tap[i]));
    case LayerType::kAdd:
      bw->Add(l.inputs[0], dz);
      return bw->Add(l.inputs[1], std::move(dz));
    case LayerType::kBatchNorm:
      return bw->Add(l.inputs[0], BatchNormBackward(
                                      l, dz, f.kept[i], f.bn[i], int64_t{batch} * l.out.h * l.out.w,
                                      l.inputs[0] != nn::kModelInput, &g->w[i], &g->b[i]));
    case LayerType::kConcat: {
      const int64_t pixels = int64_t{batch} * l.out.h * l.out.w;
      int64_t c0 = 0;
      for (int k : l.inputs) {
        const int64_t c = m.OutputOf(k).c;
        Half part;
        for (int64_t p = 0; p < pixels; ++p)
          for (int64_t ch = c0; ch < c0 + c; ++ch)
            part.push_back(ThroughArray(dz[static_cast<size_t>(p * l.out.c + ch)]));
        bw->Add(k, std::move(part));
        c0 += c;
      }
      return;
    }
    default:
      return bw->Add(l.inputs[0], std::move(dz));
  }
}

// The losses, their mean and the logits into g; dL/dlogits returned (1 / total each).
Half Loss(const Half& logits, const uint8_t* labels, int batch, int classes, int total, int n,
          ConvNetGradients* g) {
  Half dz(static_cast<size_t>(batch) * classes);
  const uint32_t inv_batch = arith::BitsOfFloat(InverseBatch(total));
  uint32_t sum = 0;
  for (int i = 0; i < batch; ++i) {
    const uint32_t loss =
        chip::SoftmaxRow(&logits[static_cast<size_t>(i) * classes], classes, labels[i], n,
                         inv_batch, &dz[static_cast<size_t>(i) * classes]);
    g->loss.push_back(arith::FloatOfBits(loss));
    sum = i == 0 ? loss : arith::Fp32Add(sum, loss);  // row_sum: row after row
  }
  g->mean = arith::FloatOfBits(arith::Fp32Mul(sum, inv_batch));
  for (uint16_t v : logits) g->logits.push_back(FloatOfBf16Bits(v));
  return dz;
}

// Why layer l is not one the graph training takes ("" where it is).
std::string Unsupported(const nn::Model& m, size_t i) {
  const Layer& l = m.layers[i];
  const bool last = i + 1 == m.layers.size();
  if (last != (l.activation == nn::Activation::kSoftmax))
    return last ? "the last layer is a dense layer with softmax"
                : "only the last layer has softmax";
  if (last && l.type != LayerType::kDense) return "the last layer is a dense layer with softmax";
  switch (l.type) {
    case LayerType::kConv2d:
      if (l.stride > 2) return "a convolution's stride is 1 or 2";
      if (l.pad_top >= l.kernel_h || l.pad_left >= l.kernel_w)
        return "a convolution's padding is less than its kernel";
      return "";
    case LayerType::kAvgPool2d:
      if (l.global_pool || (l.pool_stride <= 2 && l.pad_top < l.pool_h && l.pad_left < l.pool_w))
        return "";
      return "average pooling's stride is 1 or 2 and its padding less than its window, or it "
             "is global";
    case LayerType::kMaxPool2d:
      if (l.global_pool || l.pool_stride > 2 || l.pad_top >= l.pool_h || l.pad_left >= l.pool_w)
        return "max pooling's stride is 1 or 2 and its padding less than its window";
      return "";
    case LayerType::kDense:
    case LayerType::kAdd:
    case LayerType::kConcat:
    case LayerType::kFlatten:
      return "";
    case LayerType::kBatchNorm:
      return "";
    default:
      return "the chip's training takes conv2d, batch_norm, average and max pooling, add, "
             "concat, flatten and dense layers";
  }
}

}  // namespace
}  // namespace graph_ref

using graph_ref::Half;

bool PoolGradientIsCopied(const nn::Layer& l, int n) {
  return l.type == nn::LayerType::kAvgPool2d && l.global_pool && l.in.c % n == 0 && l.in.h <= 15 &&
         l.in.w <= 15;
}

void CheckGraphTrainable(const nn::Model& m) {
  if (m.layers.empty()) throw UsageError("model '" + m.name + "' has no layers");
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const std::string why = graph_ref::Unsupported(m, i);
    if (!why.empty()) {
      throw UsageError(
          fmt::format("layer '{}' ({}) of model '{}': {} (docs/training.md, \"Graphs\")",
                      m.layers[i].name, m.layers[i].TypeName(), m.name, why));
    }
  }
}

ConvNetGradients ReferenceGraphGradients(const nn::Model& m, const Batch& batch_in, int batch,
                                         int n, int total) {
  CheckGraphTrainable(m);
  const size_t layers = m.layers.size();
  Half x(static_cast<size_t>(int64_t{batch} * m.input.Size()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = Bf16Of(batch_in.x[i]);
  graph_ref::Forward f;
  f.out.resize(layers);
  f.kept.resize(layers);
  f.bn.resize(layers);
  ConvNetGradients g;
  g.w.resize(layers);
  g.b.resize(layers);
  g.relu_on.resize(layers);
  g.max_tap.resize(layers);
  g.bn_mean.resize(layers);
  g.bn_var.resize(layers);
  for (size_t i = 0; i < layers; ++i) {
    f.out[i] = graph_ref::LayerForward(m, i, x, batch, n, &f);
    g.bn_mean[i] = f.bn[i].mean;
    g.bn_var[i] = f.bn[i].var;
    const nn::Layer& l = m.layers[i];
    if (!graph_ref::Relu(l)) continue;
    for (uint16_t v : f.out[i])  // ReLU6's 6: 2
      g.relu_on[i].push_back(graph_ref::Passes(l, v) ? 1 : graph_ref::IsZero(v) ? 0 : 2);
  }
  graph_ref::Backward bw;
  bw.grads.resize(layers);
  bw.grads.back() = graph_ref::Loss(f.out.back(), batch_in.labels.data(), batch,
                                    m.layers.back().out.c, total > 0 ? total : batch, n, &g);
  for (size_t i = layers; i-- > 0;) graph_ref::LayerBackward(m, i, f, batch, n, &bw, &g);
  return g;
}

namespace graph_ref {
namespace {

// g's gradients added into sum's (chip::CoreSum), its ReLU patterns and max poolings' choices
// after sum's.
void AddGradients(ConvNetGradients* sum, const ConvNetGradients& g) {
  for (size_t l = 0; l < g.w.size(); ++l) {
    for (auto [t, u] : {std::pair{&sum->w[l], &g.w[l]}, std::pair{&sum->b[l], &g.b[l]}})
      for (size_t i = 0; i < t->size(); ++i)
        (*t)[i] = FloatOfBf16Bits(chip::CoreSum(Bf16Of((*t)[i]), Bf16Of((*u)[i])));
    sum->relu_on[l].insert(sum->relu_on[l].end(), g.relu_on[l].begin(), g.relu_on[l].end());
    sum->max_tap[l].insert(sum->max_tap[l].end(), g.max_tap[l].begin(), g.max_tap[l].end());
  }
}

// One core's gradients of its `share` images of b from image `first`, in `passes` passes;
// its mean loss over them all (row_sum, then times 1 / batch).
ConvNetGradients ShareGradients(const nn::Model& model, const Batch& b, int64_t first, int share,
                                int batch, int n, int passes) {
  const int part = share / passes;
  ConvNetGradients sum;
  for (int u = 0; u < passes; ++u) {
    ConvNetGradients g =
        ReferenceGraphGradients(model, b.Share(first + int64_t{u} * part, part), part, n, batch);
    if (u == 0) {
      sum = std::move(g);
      continue;
    }
    AddGradients(&sum, g);
    sum.loss.insert(sum.loss.end(), g.loss.begin(), g.loss.end());
    sum.logits.insert(sum.logits.end(), g.logits.begin(), g.logits.end());
  }
  if (passes == 1) return sum;
  uint32_t total = 0;
  for (size_t i = 0; i < sum.loss.size(); ++i) {
    const uint32_t loss = arith::BitsOfFloat(sum.loss[i]);
    total = i == 0 ? loss : arith::Fp32Add(total, loss);
  }
  sum.mean = arith::FloatOfBits(arith::Fp32Mul(total, arith::BitsOfFloat(InverseBatch(batch))));
  return sum;
}

// Each batch normalization's running statistics after a step whose first core normalized
// `images` images with the statistics of g, on the vector unit: running = running (1 -
// momentum) + batch momentum, the batch's variance unbiased (times m / (m - 1)).
void UpdateRunning(const ConvNetGradients& g, int64_t images, nn::Model* m) {
  using hw::VectorOp;
  for (size_t i = 0; i < m->layers.size(); ++i) {
    Layer& l = m->layers[i];
    if (l.type != LayerType::kBatchNorm) continue;
    const std::vector<float> k =
        chip::BatchNormConstants(l.epsilon, l.momentum, images * l.out.h * l.out.w);
    for (size_t ch = 0; ch < static_cast<size_t>(l.out.c); ++ch) {
      const uint32_t batch[2] = {g.bn_mean[i][ch],
                                 Vec(VectorOp::kMul, g.bn_var[i][ch], Const(k, chip::kBnUnbiased))};
      for (size_t s = 0; s < 2; ++s) {
        float& r = l.state[s].data[ch];
        r = arith::FloatOfBits(
            Vec(VectorOp::kAdd, Vec(VectorOp::kMul, arith::BitsOfFloat(r), Const(k, chip::kBnKeep)),
                Vec(VectorOp::kMul, batch[s], Const(k, chip::kBnMomentum))));
      }
    }
  }
}

}  // namespace
}  // namespace graph_ref

ConvNetGradients CoreGradients(const nn::Model& model, const Batch& b, int batch, int n, int cores,
                               int passes) {
  const int share = batch / cores;
  ConvNetGradients sum;
  std::vector<StepOut> outs;
  for (int c = 0; c < cores; ++c) {
    ConvNetGradients g =
        graph_ref::ShareGradients(model, b, int64_t{c} * share, share, batch, n, passes);
    outs.push_back({g.loss, g.mean, g.logits});
    if (c == 0) {
      sum = std::move(g);
      continue;
    }
    graph_ref::AddGradients(&sum, g);
  }
  const StepOut all = StepOut::OfCores(outs);
  sum.loss = all.loss;
  sum.mean = all.mean;
  sum.logits = all.logits;
  return sum;
}

StepOut ReferenceGraphStep(const nn::Model& shape, int n, const Optimizer& opt, const Batch& b,
                           int batch, DenseState* s, std::vector<std::vector<float>>* grads,
                           int cores, int passes) {
  nn::Model m = shape;
  SetDenseWeights(*s, &m);
  const ConvNetGradients g = CoreGradients(m, b, batch, n, cores, passes);
  graph_ref::UpdateRunning(g, batch / cores / passes, &m);
  s->kept.clear();
  for (const nn::Layer& l : m.layers)
    for (const Tensor<float>& t : l.state) s->kept.push_back(t.data);
  StepOut out;
  out.loss = g.loss;
  out.mean = g.mean;
  out.logits = g.logits;
  ++s->step;
  const StepScalars k = ScalarsOfStep(opt, s->step);
  const std::vector<float> consts = UpdateConstants(opt);
  if (grads) grads->clear();
  size_t li = 0;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    if (!m.layers[i].HasWeights()) continue;
    std::vector<float> gv = g.w[i];
    gv.insert(gv.end(), g.b[i].begin(), g.b[i].end());
    Half gh;
    for (float v : gv) gh.push_back(Bf16Of(v));  // exact: bfloat16 values
    std::vector<std::vector<float>*> slot;
    for (auto& t : s->slots) slot.push_back(&t[li]);
    UpdateParams(opt, consts, k, gh, &s->w[li], slot);
    if (grads) grads->push_back(std::move(gv));
    ++li;
  }
  return out;
}

}  // namespace tpu::train
