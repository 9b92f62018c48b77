// Lowering a model graph to chip operations (see graph_lowering.h).
#include "host/compiler/graph_lowering.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>

#include "arith/bf16.h"
#include "arith/int8.h"
#include "contract/tpu_contract.h"
#include "host/compiler/layer_compiler.h"
#include "host/compiler/packing.h"

namespace tpu::compiler {
namespace {

// What the window registers and the instruction word hold (contract/tpu_contract.toml).
constexpr int64_t kWindowSize = hw::kOpdSetWindowInH.Max();  // map and output sides
constexpr int64_t kWindowSmall = hw::kOpdSetWindowKh.Max();  // kernel, stride, padding
constexpr int64_t kField16 = hw::kOpdMatmulFirst.Max();      // pixels, K-tiles, bytes

class Lowering {
 public:
  Lowering(const nn::Model& m, int n, hw::Dtype dtype)
      : m_(m),
        n_(n),
        bf16_(dtype == hw::Dtype::kBf16),
        set_bytes_(int64_t{hw::ParamRows(hw::ElementBytes(dtype))} * n * hw::ElementBytes(dtype)),
        consumers_(m.Consumers()) {}

  LoweredGraph Run() {
    GraphTensor in;
    in.h = m_.input.h;
    in.w = m_.input.w;
    in.c = m_.input.c;
    in.packed = in.Pixels() > 1;  // one pixel: c bytes from a row boundary are its T rows
    in.pixel_bytes = in.packed ? in.c : in.T(n_) * n_;
    in.rows = (in.Pixels() * in.c + n_ - 1) / n_;
    in.nonnegative = m_.preprocess == "mnist32";
    g_.tensors.push_back(in);
    tensor_of_.assign(m_.layers.size(), -1);
    for (size_t i = 0; i < m_.layers.size() && g_.why_not.empty(); ++i) Layer(static_cast<int>(i));
    if (!g_.why_not.empty()) return std::move(g_);
    g_.output = TensorOf(static_cast<int>(m_.layers.size()) - 1);
    if (g_.output == 0) No("the model computes nothing on the chip");
    Border();
    return std::move(g_);
  }

 private:
  void No(const std::string& why) {
    if (g_.why_not.empty()) g_.why_not = why;
  }
  const nn::Layer& L(int i) const { return m_.layers[static_cast<size_t>(i)]; }
  int TensorOf(int layer) const {
    return layer == nn::kModelInput ? 0 : tensor_of_[static_cast<size_t>(layer)];
  }
  const std::vector<int>& Readers(int layer) const {
    return consumers_[layer == nn::kModelInput ? m_.layers.size() : static_cast<size_t>(layer)];
  }
  // The one layer that reads `layer`'s output, or -1.
  int OnlyReader(int layer) const {
    const std::vector<int>& r = Readers(layer);
    return r.size() == 1 ? r[0] : -1;
  }

  int NewTensor(int64_t h, int64_t w, int64_t c, bool nonnegative) {
    GraphTensor t;
    t.h = h;
    t.w = w;
    t.c = c;
    t.pixel_bytes = (c + n_ - 1) / n_ * n_;
    t.rows = t.Pixels() * t.T(n_);
    t.producer = static_cast<int>(g_.ops.size());
    t.nonnegative = nonnegative;
    g_.tensors.push_back(t);
    return static_cast<int>(g_.tensors.size()) - 1;
  }

  // The index of weight tile `t` (N*N bytes), shared with an equal one seen before.
  int Tile(const std::vector<uint8_t>& t) {
    const auto it = tile_index_.find(t);
    if (it != tile_index_.end()) return it->second;
    g_.tiles.push_back(t);
    return tile_index_[t] = static_cast<int>(g_.tiles.size()) - 1;
  }
  static bool Zero(const std::vector<uint8_t>& t) {
    return std::all_of(t.begin(), t.end(), [](uint8_t v) { return v == 0; });
  }

  void Layer(int i) {
    const nn::Layer& l = L(i);
    if (bf16_ && !RunsInBf16(i)) return;
    switch (l.type) {
      case nn::LayerType::kFlatten:
        tensor_of_[static_cast<size_t>(i)] = TensorOf(l.inputs[0]);  // the same rows
        return;
      case nn::LayerType::kConv2d:
      case nn::LayerType::kDense:
        return Weighted(i, l);
      case nn::LayerType::kAvgPool2d:
        if (fused_.count(i)) return;
        return Weighted(i, AveragePoolAsConv(l, bf16_));
      case nn::LayerType::kMaxPool2d:
        if (fused_.count(i)) return;
        return MaxPool(i);
      case nn::LayerType::kAdd:
        if (fused_.count(i)) return;
        return Add(i);
      case nn::LayerType::kConcat:
        return Concat(i);
    }
  }

  // The bf16 chip (docs/bf16.md, "Networks") runs every layer of nn::Bf16Net but for an add
  // with ReLU6: its vector unit's residual add has ReLU only.
  bool RunsInBf16(int i) {
    const nn::Layer& l = L(i);
    if (l.type == nn::LayerType::kAdd && l.activation == nn::Activation::kRelu6) {
      No(
          fmt::format("add '{}' ends in ReLU6, which a bf16 chip's residual add does not apply "
                      "(it applies ReLU or nothing; docs/bf16.md)",
                      l.name));
      return false;
    }
    return true;
  }

  // A 2 x 2 pooling of stride 2 that only reads this convolution runs in its activate.
  int FusablePool(int i) const {
    const int r = OnlyReader(i);
    return r >= 0 && nn::FusedPool(m_, consumers_, static_cast<size_t>(r)) ? r : -1;
  }

  // An add that only reads this layer (and a tensor computed before it) runs in its
  // activate: the other input is the residual.
  int FusableAdd(int i) const {
    const int r = OnlyReader(i);
    if (r < 0 || L(r).type != nn::LayerType::kAdd || L(r).inputs[0] == L(r).inputs[1]) return -1;
    const int other = L(r).inputs[0] == i ? L(r).inputs[1] : L(r).inputs[0];
    if (other > i) return -1;  // computed later: the add fuses into that one instead
    const int t = TensorOf(other);
    return t > 0 && !g_.tensors[static_cast<size_t>(t)].packed ? r : -1;
  }

  // Fills the window of `op` for a kh x kw kernel over `in` (the emitter adds the map's
  // size per image or stack of images).
  void SetWindow(GraphOp* op, const GraphTensor& in, int64_t kh, int64_t kw, int64_t stride,
                 int64_t pad_top, int64_t pad_left, int64_t out_h, int64_t out_w,
                 int64_t channels) {
    isa::WindowGeometry& g = op->window;
    g.channels = static_cast<uint64_t>(channels);
    g.pixel_bytes = static_cast<uint64_t>(in.pixel_bytes);
    g.kh = static_cast<uint64_t>(kh);
    g.kw = static_cast<uint64_t>(kw);
    g.stride_y = g.stride_x = static_cast<uint64_t>(stride);
    g.pad_top = static_cast<uint64_t>(pad_top);
    g.pad_left = static_cast<uint64_t>(pad_left);
    g.out_h = static_cast<uint64_t>(out_h);
    g.out_w = static_cast<uint64_t>(out_w);
    const bool fits =
        kh <= kWindowSmall && kw <= kWindowSmall && stride <= kWindowSmall && pad_top < kh &&
        pad_left < kw && in.h <= kWindowSize && in.w <= kWindowSize && out_h <= kWindowSize &&
        out_w <= kWindowSize && channels <= kField16 && in.pixel_bytes <= kField16 &&
        (kh * kw * channels + n_ - 1) / n_ <= kField16 + 1 && op->rows <= kField16 + 1 &&
        (out_h - 1) * stride <= in.h - 1 + pad_top && (out_w - 1) * stride <= in.w - 1 + pad_left;
    if (!fits && !ImageRows(op, in)) {
      No(fmt::format(
          "layer '{}' does not fit the window registers (kernels and strides up to {}, maps up "
          "to {} pixels a side, {} pixels per image){}",
          op->name, kWindowSmall, kWindowSize, kField16 + 1,
          op->stacked ? fmt::format("; a window over a whole map reads the image's rows instead "
                                    "only off the model's input and, on a bf16 chip, where the "
                                    "channels ({}) are a multiple of {}",
                                    in.c, n_)
                      : ""));
    }
  }

  // A window over each image's whole map (one output pixel per image) that the registers
  // cannot hold, as a global average pooling of a 16 x 16 map, is a dense layer over the
  // image's rows instead: K-tile r is row r of the image (pixel r / T's channels r % T),
  // read in place, images a pitch apart (docs/compiler.md, "A window larger than the
  // registers"). Not over the packed input (its pixels share rows), and on a bf16 chip only
  // where a pixel's channels fill whole rows: its K-tiles must split K where nn::Bf16Net
  // splits it.
  bool ImageRows(GraphOp* op, const GraphTensor& in) const {
    if (!op->stacked || in.packed || (bf16_ && in.c % n_ != 0) ||
        in.rows > static_cast<int64_t>(hw::kOpdMatmulStride.Max()))
      return false;
    op->image_rows = true;
    return true;
  }

  // A convolution's window (with its pooling fused, where it has one: *out_h x *out_w
  // becomes the pooling's output); the K-tiles of the layer the array computes, a.
  int64_t ConvWindow(GraphOp* op, const nn::Layer& l, const nn::Layer& a, const GraphTensor& in,
                     int pool, bool four, int64_t* out_h, int64_t* out_w) {
    if (pool >= 0) {
      const nn::Layer& p = L(pool);
      op->name += "+" + p.name;
      op->layers.push_back(pool);
      op->pool = four                                  ? isa::Pool::kLanes
                 : p.type == nn::LayerType::kMaxPool2d ? isa::Pool::kMax
                                                       : isa::Pool::kAvg;
      op->window.pooled = !four;
      fused_[pool] = true;
      *out_h = p.out.h;
      *out_w = p.out.w;
    }
    const int64_t wh = op->window.pooled ? 2 * *out_h : *out_h,
                  ww = op->window.pooled ? 2 * *out_w : *out_w;
    // Stacked: each image's one window is its whole map, so the images' maps can sit on top
    // of each other as one tall map. Not with padding above or left: the window would start
    // inside the previous image's map (found by `tpusim cosim --networks`: a padded 2 x 1
    // average pooling of a 2 x 1 map read the image before's last row for its zeros).
    op->stacked = wh == 1 && ww == 1 && l.kernel_h == in.h && l.kernel_w == in.w &&
                  l.pad_top == 0 && l.pad_left == 0;
    op->rows = wh * ww;
    SetWindow(op, in, a.kernel_h, a.kernel_w, a.stride, a.pad_top, a.pad_left, wh, ww, in.c);
    return (int64_t{a.kernel_h} * a.kernel_w * in.c + n_ - 1) / n_;
  }

  // A conv or dense layer (or an average pooling as its convolution).
  void Weighted(int i, const nn::Layer& l) {
    GraphOp op;
    op.kind = l.type == nn::LayerType::kDense ? OpKind::kDense : OpKind::kConv;
    op.name = l.name;
    op.layers = {i};
    const int in_t = TensorOf(l.inputs[0]);
    const GraphTensor in = g_.tensors[static_cast<size_t>(in_t)];
    op.inputs = {in_t};
    op.relu = nn::ClampsAtZero(l.activation);
    const int pool = FusablePool(i);
    const int add = pool < 0 ? FusableAdd(i) : -1;
    // The layer the array computes: l, or its form of four output pixels a row.
    const std::optional<nn::Layer> four = pool >= 0 ? FourPixelsARow(l, L(pool)) : std::nullopt;
    const nn::Layer& a = four ? *four : l;
    int64_t out_h = l.out.h, out_w = l.out.w, kt = 0;
    if (op.kind == OpKind::kConv) {
      kt = ConvWindow(&op, l, a, in, pool, four.has_value(), &out_h, &out_w);
    } else if (in.Pixels() > 1 || in.packed) {  // a dense layer over a map: one window
      op.stacked = !in.packed || in.rows * n_ == in.Pixels() * in.c;
      op.rows = 1;
      SetWindow(&op, in, in.h, in.w, 1, 0, 0, 1, 1, in.c);
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
    if (bf16_)
      ParamsBf16(op, l);
    else
      Params(op, a.q.bias.data, a.q.multiplier, a.q.shift, a.out.c);
    bool nonneg = op.relu;
    int64_t oc = l.out.c;
    if (add >= 0) Fuse(&op, i, add, &nonneg, &oc);
    op.output = NewTensor(out_h, out_w, oc, nonneg);
    Finish(std::move(op), i, pool, add);
  }

  // A convolution of stride 1 whose 2 x 2 max pooling follows, computed a pooling window a
  // row (docs/compiler.md, "Four pixels a row"): the (kh + 1) x (kw + 1) kernel of stride 2
  // over the same input whose column 4 co + q is output channel co of the window's pixel q
  // = 2 dy + dx (the weights at (ky + dy, kx + dx), zeros elsewhere), each column with its
  // channel's VPU parameters; activate pool=lanes then keeps the largest of each four. Only
  // where the 4 x C columns fit one tile and the K-tiles at most double (the rows streamed
  // fall four times), and on an int8 chip: its sums are exact in any order, while a bf16
  // column's would round where the K-tiles split (docs/bf16.md).
  std::optional<nn::Layer> FourPixelsARow(const nn::Layer& l, const nn::Layer& p) const {
    const int64_t kh = l.kernel_h, kw = l.kernel_w, c = l.in.c, co = l.out.c;
    const auto tiles = [&](int64_t taps) { return (taps * c + n_ - 1) / n_; };
    if (bf16_ || p.type != nn::LayerType::kMaxPool2d || l.stride != 1 || l.depthwise ||
        4 * co > n_ || kh + 1 > kWindowSmall || kw + 1 > kWindowSmall ||
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
  std::vector<std::vector<OpTerm>> Intern(Terms terms) {
    for (std::vector<OpTerm>& column : terms.columns)
      for (OpTerm& term : column) term.tile = Tile(terms.tiles[static_cast<size_t>(term.tile)]);
    return std::move(terms.columns);
  }

  // The terms of op (layer l, computed as a: l or its four-pixel form) over input in, kt
  // K-tiles, through a window or not: the dense ones, or for a depthwise convolution the
  // tap-aligned ones where they cost no more (op's window then steps a pixel's bytes).
  Terms ChooseTerms(GraphOp* op, const nn::Layer& l, const nn::Layer& a, const GraphTensor& in,
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

  // Output tile j's weight tile of `rows` rows of l's K x out.c weights from row `row0`
  // (fewer than N: the rest zeros), in the chip's format. One tile at a time (packing.h's
  // layout), never the whole matrix packed.
  std::vector<uint8_t> TileAt(const nn::Layer& l, int64_t row0, int64_t rows, int64_t j) const {
    const int64_t at = row0 * l.out.c;
    if (!bf16_) {
      return WeightTile(l.q.weights.data.data() + at, rows, l.out.c, n_, 0, j,
                        [](int8_t v) { return v; });
    }
    return WeightTile(l.weights.data.data() + at, rows, l.out.c, n_, 0, j,
                      [](float v) { return arith::Bf16OfFp32(arith::BitsOfFloat(v)); });
  }
  // A tile of zeros adds nothing (a depthwise layer's off-diagonal blocks, an average
  // pooling's): skipped, unless the whole column is zeros (then one term overwrites the
  // accumulators). In bf16 too: nn::Bf16Net skips the same tiles
  // (Bf16GemmSkippingZeroTiles), so an infinity spreads only through the tiles taken.
  static void AddUnlessZero(Terms* terms, size_t j, OpTerm term, bool last,
                            const std::vector<uint8_t>& tile) {
    if (Zero(tile) && !(last && terms->columns[j].empty())) return;
    terms->Add(j, term, tile);
  }

  // The tile of each (column j, K-tile kb) of the weights packed densely: K is the
  // receptive field (or the flattened input), k long.
  Terms DenseTerms(const nn::Layer& l, int64_t k, int64_t kt, int64_t nt, bool window) const {
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

  // The terms of an image-rows op (ImageRows): K-tile r, row r of the image, is pixel
  // p = r / T's channels from (r % T) N, weight rows p C + (r % T) N on.
  Terms ImageRowTerms(const nn::Layer& l, const GraphTensor& in, int64_t nt) const {
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

  // A depthwise convolution (or an average pooling) with each tap's channels starting on a
  // K-tile, as max pooling reads them (window channels = the whole T x N-byte pixel): column
  // j sums, per tap, the diagonal tile of that tap's weights for channels j*N .. j*N + N-1.
  // Taps with equal weights (every average pooling) share one tile, which stays in the array.
  Terms TapAlignedTerms(const nn::Layer& l, const GraphTensor& in) const {
    const int64_t t = in.T(n_), taps = int64_t{l.kernel_h} * l.kernel_w, c = in.c;
    Terms terms;
    terms.columns.resize(static_cast<size_t>(t));
    for (int64_t j = 0; j < t; ++j) {
      for (int64_t tap = 0; tap < taps; ++tap) {
        std::vector<uint8_t> tile(static_cast<size_t>(n_) * n_, 0);
        for (int64_t r = 0; r < n_ && j * n_ + r < c; ++r) {
          const int64_t ch = j * n_ + r;
          tile[static_cast<size_t>(r * n_ + r)] =
              static_cast<uint8_t>(l.q.weights.data[static_cast<size_t>((tap * c + ch) * c + ch)]);
        }
        AddUnlessZero(&terms, static_cast<size_t>(j), {0, true, tap * t + j, 0}, tap == taps - 1,
                      tile);
      }
    }
    return terms;
  }

  // The add `add` runs in op's activate: op's value times mul_a plus the other input's.
  void Fuse(GraphOp* op, int i, int add, bool* nonneg, int64_t* c) {
    const nn::Layer& a = L(add);
    const int k = a.inputs[0] == i ? 0 : 1;  // which input of the add this layer is
    op->name += "+" + a.name;
    op->layers.push_back(add);
    op->residual = TensorOf(a.inputs[1 - k]);
    op->residual_mul = ResidualOf(a, k);
    *nonneg = op->residual_mul.relu;
    *c = a.out.c;
    fused_[add] = true;
  }

  // The residual of add `a` whose input k comes through the array: int8, its multipliers and
  // shift; bf16, a float32 sum (the multipliers and shift, valid and unused: docs/isa.md).
  isa::Residual ResidualOf(const nn::Layer& a, int k) const {
    isa::Residual r;
    r.relu = nn::ClampsAtZero(a.activation);
    if (bf16_) {
      r.mul_a = r.mul_b = r.shift = 1;
      return r;
    }
    r.mul_a = static_cast<uint64_t>(a.q.multiplier[static_cast<size_t>(k)]);
    r.mul_b = static_cast<uint64_t>(a.q.multiplier[static_cast<size_t>(1 - k)]);
    r.shift = static_cast<uint64_t>(a.q.shift[0]);
    return r;
  }

  void Finish(GraphOp op, int i, int pool, int add) {
    const int out = op.output;
    for (int t : op.inputs)
      g_.tensors[static_cast<size_t>(t)].readers.push_back(static_cast<int>(g_.ops.size()));
    if (op.residual >= 0)
      g_.tensors[static_cast<size_t>(op.residual)].readers.push_back(
          static_cast<int>(g_.ops.size()));
    g_.ops.push_back(std::move(op));
    tensor_of_[static_cast<size_t>(i)] = out;
    if (pool >= 0) tensor_of_[static_cast<size_t>(pool)] = out;
    if (add >= 0) tensor_of_[static_cast<size_t>(add)] = out;
  }

  // Packed parameter sets appended to the program's, the first of them op's.
  void AddParams(GraphOp& op, const std::vector<uint8_t>& packed) {
    op.first_param = static_cast<int>(static_cast<int64_t>(g_.params.size()) / set_bytes_);
    g_.params.insert(g_.params.end(), packed.begin(), packed.end());
  }
  void Params(GraphOp& op, const std::vector<int32_t>& bias, const std::vector<int32_t>& mult,
              const std::vector<int32_t>& shift, int64_t channels) {
    AddParams(op, PackParamSets(bias.data(), mult.data(), shift.data(), channels, n_));
  }
  // The bf16 chip's: the layer's float32 biases, and the upper bound 6 for ReLU6 (the
  // activate's ReLU flag does the clamp at zero).
  void ParamsBf16(GraphOp& op, const nn::Layer& l) {
    std::vector<uint32_t> bias, hi;
    for (float v : l.bias.data) bias.push_back(arith::Fp32Canonical(arith::BitsOfFloat(v)));
    const uint32_t bound =
        l.activation == nn::Activation::kRelu6 ? arith::BitsOfFloat(6.0f) : arith::kFp32Inf;
    hi.assign(bias.size(), bound);
    AddParams(op, PackParamSetsBf16(bias.data(), hi.data(), l.out.c, n_));
  }
  // Parameter sets that give each value back: int8 bias 0, multiplier 2^30, shift 30; bf16
  // bias +0, no upper bound.
  void IdentityParams(GraphOp& op, int64_t channels) {
    const auto c = static_cast<size_t>(channels);
    if (bf16_) {
      const std::vector<uint32_t> bias(c, 0), hi(c, arith::kFp32Inf);
      return AddParams(op, PackParamSetsBf16(bias.data(), hi.data(), channels, n_));
    }
    Params(op, std::vector<int32_t>(c, 0), std::vector<int32_t>(c, int32_t{1} << 30),
           std::vector<int32_t>(c, 30), channels);
  }
  // The tile that maps input lane r to output lane r - shift for r in [lo, hi): weights 1
  // (in bf16 two bytes, little-endian) there, zeros elsewhere.
  int ShiftTile(int64_t lo, int64_t hi, int64_t shift) {
    const size_t eb = bf16_ ? 2 : 1;
    const uint16_t one = bf16_ ? arith::Bf16OfFp32(arith::BitsOfFloat(1.0f)) : 1;
    std::vector<uint8_t> t(static_cast<size_t>(n_) * n_ * eb, 0);
    for (int64_t r = lo; r < hi; ++r)
      std::memcpy(&t[static_cast<size_t>(r * n_ + r - shift) * eb], &one, eb);
    return Tile(t);
  }

  // Max pooling: for each tap, the window stage reads that tap's tile of every pixel
  // (channels = the whole T x N-byte pixel, so each K-tile is one tap's tile), and the
  // accumulators keep the maximum (matmul max) through the identity tile.
  void MaxPool(int i) {
    const nn::Layer& l = L(i);
    const int in_t = TensorOf(l.inputs[0]);
    const GraphTensor in = g_.tensors[static_cast<size_t>(in_t)];
    GraphOp op;
    op.kind = OpKind::kMaxPool;
    op.name = l.name;
    op.layers = {i};
    op.inputs = {in_t};
    op.acc = isa::Acc::kMax;
    if (in.packed) {
      No("max pooling '" + l.name +
         "' reads the model's input directly; the chip pools maps "
         "that an operation wrote");
      return;
    }
    const int64_t t = in.T(n_);
    op.rows = int64_t{l.out.h} * l.out.w;
    op.nt = t;
    SetWindow(&op, in, l.pool_h, l.pool_w, l.pool_stride, l.pad_top, l.pad_left, l.out.h, l.out.w,
              in.pixel_bytes);
    op.window.pad_min = l.Padded() && !in.nonnegative;
    const int id = ShiftTile(0, n_, 0);
    op.terms.resize(static_cast<size_t>(t));
    for (int64_t j = 0; j < t; ++j)
      for (int64_t tap = 0; tap < int64_t{l.pool_h} * l.pool_w; ++tap)
        op.terms[static_cast<size_t>(j)].push_back({0, true, tap * t + j, id});
    op.macs = op.rows * l.out.c * l.pool_h * l.pool_w;
    IdentityParams(op, l.out.c);
    op.output = NewTensor(l.out.h, l.out.w, l.out.c, in.nonnegative);
    Finish(std::move(op), i, -1, -1);
  }

  // An add of two tensors that no single layer's activate can take: the first through the
  // identity tile, the second as the residual.
  void Add(int i) {
    const nn::Layer& l = L(i);
    GraphOp op;
    op.kind = OpKind::kAdd;
    op.name = l.name;
    op.layers = {i};
    const int a = TensorOf(l.inputs[0]), b = TensorOf(l.inputs[1]);
    if (g_.tensors[static_cast<size_t>(a)].packed || g_.tensors[static_cast<size_t>(b)].packed) {
      No("add '" + l.name +
         "' reads the model's input directly; the chip adds maps that an "
         "operation wrote");
      return;
    }
    const GraphTensor in = g_.tensors[static_cast<size_t>(a)];
    op.inputs = {a};
    op.residual = b;
    op.residual_mul = ResidualOf(l, 0);
    op.rows = in.Pixels();
    op.nt = in.T(n_);
    const int id = ShiftTile(0, n_, 0);
    op.terms.resize(static_cast<size_t>(op.nt));
    for (int64_t j = 0; j < op.nt; ++j)
      op.terms[static_cast<size_t>(j)].push_back({0, false, j, id});
    op.macs = in.Pixels() * in.c;
    IdentityParams(op, in.c);
    op.output = NewTensor(in.h, in.w, in.c, op.residual_mul.relu);
    Finish(std::move(op), i, -1, -1);
  }

  // A concatenation of channels: each output tile gathers the lanes of the input tiles it
  // holds through tiles that move lanes (weights 1), and the VPU requantizes each lane with
  // its input's multiplier and shift.
  void Concat(int i) {
    const nn::Layer& l = L(i);
    GraphOp op;
    op.kind = OpKind::kConcat;
    op.name = l.name;
    op.layers = {i};
    const GraphTensor& first = g_.tensors[static_cast<size_t>(TensorOf(l.inputs[0]))];
    op.rows = first.Pixels();
    op.nt = (l.out.c + n_ - 1) / n_;
    op.terms.resize(static_cast<size_t>(op.nt));
    std::vector<int32_t> bias(static_cast<size_t>(l.out.c), 0), mult(bias.size()),
        shift(bias.size());
    bool nonneg = true;
    int64_t c0 = 0;
    for (size_t k = 0; k < l.inputs.size(); ++k) {
      const int t = TensorOf(l.inputs[k]);
      const GraphTensor in = g_.tensors[static_cast<size_t>(t)];
      if (in.packed) {
        No("concat '" + l.name + "' reads the model's input directly");
        return;
      }
      nonneg = nonneg && in.nonnegative;
      op.inputs.push_back(t);
      for (int64_t ch = 0; ch < in.c && !bf16_; ++ch) {  // (bf16: IdentityParams)
        mult[static_cast<size_t>(c0 + ch)] = l.q.multiplier[k];
        shift[static_cast<size_t>(c0 + ch)] = l.q.shift[k];
      }
      // Input tile s holds channels c0 + s*N .. of the output; it lands in output tiles
      // (c0 + s*N) / N and the next.
      for (int64_t s = 0; s < in.T(n_); ++s) {
        const int64_t lo = c0 + s * n_, hi = c0 + std::min<int64_t>((s + 1) * n_, in.c);
        for (int64_t j = lo / n_; j <= (hi - 1) / n_; ++j) {
          const int64_t a = std::max(lo, j * n_) - lo, b = std::min(hi, (j + 1) * n_) - lo;
          // Lane r of input tile s is output channel lo + r, lane lo + r - j*N of tile j.
          op.terms[static_cast<size_t>(j)].push_back(
              {static_cast<int>(k), false, s, ShiftTile(a, b, j * n_ - lo)});
        }
      }
      c0 += in.c;
    }
    op.macs = op.rows * l.out.c;
    if (bf16_)
      IdentityParams(op, l.out.c);
    else
      Params(op, bias, mult, shift, l.out.c);
    op.output = NewTensor(first.h, first.w, l.out.c, nonneg);
    Finish(std::move(op), i, -1, -1);
  }

  // The 2-pixel zero border of mnist32 becomes padding of the first convolution where its
  // window allows it: the only reader of the input, padding smaller than the kernel, every
  // window starting inside the map.
  void Border() {
    GraphTensor& in = g_.tensors[0];
    if (m_.preprocess != "mnist32" || in.readers.size() != 1 || in.h != 32 || in.w != 32) return;
    GraphOp& op = g_.ops[static_cast<size_t>(in.readers[0])];
    isa::WindowGeometry& w = op.window;
    if (op.kind != OpKind::kConv || op.stacked) return;
    if (w.pad_top + 2 < w.kh && w.pad_left + 2 < w.kw &&
        (w.out_h - 1) * w.stride_y <= 28 - 1 + w.pad_top + 2 &&
        (w.out_w - 1) * w.stride_x <= 28 - 1 + w.pad_left + 2) {
      g_.border = 2;
      in.h = in.w = 28;
      in.rows = (in.Pixels() * in.c + n_ - 1) / n_;
      w.pad_top += 2;
      w.pad_left += 2;
    }
  }

  const nn::Model& m_;
  const int n_;
  const bool bf16_;          // a bf16 chip: bfloat16 weights, float32 parameter sets
  const int64_t set_bytes_;  // a parameter set's bytes
  const std::vector<std::vector<int>> consumers_;
  LoweredGraph g_;
  std::vector<int> tensor_of_;  // per layer, the tensor holding its output
  std::map<int, bool> fused_;   // layers that run inside another layer's operation
  std::map<std::vector<uint8_t>, int> tile_index_;
};

}  // namespace

std::vector<int64_t> TileRuns(const std::vector<std::vector<OpTerm>>& columns) {
  std::vector<int64_t> runs;
  int prev = -1;
  for (const std::vector<OpTerm>& column : columns) {
    for (const OpTerm& t : column) {
      if (t.tile != prev || runs.empty()) runs.push_back(0);
      ++runs.back();
      prev = t.tile;
    }
  }
  return runs;
}

LoweredGraph LowerGraph(const nn::Model& model, int n, hw::Dtype dtype) {
  LoweredGraph g = Lowering(model, n, dtype).Run();
  g.n = n;
  return g;
}

}  // namespace tpu::compiler
