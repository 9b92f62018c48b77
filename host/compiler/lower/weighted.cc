// See lower_ops.h: convolutions and dense layers (and average poolings as convolutions).
#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <utility>

#include "arith/bf16.h"
#include "host/compiler/layer_compiler.h"
#include "host/compiler/lower/lower_ops.h"
#include "host/compiler/lower/lowering.h"
#include "host/compiler/packing.h"

namespace tpu::compiler::lower {
namespace {

class WeightedLowering {
 public:
  explicit WeightedLowering(Lowering& lw) : lw_(lw), g_(lw.graph()), n_(lw.n()), bf16_(lw.bf16()) {}

  // A conv or dense layer (or an average pooling as its convolution).
  void Weighted(int i, const nn::Layer& l);

 private:
  // Terms whose tile indices point into `tiles` (equal tiles share one), before the
  // lowering chooses among ways of laying the weights out and adds the chosen tiles.
  struct Terms {
    std::vector<std::vector<OpTerm>> columns;
    std::vector<std::vector<uint8_t>> tiles;
    std::map<std::vector<uint8_t>, int> index;
    void Add(size_t column, OpTerm term, const std::vector<uint8_t>& tile) {
      const auto [it, added] = index.emplace(tile, static_cast<int>(tiles.size()));
      if (added) tiles.push_back(tile);
      term.tile = it->second;
      columns[column].push_back(term);
    }
    // Weight tiles loaded (TileRuns), then passes through the array.
    std::pair<int64_t, int64_t> Cost() const {
      const std::vector<int64_t> runs = TileRuns(columns);
      return {static_cast<int64_t>(runs.size()), std::accumulate(runs.begin(), runs.end(), 0L)};
    }
  };
  // A convolution's window (with its pooling fused, where it has one: *out_h x *out_w
  // becomes the pooling's output); the K-tiles of the layer the array computes, a.
  int64_t ConvWindow(GraphOp* op, const nn::Layer& l, const nn::Layer& a, const GraphTensor& in,
                     int pool, bool four, int64_t* out_h, int64_t* out_w);
  // A convolution of stride 1 whose 2 x 2 max pooling follows, computed a pooling window a
  // row (docs/compiler.md, "Four pixels a row"): the (kh + 1) x (kw + 1) kernel of stride 2
  // over the same input whose column 4 co + q is output channel co of the window's pixel q
  // = 2 dy + dx (the weights at (ky + dy, kx + dx), zeros elsewhere), each column with its
  // channel's VPU parameters; activate pool=lanes then keeps the largest of each four. Only
  // where the 4 x C columns fit one tile and the K-tiles at most double (the rows streamed
  // fall four times), and on an int8 chip: its sums are exact in any order, while a bf16
  // column's would round where the K-tiles split (docs/bf16.md).
  std::optional<nn::Layer> FourPixelsARow(const nn::Layer& l, const nn::Layer& p) const;
  std::vector<std::vector<OpTerm>> Intern(Terms terms);
  // The terms of op (layer l, computed as a: l or its four-pixel form) over input in, kt
  // K-tiles, through a window or not: the dense ones, or for a depthwise convolution the
  // tap-aligned ones where they cost no more (op's window then steps a pixel's bytes).
  Terms ChooseTerms(GraphOp* op, const nn::Layer& l, const nn::Layer& a, const GraphTensor& in,
                    int64_t kt, bool window);
  // Output tile j's weight tile of `rows` rows of l's K x out.c weights from row `row0`
  // (fewer than N: the rest zeros), in the chip's format. One tile at a time (packing.h's
  // layout), never the whole matrix packed.
  std::vector<uint8_t> TileAt(const nn::Layer& l, int64_t row0, int64_t rows, int64_t j) const;
  // A tile of zeros adds nothing (a depthwise layer's off-diagonal blocks, an average
  // pooling's): skipped, unless the whole column is zeros (then one term overwrites the
  // accumulators). In bf16 too: nn::Bf16Net skips the same tiles
  // (Bf16GemmSkippingZeroTiles), so an infinity spreads only through the tiles taken.
  static void AddUnlessZero(Terms* terms, size_t j, OpTerm term, bool last,
                            const std::vector<uint8_t>& tile);
  // The tile of each (column j, K-tile kb) of the weights packed densely: K is the
  // receptive field (or the flattened input), k long.
  Terms DenseTerms(const nn::Layer& l, int64_t k, int64_t kt, int64_t nt, bool window) const;
  // The terms of an image-rows op (ImageRows): K-tile r, row r of the image, is pixel
  // p = r / T's channels from (r % T) N, weight rows p C + (r % T) N on.
  Terms ImageRowTerms(const nn::Layer& l, const GraphTensor& in, int64_t nt) const;
  // A depthwise convolution (or an average pooling) with each tap's channels starting on a
  // K-tile, as max pooling reads them (window channels = the whole T x N-byte pixel): column
  // j sums, per tap, the diagonal tile of that tap's weights for channels j*N .. j*N + N-1.
  // Taps with equal weights (every average pooling) share one tile, which stays in the array.
  Terms TapAlignedTerms(const nn::Layer& l, const GraphTensor& in) const;
  // The add `add` runs in op's activate: op's value times mul_a plus the other input's.
  void Fuse(GraphOp* op, int i, int add, bool* nonneg, int64_t* c);

  Lowering& lw_;
  LoweredGraph& g_;
  const int n_;
  const bool bf16_;  // a bf16 chip: bfloat16 weights, float32 parameter sets
};

void WeightedLowering::Weighted(int i, const nn::Layer& l) {
  GraphOp op = lw_.NewOp(l.type == nn::LayerType::kDense ? OpKind::kDense : OpKind::kConv, i);
  const int in_t = lw_.TensorOf(l.inputs[0]);
  const GraphTensor in = g_.tensors[static_cast<size_t>(in_t)];
  op.inputs = {in_t};
  op.relu = nn::ClampsAtZero(l.activation);
  const int pool = lw_.FusablePool(i);
  const int add = pool < 0 ? lw_.FusableAdd(i) : -1;
  // The layer the array computes: l, or its form of four output pixels a row.
  const std::optional<nn::Layer> four = pool >= 0 ? FourPixelsARow(l, lw_.L(pool)) : std::nullopt;
  const nn::Layer& a = four ? *four : l;
  int64_t out_h = l.out.h, out_w = l.out.w, kt = 0;
  if (op.kind == OpKind::kConv) {
    kt = ConvWindow(&op, l, a, in, pool, four.has_value(), &out_h, &out_w);
  } else if (in.Pixels() > 1 || in.packed) {  // a dense layer over a map: one window
    op.stacked = !in.packed || in.rows * n_ == in.Pixels() * in.c;
    op.rows = 1;
    lw_.SetWindow(&op, in, in.h, in.w, 1, 0, 0, 1, 1, in.c);
    kt = (in.Pixels() * in.c + n_ - 1) / n_;
  } else {  // a dense layer over a vector: tile column kb of each image's row(s)
    op.rows = 1;
    kt = in.T(n_);
  }
  // A pointwise convolution (1 x 1, stride 1, no padding, no pooling) over a map an
  // operation wrote is a dense layer per pixel: its terms read the pixels' rows in place,
  // so a pass of several images is one matmul. (Window matmuls go one image at a time,
  // and where an image has fewer than 2N pixels their drains chain: docs/compiler.md.)
  const bool one_by_one = op.kind == OpKind::kConv && pool < 0 && !op.stacked && !in.packed &&
                          l.kernel_h == 1 && l.kernel_w == 1 && !l.Padded();
  const bool pointwise = one_by_one && !l.depthwise && l.stride == 1;
  const bool window = op.kind == OpKind::kConv ? !pointwise : in.Pixels() > 1 || in.packed;
  op.tall = one_by_one && l.stride > 1 && in.h % l.stride == 0;  // (a window, not pointwise)
  // A window the registers cannot hold ends the lowering (No): forming the terms of such a
  // layer, a pooling over a large map, took seconds and gigabytes for nothing.
  if (!g_.why_not.empty()) return;
  op.macs = UsefulMacsPerImage(l, op.LayerRows());
  op.nt = (a.out.c + n_ - 1) / n_;
  op.terms = Intern(ChooseTerms(&op, l, a, in, kt, window));
  lw_.LayerParams(op, bf16_ ? l : a);
  bool nonneg = op.relu;
  int64_t oc = l.out.c;
  if (add >= 0) Fuse(&op, i, add, &nonneg, &oc);
  op.output = lw_.NewTensor(out_h, out_w, oc, nonneg);
  lw_.Finish(std::move(op), i, pool, add);
}

int64_t WeightedLowering::ConvWindow(GraphOp* op, const nn::Layer& l, const nn::Layer& a,
                                     const GraphTensor& in, int pool, bool four, int64_t* out_h,
                                     int64_t* out_w) {
  if (pool >= 0) {
    const nn::Layer& p = lw_.L(pool);
    op->name += "+" + p.name;
    op->layers.push_back(pool);
    op->pool = four                                  ? isa::Pool::kLanes
               : p.type == nn::LayerType::kMaxPool2d ? isa::Pool::kMax
                                                     : isa::Pool::kAvg;
    op->window.pooled = !four;
    lw_.MarkFused(pool);
    *out_h = p.out.h;
    *out_w = p.out.w;
  }
  const int64_t wh = op->window.pooled ? 2 * *out_h : *out_h,
                ww = op->window.pooled ? 2 * *out_w : *out_w;
  // Stacked: each image's one window is its whole map, so the images' maps can sit on top
  // of each other as one tall map. Not with padding above or left: the window would start
  // inside the previous image's map (found by `tpusim cosim --networks`: a padded 2 x 1
  // average pooling of a 2 x 1 map read the image before's last row for its zeros).
  op->stacked = wh == 1 && ww == 1 && l.kernel_h == in.h && l.kernel_w == in.w && l.pad_top == 0 &&
                l.pad_left == 0;
  op->rows = wh * ww;
  lw_.SetWindow(op, in, a.kernel_h, a.kernel_w, a.stride, a.pad_top, a.pad_left, wh, ww, in.c);
  return (int64_t{a.kernel_h} * a.kernel_w * in.c + n_ - 1) / n_;
}

std::optional<nn::Layer> WeightedLowering::FourPixelsARow(const nn::Layer& l,
                                                          const nn::Layer& p) const {
  const int64_t kh = l.kernel_h, kw = l.kernel_w, c = l.in.c, co = l.out.c;
  const auto tiles = [&](int64_t taps) { return (taps * c + n_ - 1) / n_; };
  if (bf16_ || p.type != nn::LayerType::kMaxPool2d || l.stride != 1 || l.depthwise || 4 * co > n_ ||
      kh + 1 > kWindowSmall || kw + 1 > kWindowSmall ||
      tiles((kh + 1) * (kw + 1)) > 2 * tiles(kh * kw))
    return std::nullopt;
  nn::Layer x = l;
  x.kernel_h = static_cast<int>(kh + 1);
  x.kernel_w = static_cast<int>(kw + 1);
  x.stride = 2;
  x.out = {p.out.h, p.out.w, static_cast<int>(4 * co)};
  x.q.weights.shape = {kh + 1, kw + 1, c, 4 * co};
  x.q.weights.data.assign(static_cast<size_t>((kh + 1) * (kw + 1) * c * 4 * co), 0);
  for (int64_t q = 0; q < 4; ++q)
    for (int64_t ky = 0; ky < kh; ++ky)
      for (int64_t kx = 0; kx < kw; ++kx)
        for (int64_t ci = 0; ci < c; ++ci)
          for (int64_t o = 0; o < co; ++o) {
            const int64_t to = (((ky + q / 2) * (kw + 1) + kx + q % 2) * c + ci) * 4 * co;
            x.q.weights.data[static_cast<size_t>(to + 4 * o + q)] =
                l.q.weights.data[static_cast<size_t>(((ky * kw + kx) * c + ci) * co + o)];
          }
  const auto four = [](const std::vector<int32_t>& v) {
    std::vector<int32_t> out;
    for (int32_t e : v) out.insert(out.end(), 4, e);
    return out;
  };
  x.q.bias.data = four(l.q.bias.data);
  x.q.bias.shape = {4 * co};
  x.q.multiplier = four(l.q.multiplier);
  x.q.shift = four(l.q.shift);
  return x;
}

std::vector<std::vector<OpTerm>> WeightedLowering::Intern(Terms terms) {
  for (std::vector<OpTerm>& column : terms.columns)
    for (OpTerm& term : column) term.tile = lw_.Tile(terms.tiles[static_cast<size_t>(term.tile)]);
  return std::move(terms.columns);
}

WeightedLowering::Terms WeightedLowering::ChooseTerms(GraphOp* op, const nn::Layer& l,
                                                      const nn::Layer& a, const GraphTensor& in,
                                                      int64_t kt, bool window) {
  if (op->image_rows) return ImageRowTerms(a, in, op->nt);
  const int64_t k = window ? (op->kind == OpKind::kConv ? int64_t{a.kernel_h} * a.kernel_w * in.c
                                                        : in.Pixels() * in.c)
                           : l.in.c;
  Terms terms = DenseTerms(a, k, kt, op->nt, window);
  // Each tap's channels start a K-tile only in maps an operation wrote (T x N-byte pixels).
  // (Not in bf16, whose K-tiles must split K where nn::Bf16Net splits it.)
  if (!bf16_ && l.depthwise && op->kind == OpKind::kConv && !in.packed &&
      int64_t{l.kernel_h} * l.kernel_w * in.T(n_) <= kField16 + 1) {
    Terms aligned = TapAlignedTerms(l, in);
    if (aligned.Cost() <= terms.Cost()) {
      terms = std::move(aligned);
      op->window.channels = static_cast<uint64_t>(in.pixel_bytes);
    }
  }
  return terms;
}

// A depthwise layer's weights as AveragePoolAsConv leaves them unexpanded: kh x kw x c x 1,
// weight row k (tap k / c, channel k % c) holding its channel's weight alone.
bool Unexpanded(const nn::Layer& l, bool bf16) {
  const std::vector<int64_t>& shape = bf16 ? l.weights.shape : l.q.weights.shape;
  return l.depthwise && shape.size() == 4 && shape[3] == 1;
}

// WeightTile's tile of the expanded weights, from unexpanded ones w: row r's one operand
// sits in its channel's column, where that column is tile j's.
template <class T, class Value>
std::vector<uint8_t> DiagonalTile(const std::vector<T>& w, int64_t channels, int n, int64_t row0,
                                  int64_t rows, int64_t j, Value value) {
  using Operand = decltype(value(w[0]));
  std::vector<uint8_t> tile(sizeof(Operand) * static_cast<size_t>(n) * static_cast<size_t>(n), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t col = (row0 + r) % channels - j * n;
    if (col < 0 || col >= n) continue;
    const Operand v = value(w[static_cast<size_t>(row0 + r)]);
    std::memcpy(&tile[sizeof(Operand) * static_cast<size_t>(r * n + col)], &v, sizeof(Operand));
  }
  return tile;
}

std::vector<uint8_t> WeightedLowering::TileAt(const nn::Layer& l, int64_t row0, int64_t rows,
                                              int64_t j) const {
  const auto bf16 = [](float v) { return arith::Bf16OfFp32(arith::BitsOfFloat(v)); };
  if (Unexpanded(l, bf16_)) {
    if (bf16_) return DiagonalTile(l.weights.data, l.out.c, n_, row0, rows, j, bf16);
    return DiagonalTile(l.q.weights.data, l.out.c, n_, row0, rows, j, [](int8_t v) { return v; });
  }
  const int64_t at = row0 * l.out.c;
  if (!bf16_) {
    return WeightTile(l.q.weights.data.data() + at, rows, l.out.c, n_, 0, j,
                      [](int8_t v) { return v; });
  }
  return WeightTile(l.weights.data.data() + at, rows, l.out.c, n_, 0, j, bf16);
}

void WeightedLowering::AddUnlessZero(Terms* terms, size_t j, OpTerm term, bool last,
                                     const std::vector<uint8_t>& tile) {
  if (Lowering::Zero(tile) && !(last && terms->columns[j].empty())) return;
  terms->Add(j, term, tile);
}

WeightedLowering::Terms WeightedLowering::DenseTerms(const nn::Layer& l, int64_t k, int64_t kt,
                                                     int64_t nt, bool window) const {
  Terms terms;
  terms.columns.resize(static_cast<size_t>(nt));
  for (int64_t j = 0; j < nt; ++j) {
    for (int64_t kb = 0; kb < kt; ++kb) {
      AddUnlessZero(&terms, static_cast<size_t>(j), {0, window, kb, 0}, kb == kt - 1,
                    TileAt(l, kb * n_, std::min<int64_t>(n_, k - kb * n_), j));
    }
  }
  return terms;
}

WeightedLowering::Terms WeightedLowering::ImageRowTerms(const nn::Layer& l, const GraphTensor& in,
                                                        int64_t nt) const {
  const int64_t t = in.T(n_);
  Terms terms;
  terms.columns.resize(static_cast<size_t>(nt));
  for (int64_t j = 0; j < nt; ++j) {
    for (int64_t r = 0; r < in.rows; ++r) {
      const int64_t ch = r % t * n_;
      AddUnlessZero(&terms, static_cast<size_t>(j), {0, false, r, 0}, r == in.rows - 1,
                    TileAt(l, r / t * in.c + ch, std::min<int64_t>(n_, in.c - ch), j));
    }
  }
  return terms;
}

WeightedLowering::Terms WeightedLowering::TapAlignedTerms(const nn::Layer& l,
                                                          const GraphTensor& in) const {
  const int64_t t = in.T(n_), taps = int64_t{l.kernel_h} * l.kernel_w, c = in.c;
  Terms terms;
  terms.columns.resize(static_cast<size_t>(t));
  for (int64_t j = 0; j < t; ++j) {
    for (int64_t tap = 0; tap < taps; ++tap) {
      std::vector<uint8_t> tile(static_cast<size_t>(n_) * n_, 0);
      for (int64_t r = 0; r < n_ && j * n_ + r < c; ++r) {
        const int64_t ch = j * n_ + r;
        const int64_t k = tap * c + ch;  // the weight row
        tile[static_cast<size_t>(r * n_ + r)] = static_cast<uint8_t>(
            l.q.weights.data[static_cast<size_t>(Unexpanded(l, false) ? k : k * c + ch)]);
      }
      AddUnlessZero(&terms, static_cast<size_t>(j), {0, true, tap * t + j, 0}, tap == taps - 1,
                    tile);
    }
  }
  return terms;
}

void WeightedLowering::Fuse(GraphOp* op, int i, int add, bool* nonneg, int64_t* c) {
  const nn::Layer& a = lw_.L(add);
  const int k = a.inputs[0] == i ? 0 : 1;  // which input of the add this layer is
  op->name += "+" + a.name;
  op->layers.push_back(add);
  op->residual = lw_.TensorOf(a.inputs[1 - k]);
  op->residual_mul = lw_.ResidualOf(a, k);
  *nonneg = op->residual_mul.relu;
  *c = a.out.c;
  lw_.MarkFused(add);
}

}  // namespace

void LowerWeighted(Lowering& lw, int i, const nn::Layer& l) { WeightedLowering(lw).Weighted(i, l); }

void LowerConv2d(Lowering& lw, int i) { LowerWeighted(lw, i, lw.L(i)); }

void LowerDense(Lowering& lw, int i) { LowerWeighted(lw, i, lw.L(i)); }

void LowerAvgPool2d(Lowering& lw, int i) {
  if (lw.Fused(i)) return;
  LowerWeighted(lw, i, AveragePoolAsConv(lw.L(i), lw.bf16(), /*expand=*/false));
}

}  // namespace tpu::compiler::lower
