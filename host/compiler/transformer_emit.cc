// See transformer_layout.h: each operation of a transformer as chip instructions, in the
// bfloat16 rules of host/nn/ops/transformer_bf16.cc and bf16_rules.cc, step for step.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <utility>

#include "arith/fp32.h"
#include "host/common/errors.h"
#include "host/compiler/packing.h"
#include "host/compiler/transformer_layout.h"
#include "host/nn/ops/transformer_ops.h"

namespace tpu::compiler {

using hw::VectorOp;
using nn::LayerType;

namespace {

using isa::kA32;
using isa::kB32;
using isa::kBcast;
using isa::kO32;

int64_t Blocks(int64_t c, int n) { return (c + n - 1) / n; }

}  // namespace

// A matmul's operands and output as runs of each head's positions and lanes.
struct MatMulPlan {
  HeadRuns a, b, o;
  bool k_on_pos = false;  // B's K dimension runs along positions (rows), else along lanes
  int64_t heads = 0, m = 0, k = 0, cols = 0;
};

// The rows of a second operand's tile: K values [k0, k1) and columns [j0, j1) of a head.
struct TileRange {
  int64_t k0 = 0, k1 = 0, j0 = 0, j1 = 0;
};

// Rows of every K block that a product streams: `rows` rows from `first` (within the block's
// rows), `stride` apart.
struct RowRun {
  int64_t first = 0, rows = 0, stride = 1;
  int64_t to = -1;  // the output's first row in its block's rows (-1: after the last run's)
};

// A product of the rows `runs` of x (K blocks `block` rows apart from x0) by the K x c
// bfloat16 weights w, through tiles from weight memory: for each block of N outputs, the K
// tiles in order (with `skip`, a tile of +0 weights left out unless it is the last and none
// came before: arith::Bf16GemmSkippingZeroTiles), then the activate of parameter set
// sets + j (0: the identity) into y's rows, the runs one after another.
struct Product {
  explicit Product(const std::vector<uint16_t>& weights) : w(weights) {}
  const std::vector<uint16_t>& w;
  int64_t k = 0, c = 0;
  int64_t x0 = 0, block = 0;
  std::vector<RowRun> runs;
  int64_t sets = 0;
  bool relu = false, skip = true;
  int layer = -1;  // whose weights: its tiles are kept by layer and block (TilesOf)
};

// The operations, with the emitter's state.
struct TransformerOps {
  TransformerEmitter& e;
  const int n = e.n_;
  const int64_t b = e.batch_;

  int64_t Row(const TensorArea& a, int64_t block, int64_t image, int64_t pos) const {
    return a.base + (block * b + image) * a.p + pos;
  }
  const TensorArea& In(int i, int k = 0) const {
    return e.AreaOf(e.L(i).inputs[static_cast<size_t>(k)]);
  }
  const TensorArea& Out(int i) const { return e.AreaOf(i); }
  // Scratch rows for the layer, given back by the caller.
  int64_t Scratch(int64_t rows, int i) {
    return e.ub_.Take(rows, fmt::format("layer '{}'", e.L(i).name), true);
  }
  // Positions of every image a piece of the vector unit's work takes: scratch of `per` float32
  // rows a position row, at most an eighth of the buffer.
  int64_t Piece(int64_t rows, int64_t per) const {
    return std::clamp<int64_t>(e.cfg_.ub_depth_rows / 8 / (2 * per), 1, rows);
  }
  // A head's rows of layer i's scores (its input's width: the positions a head's rows
  // take), the piece the scale and the softmax take at a time.
  int64_t HeadRows(int i) const { return std::max(1, e.L(i).in.w); }
  void CheckNatural(int i, int k) const;
  void Zero(int64_t row, int64_t rows);
  // The lanes a tile of head h's second operand moves from and to through the array ({-1,
  // -1}: none, its lanes stay where they are).
  std::pair<int64_t, int64_t> LaneMove(const MatMulPlan& mp, int64_t h, int64_t ab, int64_t ob,
                                       const TileRange& r) const;

  void Dense(int i);
  void Stream(const Product& pr, const TensorArea& y, const std::string& what);
  std::vector<std::pair<int64_t, uint64_t>> TilesOf(const Product& pr, int64_t j);
  void StreamTiles(const Product& pr,
                   const std::vector<std::vector<std::pair<int64_t, uint64_t>>>& tiles,
                   const std::vector<int64_t>& acc, int64_t first, int64_t rows, int64_t stride,
                   bool read_first = true);
  // The reads of each unit's first tiles of output blocks [0, units) (as StreamTiles reads
  // them).
  void ReadFirstTiles(const std::vector<std::vector<std::pair<int64_t, uint64_t>>>& tiles);
  size_t ReadRun() const;
  std::vector<std::vector<std::pair<int64_t, uint64_t>>> FirstTiles(const Product& pr);
  void Prefetch(int i);
  std::vector<uint16_t> DenseWeights(int i) const;
  int64_t DenseSets(int i);
  int NextDense(int i) const;
  bool CausallyMasked(int i) const;
  void PrefetchSets();
  std::vector<std::vector<std::vector<std::pair<int64_t, uint64_t>>>> Groups(const Product& pr);
  std::vector<RowRun> InputRuns(int i) const;
  void Embedding(int i);
  void Prepend(int i);
  void AddConstant(int i);
  void Add(int i);
  void Softmax(int i);
  int64_t Gathered(const TensorArea& x) const;
  TensorArea Gather(const TensorArea& x, int64_t s);
  void Scatter(const TensorArea& c, const TensorArea& y);
  void LayerNorm(int i);
  void Gelu(int i);
  void MatMul(int i);
  void MatMulHeads(int i, const MatMulPlan& mp);
  void StageTile(int i, const MatMulPlan& mp, int64_t img, int64_t h, int64_t ab, int64_t ob,
                 const TileRange& r, int64_t at, std::pair<int64_t, int64_t>* written);
  int shift_turn = 0;
  void Scale(int i, const TensorArea& o);
  void NormalizeRows(int i, const TensorArea& x, const TensorArea& y, int64_t r0, int64_t rows,
                     int64_t s);
  void SoftmaxRows(const TensorArea& x, const TensorArea& y, int64_t r0, int64_t rows, int64_t s,
                   int64_t pad);
  void GeluRows(int64_t x, int64_t y, int64_t rows, int64_t s);
};

void TransformerOps::CheckNatural(int i, int k) const {
  const nn::Layer& l = e.L(i);
  const int in = l.inputs[static_cast<size_t>(k)];
  const Placement& v = e.PlaceOf(in);
  const TensorArea& a = e.AreaOf(in);
  bool natural = static_cast<int64_t>(v.pos.size()) == a.p * a.c;
  for (size_t x = 0; x < v.pos.size() && natural; ++x)
    natural = v.pos[x] == static_cast<int64_t>(x) / a.c && v.ch[x] == static_cast<int64_t>(x) % a.c;
  if (!natural)
    throw UsageError(
        fmt::format("{} '{}' reads '{}' as a view the chip program does not take yet (a position's "
                    "channels in another order); docs/transformers.md, \"On the chip\"",
                    l.TypeName(), l.name, in == nn::kModelInput ? "input" : e.L(in).name));
}

// The tiles of output block j (K tile, address), zero tiles left out where pr.skip.
std::vector<std::pair<int64_t, uint64_t>> TransformerOps::TilesOf(const Product& pr, int64_t j) {
  const std::pair<int, int64_t> key{pr.layer, j};
  if (e.after_) {  // a program after a cached one: the tiles that one formed
    const auto it = e.after_->tiles_of.find(key);
    if (it == e.after_->tiles_of.end())
      throw std::logic_error(
          fmt::format("TransformerOps: layer {}'s tiles of block {} are not "
                      "the first cached program's",
                      pr.layer, j));
    return it->second;
  }
  const int64_t kt = Blocks(pr.k, n);
  std::vector<std::pair<int64_t, uint64_t>> tiles;
  if (e.count_only_) {  // every K tile, none formed (CountOnly)
    for (int64_t kb = 0; kb < kt; ++kb) tiles.push_back({kb, 0});
    return tiles;
  }
  for (int64_t kb = 0; kb < kt; ++kb) {
    const std::vector<uint8_t> t =
        WeightTile(pr.w.data(), pr.k, pr.c, n, kb, j, [](uint16_t v) { return v; });
    const bool zero = std::all_of(t.begin(), t.end(), [](uint8_t v) { return v == 0; });
    if (!pr.skip || !zero || (kb == kt - 1 && tiles.empty())) tiles.push_back({kb, e.Tile(t)});
  }
  e.tiles_of_[key] = tiles;
  return tiles;
}

// `rows` rows from `first` (`stride` apart) of every K block through each unit's tiles into
// its accumulators `acc`, the units' tiles interleaved, K tile after K tile.
void TransformerOps::StreamTiles(
    const Product& pr, const std::vector<std::vector<std::pair<int64_t, uint64_t>>>& tiles,
    const std::vector<int64_t>& acc, int64_t first, int64_t rows, int64_t stride, bool read_first) {
  size_t most = 0;
  for (const auto& t : tiles) most = std::max(most, t.size());
  const auto product = [&](size_t u, size_t t) {
    e.p_.SetUnit(static_cast<uint64_t>(u));
    e.p_.Matmul(static_cast<uint64_t>(pr.x0 + tiles[u][t].first * pr.block + first),
                static_cast<uint64_t>(acc[u]), static_cast<uint64_t>(rows), true, isa::AddIf(t > 0),
                static_cast<uint64_t>(stride));
  };
  // Each unit's next tiles (as many as its FIFO holds) in one read, the weight memory's
  // latency paid once for them, then their products.
  const size_t run = ReadRun();
  const uint64_t tile_bytes = static_cast<uint64_t>(n) * static_cast<uint64_t>(n) * 2;
  for (size_t t0 = 0; t0 < most; t0 += run) {
    for (size_t u = 0; u < tiles.size() && (t0 > 0 || read_first); ++u) {
      e.p_.SetUnit(static_cast<uint64_t>(u));
      const size_t end = std::min(t0 + run, tiles[u].size());
      for (size_t t = t0; t < end;) {
        size_t k = 1;  // the tiles that lie one after another in weight memory
        while (t + k < end && tiles[u][t + k].second == tiles[u][t].second + k * tile_bytes) ++k;
        e.p_.ReadWeights(tiles[u][t].second, k);
        if (run == 1) product(u, t);
        t += k;
      }
    }
    for (size_t t = t0; t < t0 + run && run > 1; ++t)
      for (size_t u = 0; u < tiles.size(); ++u)
        if (t < tiles[u].size()) product(u, t);
  }
}

size_t TransformerOps::ReadRun() const {
  return static_cast<size_t>(std::max(1, e.cfg_.weight_fifo_tiles));
}

void TransformerOps::ReadFirstTiles(
    const std::vector<std::vector<std::pair<int64_t, uint64_t>>>& tiles) {
  const uint64_t tile_bytes = static_cast<uint64_t>(n) * static_cast<uint64_t>(n) * 2;
  for (size_t u = 0; u < tiles.size(); ++u) {
    e.p_.SetUnit(static_cast<uint64_t>(u));
    const size_t end = std::min(ReadRun(), tiles[u].size());
    for (size_t t = 0; t < end;) {
      size_t k = 1;
      while (t + k < end && tiles[u][t + k].second == tiles[u][t].second + k * tile_bytes) ++k;
      e.p_.ReadWeights(tiles[u][t].second, k);
      t += k;
    }
  }
  e.p_.SetUnit(0);
}

std::vector<std::vector<std::pair<int64_t, uint64_t>>> TransformerOps::FirstTiles(
    const Product& pr) {
  const int64_t units = std::max(1, e.cfg_.mxus_per_core);
  std::vector<std::vector<std::pair<int64_t, uint64_t>>> tiles;
  for (int64_t u = 0; u < std::min(units, Blocks(pr.c, n)); ++u) tiles.push_back(TilesOf(pr, u));
  return tiles;
}

// Each group of output blocks' tiles (a block a unit): the blocks go to the core's matrix
// units in turn.
std::vector<std::vector<std::vector<std::pair<int64_t, uint64_t>>>> TransformerOps::Groups(
    const Product& pr) {
  const int64_t nt = Blocks(pr.c, n), units = std::max(1, e.cfg_.mxus_per_core);
  std::vector<std::vector<std::vector<std::pair<int64_t, uint64_t>>>> groups;
  for (int64_t j0 = 0; j0 < nt; j0 += units) {
    groups.emplace_back();
    for (int64_t u = 0; u < std::min(units, nt - j0); ++u)
      groups.back().push_back(TilesOf(pr, j0 + u));
  }
  return groups;
}

void TransformerOps::PrefetchSets() {
  // The next two linear layers' parameter sets too, after this layer's
  // activates: the host DMA is idle while what comes between runs, and Sets keeps them for
  // those layers. (Two: after the QKV projection, the output projection's and the
  // feed-forward's, whose reads from HBM pay its latency; a third's would wrap the slots'
  // cursor over the first's.)
  int64_t taken = 0;
  for (int j = NextDense(e.layer_), k = 0; j >= 0 && k < 2; j = NextDense(j), ++k) {
    const int64_t nt2 = Blocks(e.L(j).out.c, n);
    if (taken + nt2 >= e.cfg_.param_sets) break;
    taken += nt2;
    e.Sets(DenseSets(j), nt2);
  }
}

// The next linear layer after layer i, a linear layer (-1: none).
int TransformerOps::NextDense(int i) const {
  if (i < 0 || e.L(i).type != LayerType::kConv2d) return -1;
  for (int j = i + 1; j < static_cast<int>(e.m_.layers.size()); ++j)
    if (e.L(j).type == LayerType::kConv2d) return j == e.patch_conv_ ? -1 : j;
  return -1;
}

// The next linear layer after layer i, where only the vector unit's work
// (adds, LayerNorms, GELU) and views come between: its first tiles read now, so that the
// weight DMAs work while that runs (they are the decode step's bound).
void TransformerOps::Prefetch(int i) {
  for (int j = i + 1; j < static_cast<int>(e.m_.layers.size()); ++j) {
    const nn::Layer& l = e.L(j);
    if (l.type == LayerType::kReshape || l.type == LayerType::kTranspose ||
        l.type == LayerType::kSlice || l.type == LayerType::kAdd ||
        l.type == LayerType::kLayerNorm || l.type == LayerType::kGelu ||
        l.type == LayerType::kAddConstant)
      continue;
    if (l.type != LayerType::kConv2d || j == e.patch_conv_) return;
    const std::vector<uint16_t> w = DenseWeights(j);
    Product pr(w);
    pr.k = l.in.c;
    pr.c = l.out.c;
    pr.layer = j;
    // (the reads are layer j's work: its operation's, the operations between counted)
    int ahead = 0;
    for (int k = i + 1; k <= j; ++k) {
      const LayerType t = e.L(k).type;
      ahead += t != LayerType::kReshape && t != LayerType::kTranspose && t != LayerType::kSlice;
    }
    const size_t w0 = e.p_.program().words.size();
    ReadFirstTiles(FirstTiles(pr));
    e.prefetch_words_ = {w0, e.p_.program().words.size(), ahead};
    e.prefetched_ = j;
    return;
  }
}

// The output blocks go to the core's matrix units in turn, block j to unit j mod units, the
// units' tiles interleaved so that each streams while the others take their tiles.
void TransformerOps::Stream(const Product& pr, const TensorArea& y, const std::string& what) {
  const int64_t nt = Blocks(pr.c, n), ya = b * y.p;
  const int64_t units = std::max(1, e.cfg_.mxus_per_core);
  const int64_t chunk = e.cfg_.acc_depth_rows / 2;
  // Each chunk's activates wait for their products to drain: emitted after the next chunk's
  // products, they hold back nothing (each unit's accumulators take turns between halves).
  struct Waiting {
    int64_t acc = -1, ub = 0, rows = 0;
    uint64_t slot = 0, unit = 0;
  };
  std::vector<Waiting> waiting;
  // The layer's parameter sets in one read where the slots hold them all (each read pays the
  // weight memory's latency), else each block's when it comes.
  const bool all = pr.sets != 0 && nt < e.cfg_.param_sets;
  const uint64_t first_slot = all ? e.Sets(pr.sets, nt) : 0;
  const auto pending = [&] {
    for (const Waiting& w : waiting) {
      e.p_.SetUnit(w.unit);
      e.p_.Activate(static_cast<uint64_t>(w.acc), static_cast<uint64_t>(w.ub),
                    static_cast<uint64_t>(w.rows), w.slot, pr.relu, isa::Pool::kNone);
    }
    waiting.clear();
  };
  const auto groups = Groups(pr);
  // (the first tiles read by the linear layer before: Prefetch)
  bool read = e.prefetched_ != e.layer_;
  e.prefetched_ = -1;
  for (size_t g = 0; g < groups.size(); ++g) {
    const int64_t j0 = static_cast<int64_t>(g) * units;
    const auto& tiles = groups[g];
    const auto js = static_cast<int64_t>(tiles.size());
    std::vector<uint64_t> slots;
    for (int64_t u = 0; u < js; ++u)
      slots.push_back(all ? first_slot + static_cast<uint64_t>(j0 + u)
                          : e.Sets(pr.sets == 0 ? 0 : pr.sets + j0 + u, 1));
    int64_t out = 0;
    for (const RowRun& run : pr.runs)
      for (int64_t r0 = 0; r0 < run.rows; r0 += chunk) {
        if (r0 == 0 && run.to >= 0) out = run.to;
        const int64_t r = std::min(chunk, run.rows - r0);
        std::vector<int64_t> acc;
        for (int64_t u = 0; u < js; ++u) acc.push_back(e.AccRegion(r, what, static_cast<int>(u)));
        StreamTiles(pr, tiles, acc, run.first + r0 * run.stride, r, run.stride, read);
        // The next chunk's first tiles read now, ahead of this chunk's activates (which wait
        // for its products to drain): the weight DMAs go on while they wait.
        const bool last = r0 + chunk >= run.rows && &run == &pr.runs.back();
        read = last && g + 1 == groups.size();
        if (read)
          Prefetch(e.layer_);
        else
          ReadFirstTiles(last ? groups[g + 1] : tiles);
        pending();
        for (int64_t u = 0; u < js; ++u)
          waiting.push_back({acc[static_cast<size_t>(u)], y.base + (j0 + u) * ya + out, r,
                             slots[static_cast<size_t>(u)], static_cast<uint64_t>(u)});
        out += r;
      }
  }
  pending();
  e.p_.SetUnit(0);
  PrefetchSets();
  e.ReadNextInput();
}

// The rows a dense layer (a 1 x 1 convolution) reads of its input: every position of every
// image, or each image's run of positions (a slice of them, as ViT's class token).
std::vector<RowRun> TransformerOps::InputRuns(int i) const {
  const nn::Layer& l = e.L(i);
  const TensorArea& x = In(i);
  const int64_t q = int64_t{l.in.h} * l.in.w;
  const auto runs = RunsOf(e.PlaceOf(l.inputs[0]), 1, q, l.in.c, false);
  if (!runs || runs->ch0[0] != 0 || x.c != l.in.c) CheckNatural(i, 0);  // throws: another view
  const int64_t p0 = runs->pos0[0];
  if (e.at_.Cached()) {  // the positions computed, each where it is
    if (p0 != 0 || q != x.p)
      throw UsageError(fmt::format(
          "conv2d '{}' reads a slice of its input's positions, which a decoding program does "
          "not take (docs/transformers.md, \"Decoding on the chip\")",
          l.name));
    std::vector<RowRun> out;
    for (const auto& [at, count] : e.Spans(x)) out.push_back({at, count, 1, at});
    return out;
  }
  if (p0 == 0 && q == x.p) return {{0, b * x.p, 1}};
  if (q == 1) return {{p0, b, x.p}};
  std::vector<RowRun> out;
  for (int64_t img = 0; img < b; ++img) out.push_back({img * x.p + p0, q, 1});
  return out;
}

// A 1 x 1 convolution over positions (a transformer's linear layer), or the convolution of
// the input's patches (PatchInput): bias and ReLU (or ReLU6's bound) in the activate.
void TransformerOps::Dense(int i) {
  const nn::Layer& l = e.L(i);
  const bool patch = i == e.patch_conv_;
  if ((!patch && (l.kernel_h != 1 || l.kernel_w != 1 || l.stride != 1 || l.Padded())) ||
      (l.activation != nn::Activation::kNone && l.activation != nn::Activation::kRelu &&
       l.activation != nn::Activation::kRelu6))
    throw UsageError(fmt::format(
        "conv2d '{}': the chip's transformer program takes 1 x 1 convolutions of stride 1, "
        "and a first one over the input's patches (kernel = stride), with ReLU, ReLU6 or no "
        "activation (docs/transformers.md, \"On the chip\")",
        l.name));
  const TensorArea& x = In(i);
  const std::vector<uint16_t> w = DenseWeights(i);
  Product pr(w);
  pr.k = patch ? x.c : l.in.c;
  pr.c = l.out.c;
  pr.layer = i;
  pr.x0 = x.base;
  pr.block = b * x.p;
  pr.runs = patch ? std::vector<RowRun>{{0, b * x.p, 1}} : InputRuns(i);
  pr.sets = DenseSets(i);
  pr.relu = l.activation != nn::Activation::kNone;
  Stream(pr, Out(i), "conv2d '" + l.name + "'");
}

// A linear layer's parameter sets (its bias, ReLU6's bound), the first's index.
int64_t TransformerOps::DenseSets(int i) {
  const nn::Layer& l = e.L(i);
  std::vector<arith::Bf16Channel> ch;
  for (const float v : l.bias.data)
    ch.push_back(
        {arith::Fp32Canonical(arith::BitsOfFloat(v)),
         l.activation == nn::Activation::kRelu6 ? arith::BitsOfFloat(6.0f) : arith::kFp32Inf});
  return e.AddSets(ch);
}

// Layer i's weights in bfloat16 (none after a cached program: its tiles are that one's).
std::vector<uint16_t> TransformerOps::DenseWeights(int i) const {
  if (e.count_only_) return {};  // (no tile is formed: TilesOf)
  std::vector<uint16_t> w;
  if (e.after_) return w;
  w.reserve(e.L(i).weights.data.size());
  for (const float v : e.L(i).weights.data) w.push_back(arith::Bf16OfFp32(arith::BitsOfFloat(v)));
  return w;
}

// An embedding: each position's id (lane 0) in every lane (lane_max: the other lanes are +0),
// compared with each block of N ids (`equal`: a one-hot row, 1.0 or +0) and copied into
// bfloat16, and the one-hot rows times the vocabulary's rows on the array: each id's row.
void TransformerOps::Embedding(int i) {
  const nn::Layer& l = e.L(i);
  CheckNatural(i, 0);
  const TensorArea& x = In(i);
  const int64_t vocab = l.start, vb = Blocks(vocab, n);
  const std::vector<uint16_t> w = DenseWeights(i);
  for (const auto& [at, rows] : e.Spans(x)) {
    const int64_t s = Scratch(2 * rows + vb * rows, i), ids = s, hot = s + 2 * rows;
    e.Vector(VectorOp::kLaneMax, x.base + at, 0, ids, rows, kO32);
    for (int64_t k = 0; k < vb; ++k) {
      std::vector<uint32_t> iota(static_cast<size_t>(n));
      for (int64_t q = 0; q < n; ++q)
        iota[static_cast<size_t>(q)] = arith::BitsOfFloat(static_cast<float>(k * n + q));
      e.Vector(VectorOp::kEqual, ids, e.consts_.Row(iota), hot + k * rows, rows,
               kA32 | kB32 | kBcast);
    }
    Product pr(w);
    pr.k = vocab;
    pr.c = l.out.c;
    pr.x0 = hot;
    pr.block = rows;
    pr.runs = {{0, rows, 1, at}};
    pr.skip = false;
    pr.layer = i;
    Stream(pr, Out(i), "embedding '" + l.name + "'");
    e.ub_.Give(s, 2 * rows + vb * rows);
  }
}

// A prepend: each image's rows moved one position on (`copy`), the rows of the weights
// (bfloat16, as float32 constants) copied before them.
void TransformerOps::Prepend(int i) {
  const nn::Layer& l = e.L(i);
  CheckNatural(i, 0);
  if (e.at_.Cached())
    throw UsageError(
        fmt::format("prepend '{}' moves the positions, which a decoding program "
                    "does not take (docs/transformers.md)",
                    l.name));
  const TensorArea &x = In(i), &y = Out(i);
  for (int64_t k = 0; k < y.blocks; ++k) {
    std::vector<std::vector<uint32_t>> rows(static_cast<size_t>(l.start),
                                            std::vector<uint32_t>(static_cast<size_t>(n), 0));
    for (int64_t r = 0; r < l.start; ++r)
      for (int64_t q = 0; q < n && k * n + q < l.out.c; ++q)
        rows[static_cast<size_t>(r)][static_cast<size_t>(q)] = arith::Fp32OfBf16(arith::Bf16OfFp32(
            arith::BitsOfFloat(l.weights.data[static_cast<size_t>(r * l.out.c + k * n + q)])));
    const int64_t head = e.consts_.Run(rows);
    for (int64_t img = 0; img < b; ++img) {
      e.Vector(VectorOp::kCopy, head, 0, Row(y, k, img, 0), l.start, kA32);
      e.Vector(VectorOp::kCopy, Row(x, k, img, 0), 0, Row(y, k, img, l.start), x.p, 0);
    }
  }
}

// An add_constant: each image's rows plus the constant's (bfloat16, as float32 constants).
void TransformerOps::AddConstant(int i) {
  const nn::Layer& l = e.L(i);
  CheckNatural(i, 0);
  const TensorArea &x = In(i), &y = Out(i);
  std::vector<std::vector<std::vector<uint32_t>>> rows(static_cast<size_t>(y.blocks));
  for (int64_t k = 0; k < y.blocks; ++k) {
    rows[static_cast<size_t>(k)].assign(static_cast<size_t>(y.p),
                                        std::vector<uint32_t>(static_cast<size_t>(n), 0));
    for (int64_t r = 0; r < y.p; ++r)
      for (int64_t q = 0; q < n && k * n + q < y.c; ++q)
        rows[static_cast<size_t>(k)][static_cast<size_t>(r)][static_cast<size_t>(q)] =
            arith::Fp32OfBf16(arith::Bf16OfFp32(
                arith::BitsOfFloat(l.weights.data[static_cast<size_t>(r * y.c + k * n + q)])));
  }
  // The constant's rows kept once per period (a mask the same for every head: its tokens'
  // rows), added a period at a time.
  int64_t period = y.p;
  for (int64_t d = 1; d < y.p && period == y.p; ++d) {
    if (y.p % d != 0) continue;
    bool repeats = true;
    for (size_t k = 0; k < rows.size() && repeats; ++k)
      for (int64_t r = d; r < y.p && repeats; ++r)
        repeats = rows[k][static_cast<size_t>(r)] == rows[k][static_cast<size_t>(r % d)];
    if (repeats) period = d;
  }
  for (int64_t k = 0; k < y.blocks; ++k) {
    auto& all = rows[static_cast<size_t>(k)];
    const int64_t c = e.consts_.Run({all.begin(), all.begin() + period});
    for (const auto& [at, count] : e.Spans(y))
      for (int64_t r = at; r < at + count;) {  // a period's rows at a time
        const int64_t q = r % y.p % period, len = std::min(period - q, at + count - r);
        e.Vector(VectorOp::kAdd, Row(x, k, 0, r), c + 2 * q, Row(y, k, 0, r), len, kB32);
        r += len;
      }
  }
}

// An add of two tensors of the same layout on the vector unit (arith::Bf16ResidualAdd).
void TransformerOps::Add(int i) {
  const nn::Layer& l = e.L(i);
  if (l.activation != nn::Activation::kNone)
    throw UsageError(
        fmt::format("add '{}': the chip's transformer program adds without an "
                    "activation",
                    l.name));
  CheckNatural(i, 0);
  CheckNatural(i, 1);
  const TensorArea &x = In(i, 0), &z = In(i, 1), &y = Out(i);
  if (!e.at_.Cached()) return e.Vector(VectorOp::kAdd, x.base, z.base, y.base, y.Rows(b), 0);
  for (int64_t k = 0; k < y.blocks; ++k)
    for (const auto& [at, count] : e.Spans(y))
      e.Vector(VectorOp::kAdd, Row(x, k, 0, at), Row(z, k, 0, at), Row(y, k, 0, at), count, 0);
}

// Rows [r0, r0 + rows) of every block of x (float32 scratch from s): a position's values in
// rows of N lanes, each row's lane tree, the rows' results combined in order.
void TransformerOps::NormalizeRows(int i, const TensorArea& x, const TensorArea& y, int64_t r0,
                                   int64_t rows, int64_t s) {
  const nn::Layer& l = e.L(i);
  const int64_t nb = x.blocks, all = b * x.p, f = 2 * rows;
  const int64_t sum = s, tmp = s + f, tmp2 = s + 2 * f, d = s + 3 * f;  // d: nb runs of f
  const auto xb = [&](int64_t k) { return x.base + k * all + r0; };
  const int64_t inv_c = e.consts_.Splat(static_cast<float>(1.0 / static_cast<double>(l.in.c)));
  for (int64_t k = 0; k < nb; ++k) {
    e.Vector(VectorOp::kLaneSum, xb(k), 0, k == 0 ? sum : tmp, rows, kO32);
    if (k > 0) e.Vector(VectorOp::kAdd, sum, tmp, sum, rows, kA32 | kB32 | kO32);
  }
  e.Vector(VectorOp::kMul, sum, inv_c, sum, rows, kA32 | kB32 | kO32 | kBcast);
  for (int64_t k = 0; k < nb; ++k) {
    e.Vector(VectorOp::kSub, xb(k), sum, d + k * f, rows, kB32 | kO32);
    const int64_t lanes = l.in.c - k * n;
    if (lanes < n) {  // the lanes past c out of the variance
      std::vector<uint32_t> mask(static_cast<size_t>(n), 0);
      std::fill_n(mask.begin(), lanes, arith::kFp32One);
      e.Vector(VectorOp::kMul, d + k * f, e.consts_.Row(mask), d + k * f, rows,
               kA32 | kB32 | kO32 | kBcast);
    }
  }
  for (int64_t k = 0; k < nb; ++k) {  // the mean's rows now free for the variance
    e.Vector(VectorOp::kMul, d + k * f, d + k * f, tmp, rows, kA32 | kB32 | kO32);
    e.Vector(VectorOp::kLaneSum, tmp, 0, k == 0 ? sum : tmp2, rows, kA32 | kO32);
    if (k > 0) e.Vector(VectorOp::kAdd, sum, tmp2, sum, rows, kA32 | kB32 | kO32);
  }
  e.Vector(VectorOp::kMul, sum, inv_c, sum, rows, kA32 | kB32 | kO32 | kBcast);
  e.Vector(VectorOp::kAdd, sum, e.consts_.Splat(l.epsilon), sum, rows, kA32 | kB32 | kO32 | kBcast);
  e.Vector(VectorOp::kRsqrt, sum, 0, sum, rows, kA32 | kO32);
  for (int64_t k = 0; k < nb; ++k) {
    std::vector<uint32_t> gamma(static_cast<size_t>(n), 0), beta(gamma);
    for (int64_t q = 0; q < n && k * n + q < l.in.c; ++q) {
      const auto at = static_cast<size_t>(k * n + q);
      gamma[static_cast<size_t>(q)] = arith::Fp32Canonical(arith::BitsOfFloat(l.weights.data[at]));
      beta[static_cast<size_t>(q)] = arith::Fp32Canonical(arith::BitsOfFloat(l.bias.data[at]));
    }
    e.Vector(VectorOp::kMul, d + k * f, sum, d + k * f, rows, kA32 | kB32 | kO32);
    e.Vector(VectorOp::kMul, d + k * f, e.consts_.Row(gamma), d + k * f, rows,
             kA32 | kB32 | kO32 | kBcast);
    e.Vector(VectorOp::kAdd, d + k * f, e.consts_.Row(beta), y.base + k * all + r0, rows,
             kA32 | kB32 | kBcast);
  }
}

void TransformerOps::LayerNorm(int i) {
  CheckNatural(i, 0);
  const TensorArea &x = In(i), &y = Out(i);
  const int64_t all = b * x.p, piece = Piece(all, 3 + x.blocks);
  const int64_t s = Scratch(2 * piece * (3 + x.blocks), i);
  for (const auto& [at, count] : e.Spans(x))
    for (int64_t r0 = at; r0 < at + count; r0 += piece)
      NormalizeRows(i, x, y, r0, std::min(piece, at + count - r0), s);
  e.ub_.Give(s, 2 * piece * (3 + x.blocks));
}

// Rows [r0, r0 + rows) of every block: m = the rows' lane_max trees combined by max, e =
// exp(x - m), the lane_sum trees added in order, y = e x recip(sum). A last block of fewer
// than N channels is read with -infinity past them (`pad`, a float32 row: +0, then -inf).
void TransformerOps::SoftmaxRows(const TensorArea& x, const TensorArea& y, int64_t r0, int64_t rows,
                                 int64_t s, int64_t pad) {
  const int64_t nb = x.blocks, all = b * x.p, f = 2 * rows;
  const int64_t mx = s, tmp = s + f, padded = s + 2 * f, ex = s + 3 * f;  // ex: nb runs of f
  std::vector<std::pair<int64_t, int>> src;  // each block's rows and their float32 flag
  for (int64_t k = 0; k < nb; ++k) src.push_back({x.base + k * all + r0, 0});
  if (pad >= 0) {
    e.Vector(VectorOp::kAdd, src.back().first, pad, padded, rows, kB32 | kO32 | kBcast);
    src.back() = {padded, kA32};
  }
  for (int64_t k = 0; k < nb; ++k) {
    const auto [at, a32] = src[static_cast<size_t>(k)];
    e.Vector(VectorOp::kLaneMax, at, 0, k == 0 ? mx : tmp, rows, a32 | kO32);
    if (k > 0) e.Vector(VectorOp::kMax, mx, tmp, mx, rows, kA32 | kB32 | kO32);
  }
  for (int64_t k = 0; k < nb; ++k) {
    const auto [at, a32] = src[static_cast<size_t>(k)];
    e.Vector(VectorOp::kSub, at, mx, ex + k * f, rows, a32 | kB32 | kO32);
    e.Vector(VectorOp::kExp, ex + k * f, 0, ex + k * f, rows, kA32 | kO32);
  }
  for (int64_t k = 0; k < nb; ++k) {
    e.Vector(VectorOp::kLaneSum, ex + k * f, 0, k == 0 ? mx : tmp, rows, kA32 | kO32);
    if (k > 0) e.Vector(VectorOp::kAdd, mx, tmp, mx, rows, kA32 | kB32 | kO32);
  }
  e.Vector(VectorOp::kRecip, mx, 0, mx, rows, kA32 | kO32);
  for (int64_t k = 0; k < nb; ++k)
    e.Vector(VectorOp::kMul, ex + k * f, mx, y.base + k * all + r0, rows, kA32 | kB32);
}

void TransformerOps::Softmax(int i) {
  CheckNatural(i, 0);
  const TensorArea &x = In(i), &y = Out(i);
  int64_t pad = -1;
  if (const int64_t lanes = x.c % n; lanes != 0) {
    std::vector<uint32_t> row(static_cast<size_t>(n), arith::kFp32Inf | 0x80000000u);
    std::fill_n(row.begin(), lanes, 0u);
    pad = e.consts_.Row(row);
  }
  const int64_t per = 3 + x.blocks;
  if (e.at_.Cached()) {  // the positions' rows gathered, one softmax over them all
    const int64_t rows = Gathered(x), piece = Piece(rows / x.blocks, per);
    const int64_t s = Scratch(rows + 2 * piece * per, i);
    const TensorArea c = Gather(x, s);
    for (int64_t r0 = 0; r0 < b * c.p; r0 += piece)
      SoftmaxRows(c, c, r0, std::min(piece, b * c.p - r0), s + rows, pad);
    Scatter(c, y);
    return e.ub_.Give(s, rows + 2 * piece * per);
  }
  // Pieces of whole heads' rows where a head's fit one: each piece waits for its heads'
  // scores only.
  const int64_t all = b * x.p, most = Piece(all, per), head = HeadRows(i);
  const int64_t piece = head < most ? most - most % head : most;
  const int64_t s = Scratch(2 * piece * per, i);
  for (int64_t r0 = 0; r0 < all; r0 += piece)
    SoftmaxRows(x, y, r0, std::min(piece, all - r0), s, pad);
  e.ub_.Give(s, 2 * piece * per);
}

int64_t TransformerOps::Gathered(const TensorArea& x) const {
  int64_t rows = 0;
  for (const auto& span : e.Spans(x)) rows += span.second;
  return rows * x.blocks;
}

// A cached program's rows of every block of x copied into rows from s, the blocks one after
// another: the tensor of the positions it computes, as an area.
TensorArea TransformerOps::Gather(const TensorArea& x, int64_t s) {
  TensorArea c = x;
  c.base = s;
  c.p = Gathered(x) / x.blocks / b;
  int64_t r = s;
  for (int64_t k = 0; k < x.blocks; ++k)
    for (const auto& [at, count] : e.Spans(x)) {
      e.Vector(VectorOp::kCopy, Row(x, k, 0, at), 0, r, count, 0);
      r += count;
    }
  return c;
}

// The gathered rows c back where they lie in y (Gather's inverse).
void TransformerOps::Scatter(const TensorArea& c, const TensorArea& y) {
  int64_t r = c.base;
  for (int64_t k = 0; k < y.blocks; ++k)
    for (const auto& [at, count] : e.Spans(y)) {
      e.Vector(VectorOp::kCopy, r, 0, Row(y, k, 0, at), count, 0);
      r += count;
    }
}

// GELU of `rows` rows from x into y (float32 scratch from s), the bfloat16 rule's steps
// (Bf16RuleErf), each one instruction with a constant as b.
void TransformerOps::GeluRows(int64_t x, int64_t y, int64_t rows, int64_t s) {
  const int64_t f = 2 * rows, t = s, z = s + f, u = s + 2 * f, q = s + 3 * f, w = s + 4 * f;
  const int kF = kA32 | kB32 | kO32, kC = kF | kBcast;
  const auto c = [&](float v) { return e.consts_.Splat(v); };
  e.Vector(VectorOp::kMul, x, c(nn::ops::kInvRoot2), t, rows, kB32 | kO32 | kBcast);
  e.Vector(VectorOp::kMul, t, c(-1.0f), z, rows, kC);
  e.Vector(VectorOp::kMax, t, z, z, rows, kF);
  e.Vector(VectorOp::kMul, z, c(nn::ops::kErfP), u, rows, kC);
  e.Vector(VectorOp::kAdd, u, c(1.0f), u, rows, kC);
  e.Vector(VectorOp::kRecip, u, 0, u, rows, kA32 | kO32);
  e.Vector(VectorOp::kMul, u, c(nn::ops::kErfA[4]), q, rows, kC);
  for (int k = 3; k >= 0; --k) {
    e.Vector(VectorOp::kAdd, q, c(nn::ops::kErfA[k]), q, rows, kC);
    e.Vector(VectorOp::kMul, q, u, q, rows, kF);
  }
  e.Vector(VectorOp::kMul, z, z, w, rows, kF);
  e.Vector(VectorOp::kMul, w, c(-1.0f), w, rows, kC);
  e.Vector(VectorOp::kExp, w, 0, w, rows, kA32 | kO32);
  e.Vector(VectorOp::kMul, q, w, q, rows, kF);
  e.Vector(VectorOp::kSub, q, c(1.0f), q, rows, kC);   // -erf
  e.Vector(VectorOp::kMul, q, c(-1.0f), z, rows, kC);  // erf
  e.Vector(VectorOp::kLess, t, c(0.0f), u, rows, kC);  // x < 0
  e.Vector(VectorOp::kSelect, u, q, z, rows, kF);      // erf, its sign put back
  e.Vector(VectorOp::kAdd, z, c(1.0f), z, rows, kC);
  e.Vector(VectorOp::kMul, z, x, z, rows, kA32 | kO32);
  e.Vector(VectorOp::kMul, z, c(0.5f), y, rows, kA32 | kB32 | kBcast);
}

void TransformerOps::Gelu(int i) {
  CheckNatural(i, 0);
  const TensorArea &x = In(i), &y = Out(i);
  if (e.at_.Cached()) {  // the positions' rows gathered, GELU over them in place
    const int64_t rows = Gathered(x), piece = Piece(rows, 5), s = Scratch(rows + 10 * piece, i);
    const TensorArea c = Gather(x, s);
    for (int64_t r0 = 0; r0 < rows; r0 += piece)
      GeluRows(s + r0, s + r0, std::min(piece, rows - r0), s + rows);
    Scatter(c, y);
    return e.ub_.Give(s, rows + 10 * piece);
  }
  const int64_t all = x.Rows(b), piece = Piece(all, 5), s = Scratch(10 * piece, i);
  for (int64_t r0 = 0; r0 < all; r0 += piece)
    GeluRows(x.base + r0, y.base + r0, std::min(piece, all - r0), s);
  e.ub_.Give(s, 10 * piece);
}

// The matmul's output times its scale (where not 1), in place: the vector unit's multiply of
// the rounded products (the bfloat16 rule's). A whole pass scales a head's rows at a time
// (every block's in turn), so that what reads the first heads' (the softmax) need not wait
// for the last heads' products.
void TransformerOps::Scale(int i, const TensorArea& o) {
  const float scale = e.L(i).scale;
  if (scale == 1.0f) return;
  if (!e.at_.Cached()) {
    const int64_t all = b * o.p, head = HeadRows(i);
    for (int64_t r0 = 0; r0 < all; r0 += head)
      for (int64_t k = 0; k < o.blocks; ++k)
        e.Vector(VectorOp::kMul, o.base + k * all + r0, e.consts_.Splat(scale),
                 o.base + k * all + r0, std::min(head, all - r0), kB32 | kBcast);
    return;
  }
  for (int64_t k = 0; k < o.blocks; ++k)
    for (const auto& [at, count] : e.Spans(o))
      e.Vector(VectorOp::kMul, Row(o, k, 0, at), e.consts_.Splat(scale), Row(o, k, 0, at), count,
               kB32 | kBcast);
}

// A product of two computed tensors, image by image and head by head (the layer's first
// axis): each N x N tile of the second operand is moved into staging rows through the array
// (a tile of ones that moves the head's lanes to the lanes they multiply, or land in, and
// leaves zeros elsewhere: exact), loaded from there into the weight FIFO (transposed where
// its rows are the product's columns), and the first operand's rows stream through it, K
// tile after tile into float32 sums (arith::Bf16Gemm's order: the moved zeros add +0). Heads
// whose outputs share rows (attention's context, heads side by side in a position's lanes)
// add into the same accumulators before one activate.

void TransformerOps::MatMul(int i) {
  const nn::Layer& l = e.L(i);
  MatMulPlan mp;
  mp.heads = l.in.h;
  mp.m = l.in.w;
  mp.k = l.in.c;
  mp.cols = l.out.c;
  const nn::Shape3 sb = e.m_.OutputOf(l.inputs[1]);
  const Placement& pb = e.PlaceOf(l.inputs[1]);
  auto a = RunsOf(e.PlaceOf(l.inputs[0]), mp.heads, mp.m, mp.k, false);
  auto bv = RunsOf(pb, mp.heads, sb.w, sb.c, false);
  if (!bv) bv = RunsOf(pb, mp.heads, sb.w, sb.c, true);
  auto o = RunsOf(e.PlaceOf(i), mp.heads, mp.m, mp.cols, false);
  if (!a || !bv || !o)
    throw UsageError(
        fmt::format("matmul '{}': an operand is not a head's run of positions and lanes, which the "
                    "chip's transformer program reads (docs/transformers.md, \"On the chip\")",
                    l.name));
  mp.a = *a;
  mp.b = *bv;
  mp.o = *o;
  mp.k_on_pos = (!mp.b.rows_on_channels) != l.transpose_b;
  if (e.at_.Cached() && mp.m != e.InputArea().p)
    throw UsageError(fmt::format(
        "matmul '{}' has {} rows, not the model's {} positions: a decoding program computes "
        "some positions of each head's rows (docs/transformers.md, \"Decoding on the chip\")",
        l.name, mp.m, e.InputArea().p));
  MatMulHeads(i, mp);
  Scale(i, Out(i));
}

// Tile (ab, ob) of head h's second operand into staging rows [at, at + N): its rows' head
// lanes moved through the array by a tile of ones, zeros in the other lanes (where they stay
// in their lanes, kept by a mask on the vector unit instead: x 1 and x 0, as exact); the rows that
// this tile does not write and the last one did are zeroed (all of them at the first use).
void TransformerOps::StageTile(int i, const MatMulPlan& mp, int64_t img, int64_t h, int64_t ab,
                               int64_t ob, const TileRange& r, int64_t at,
                               std::pair<int64_t, int64_t>* written) {
  const auto hh = static_cast<size_t>(h);
  const int64_t ka0 = mp.a.ch0[hh], oc0 = mp.o.ch0[hh], bp0 = mp.b.pos0[hh], bc0 = mp.b.ch0[hh];
  const int64_t p_lo = mp.k_on_pos ? r.k0 : r.j0, p_hi = mp.k_on_pos ? r.k1 : r.j1;
  const int64_t c_lo = mp.k_on_pos ? r.j0 : r.k0, c_hi = mp.k_on_pos ? r.j1 : r.k1;
  const int64_t row0 = mp.k_on_pos ? ka0 + r.k0 - ab * n : oc0 + r.j0 - ob * n;
  const int64_t to = mp.k_on_pos ? oc0 + r.j0 - ob * n : ka0 + r.k0 - ab * n;
  const int64_t bb = (bc0 + c_lo) / n, rows = p_hi - p_lo;
  if ((bc0 + c_hi - 1) / n != bb)
    throw UsageError(fmt::format(
        "matmul '{}': a head's lanes of its second operand cross a block of {} lanes, which "
        "the chip's transformer program does not move yet",
        e.L(i).name, n));
  if (written->first < 0) {  // its first use: the rows the tile leaves out
    if (row0 > 0) Zero(at, row0);
    if (row0 + rows < n) Zero(at + row0 + rows, n - row0 - rows);
  } else {
    const int64_t lo = written->first, hi = written->second;
    if (std::min(hi, row0) > lo) Zero(at + lo, std::min(hi, row0) - lo);
    if (hi > std::max(lo, row0 + rows))
      Zero(at + std::max(lo, row0 + rows), hi - std::max(lo, row0 + rows));
  }
  *written = {row0, row0 + rows};
  const int64_t from = (bc0 + c_lo) % n, source = Row(In(i, 1), bb, img, bp0 + p_lo);
  if (LaneMove(mp, h, ab, ob, r).first <
      0) {  // no lane moves: the head's lanes kept by a mask on the vector unit
    std::vector<uint32_t> mask(static_cast<size_t>(n), 0);
    std::fill_n(mask.begin() + from, c_hi - c_lo, arith::kFp32One);
    e.Vector(VectorOp::kMul, source, e.consts_.Row(mask), at + row0, rows, kB32 | kBcast);
    return;
  }
  const int64_t half = e.cfg_.acc_depth_rows / 2, slots = std::max<int64_t>(1, half / n);
  const int64_t acc = half + (shift_turn++ % slots) * n;
  e.p_.ReadWeights(e.ShiftTile(from, to, c_hi - c_lo), 1);
  e.p_.Matmul(static_cast<uint64_t>(source), static_cast<uint64_t>(acc),
              static_cast<uint64_t>(rows), true, isa::Acc::kOverwrite);
  e.p_.Activate(static_cast<uint64_t>(acc), static_cast<uint64_t>(at + row0),
                static_cast<uint64_t>(rows), 0, false, isa::Pool::kNone);
}

void TransformerOps::Zero(int64_t row, int64_t rows) { e.Zero(row, rows); }

std::pair<int64_t, int64_t> TransformerOps::LaneMove(const MatMulPlan& mp, int64_t h, int64_t ab,
                                                     int64_t ob, const TileRange& r) const {
  const auto hh = static_cast<size_t>(h);
  const int64_t c_lo = mp.k_on_pos ? r.j0 : r.k0;
  const int64_t to = mp.k_on_pos ? mp.o.ch0[hh] + r.j0 - ob * n : mp.a.ch0[hh] + r.k0 - ab * n;
  const int64_t from = (mp.b.ch0[hh] + c_lo) % n;
  return from == to ? std::pair<int64_t, int64_t>{-1, -1} : std::pair<int64_t, int64_t>{from, to};
}

// A matmul's heads, image by image, on the core's matrix units (MatMul): the heads whose
// outputs share rows (a group: attention's context) add into one unit's accumulators, the
// groups go to the units in turn; a head whose rows and output blocks need more than a
// quarter of the accumulators runs in chunks of rows (its tiles loaded again for each).
class HeadProducts {
 public:
  HeadProducts(TransformerOps& o, int i, const MatMulPlan& mp) : o_(o), e_(o.e), i_(i), mp_(mp) {}
  void Run();

 private:
  struct Item {
    int64_t img = 0, h = 0;
    std::vector<int64_t> abs, obs;  // the head's K blocks and output blocks
    size_t base = 0;                // its staging tiles' first (staging alternates)
    uint64_t unit = 0;
  };
  // Accumulators that rows [m0, m0 + rows) of a group's heads add into, until activated.
  struct Open {
    int64_t img = -1, pos0 = -1, acc = 0;
    uint64_t unit = 0;
    std::vector<int64_t> obs;
    std::vector<bool> taken;
    int64_t m0 = 0, rows = 0;
  };
  std::vector<int64_t> Blocks(int64_t c0, int64_t count) const {
    std::vector<int64_t> v;
    for (int64_t q = c0 / o_.n; q <= (c0 + count - 1) / o_.n; ++q) v.push_back(q);
    return v;
  }
  void Items();
  void SkipMasked(Item* it);
  bool masked_ = false;  // the scores' only reader is a causal mask (CausallyMasked)
  void OpenGroup(const Item& it, int64_t m0, int64_t rows);
  TileRange Range(const Item& it, int64_t ab, int64_t ob) const;
  bool Moves(const Item& it) const;
  bool SharesRows(size_t k) const;
  void Stage(const Item& it);
  void Flush(Open* g);
  void Head(size_t k);
  bool Pipelines() const;
  std::pair<int64_t, int64_t> RowsOf() const;
  void Loads(const Item& it);
  void Products(size_t k);
  void Pipelined();

  TransformerOps& o_;
  TransformerEmitter& e_;
  const int i_;
  const MatMulPlan& mp_;
  std::vector<Item> items_;
  size_t most_ = 1;  // staging tiles of a head
  int64_t st_ = 0, quarter_ = 0;
  std::vector<std::pair<int64_t, int64_t>> written_;
  std::vector<int> turns_;
  Open open_, done_;
  std::deque<Open> waiting_;  // a pipelined program's groups not yet activated
};

// A group of heads opened at item it: rows [m0, m0 + rows) of its output blocks, in its
// unit's next region of accumulators.
void HeadProducts::OpenGroup(const Item& it, int64_t m0, int64_t rows) {
  open_ = {it.img,
           mp_.o.pos0[static_cast<size_t>(it.h)],
           (turns_[it.unit] ^= 1) * quarter_,
           it.unit,
           it.obs,
           std::vector<bool>(it.obs.size()),
           m0,
           rows};
}

// A cached program's attention scores (the keys' positions along the output's lanes, from
// lane 0 of each head's rows) read only by a causal mask (CausallyMasked): the output blocks
// whose positions all lie after the last position computed are masked, so they are not
// computed: their rows are zeroed instead (+0 plus the mask's -infinity is what a computed
// score plus it is).
void HeadProducts::SkipMasked(Item* it) {
  const Positions& at = e_.At();
  const auto hh = static_cast<size_t>(it->h);
  if (!at.Cached() || mp_.k_on_pos || mp_.cols != e_.InputArea().p || mp_.o.ch0[hh] != 0 ||
      !masked_)
    return;
  std::vector<int64_t> kept;
  for (const int64_t ob : it->obs) {
    if (ob * o_.n <= at.end - 1) {
      kept.push_back(ob);
      continue;
    }
    o_.Zero(o_.Row(o_.Out(i_), ob, it->img, mp_.o.pos0[hh] + at.first), at.end - at.first);
  }
  it->obs = kept;
}

// Whether layer i's only reader adds -infinity to every value after its row's position (of
// each run of T rows): a causal mask.
bool TransformerOps::CausallyMasked(int i) const {
  const std::vector<int> readers = e.m_.Consumers()[static_cast<size_t>(i)];
  if (readers.size() != 1 || e.L(readers[0]).type != LayerType::kAddConstant) return false;
  const nn::Layer& mask = e.L(readers[0]);
  const int64_t t = e.InputArea().p, cols = mask.out.c;
  if (cols != t || mask.weights.data.empty()) return false;
  const auto rows = static_cast<int64_t>(mask.weights.data.size()) / cols;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = r % t + 1; c < cols; ++c) {
      const float w = mask.weights.data[static_cast<size_t>(r * cols + c)];
      if (!(std::isinf(w) && w < 0)) return false;
    }
  return true;
}

void HeadProducts::Items() {
  masked_ = e_.At().Cached() && o_.CausallyMasked(i_);
  const int units = std::max(1, e_.cfg_.mxus_per_core);
  int groups = -1;
  for (int64_t img = 0; img < o_.b; ++img)
    for (int64_t h = 0; h < mp_.heads; ++h) {
      const auto hh = static_cast<size_t>(h);
      Item it{img, h, Blocks(mp_.a.ch0[hh], mp_.k), Blocks(mp_.o.ch0[hh], mp_.cols), 0, 0};
      SkipMasked(&it);
      const Item* last = items_.empty() ? nullptr : &items_.back();
      if (!last || last->img != img || mp_.o.pos0[static_cast<size_t>(last->h)] != mp_.o.pos0[hh] ||
          last->obs != it.obs)
        ++groups;
      it.unit = static_cast<uint64_t>(groups % units);
      most_ = std::max(most_, it.abs.size() * it.obs.size());
      items_.push_back(it);
    }
}

TileRange HeadProducts::Range(const Item& it, int64_t ab, int64_t ob) const {
  const int64_t n = o_.n, ka0 = mp_.a.ch0[static_cast<size_t>(it.h)],
                oc0 = mp_.o.ch0[static_cast<size_t>(it.h)];
  return TileRange{std::max<int64_t>(0, ab * n - ka0), std::min(mp_.k, (ab + 1) * n - ka0),
                   std::max<int64_t>(0, ob * n - oc0), std::min(mp_.cols, (ob + 1) * n - oc0)};
}

// Whether an item's staging moves lanes through the array (its tiles go through the FIFO).
bool HeadProducts::Moves(const Item& it) const {
  for (const int64_t ab : it.abs)
    for (const int64_t ob : it.obs)
      if (o_.LaneMove(mp_, it.h, ab, ob, Range(it, ab, ob)).first >= 0) return true;
  return false;
}

// Whether item k's outputs share rows with another head's (a group of several heads).
bool HeadProducts::SharesRows(size_t k) const {
  const auto same = [&](size_t j) {
    return items_[j].img == items_[k].img && mp_.o.pos0[static_cast<size_t>(items_[j].h)] ==
                                                 mp_.o.pos0[static_cast<size_t>(items_[k].h)];
  };
  return (k > 0 && same(k - 1)) || (k + 1 < items_.size() && same(k + 1));
}

void HeadProducts::Stage(const Item& it) {
  e_.p_.SetUnit(it.unit);
  for (size_t qa = 0; qa < it.abs.size(); ++qa)
    for (size_t qo = 0; qo < it.obs.size(); ++qo) {
      const size_t t = it.base + qa * it.obs.size() + qo;
      o_.StageTile(i_, mp_, it.img, it.h, it.abs[qa], it.obs[qo], Range(it, it.abs[qa], it.obs[qo]),
                   st_ + static_cast<int64_t>(t) * o_.n, &written_[t]);
    }
}

// A group's activates wait for its products to drain: emitted after the next group's
// products, they hold back nothing (each unit's accumulators take turns between two regions).
void HeadProducts::Flush(Open* g) {
  e_.p_.SetUnit(g->unit);
  for (size_t q = 0; q < g->obs.size() && g->img >= 0; ++q)
    e_.p_.Activate(static_cast<uint64_t>(g->acc + static_cast<int64_t>(q) * g->rows),
                   static_cast<uint64_t>(o_.Row(o_.Out(i_), g->obs[q], g->img, g->pos0 + g->m0)),
                   static_cast<uint64_t>(g->rows), 0, false, isa::Pool::kNone);
  g->img = -1;
}

// Item k's loads and products, chunk by chunk of its rows. The next head's staging goes
// between this head's loads and its products where it takes no tile from the FIFO and this
// head's tiles fit it with room: the loads then run back to back beside the products.
void HeadProducts::Head(size_t k) {
  const Item& it = items_[k];
  const auto hh = static_cast<size_t>(it.h);
  const auto obs = static_cast<int64_t>(it.obs.size());
  // The rows computed: every one, or a cached program's positions.
  const auto [lo, hi] = RowsOf();
  const int64_t mc = std::min(hi - lo, quarter_ / obs);
  if (mc < 1 || (mc < hi - lo && SharesRows(k)))
    throw UsageError(fmt::format(
        "matmul '{}' needs {} accumulator rows for a group of heads; config '{}' has {} (a "
        "quarter of acc_depth_rows)",
        e_.L(i_).name, mp_.m * obs, e_.cfg_.name, quarter_));
  const bool chunked = mc < hi - lo;
  const size_t tiles = it.abs.size() * it.obs.size();
  const bool ahead = !chunked && k + 1 < items_.size() && !Moves(items_[k + 1]) &&
                     tiles + 1 < static_cast<size_t>(e_.cfg_.weight_fifo_tiles);
  for (int64_t m0 = lo; m0 < hi; m0 += mc) {
    const int64_t rows = std::min(mc, hi - m0);
    if (chunked || open_.img != it.img || open_.pos0 != mp_.o.pos0[hh] || open_.obs != it.obs) {
      Flush(&done_);
      done_ = open_;
      OpenGroup(it, m0, rows);
    }
    e_.p_.SetUnit(it.unit);
    const auto product = [&](size_t qo, size_t qa) {
      e_.p_.Matmul(
          static_cast<uint64_t>(o_.Row(o_.In(i_, 0), it.abs[qa], it.img, mp_.a.pos0[hh] + m0)),
          static_cast<uint64_t>(open_.acc + static_cast<int64_t>(qo) * rows),
          static_cast<uint64_t>(rows), true, isa::AddIf(open_.taken[qo]));
      open_.taken[qo] = true;
    };
    for (size_t qo = 0; qo < it.obs.size(); ++qo)
      for (size_t qa = 0; qa < it.abs.size(); ++qa) {
        const size_t t = it.base + qa * it.obs.size() + qo;
        e_.p_.LoadWeights(static_cast<uint64_t>(st_ + static_cast<int64_t>(t) * o_.n), 1,
                          !mp_.k_on_pos);
        if (!ahead) product(qo, qa);
      }
    if (ahead) Stage(items_[k + 1]);
    e_.p_.SetUnit(it.unit);
    for (size_t qo = 0; qo < it.obs.size() && ahead; ++qo)
      for (size_t qa = 0; qa < it.abs.size(); ++qa) product(qo, qa);
    Flush(&done_);
  }
  if (!ahead && k + 1 < items_.size()) Stage(items_[k + 1]);
}

// The rows of each head the program computes: every one, or a cached program's positions.
std::pair<int64_t, int64_t> HeadProducts::RowsOf() const {
  const Positions& at = e_.At();
  return at.Cached() ? std::pair<int64_t, int64_t>{at.first, at.end}
                     : std::pair<int64_t, int64_t>{0, mp_.m};
}

// Whether the heads run pipelined (Pipelined): each head's tiles fitting the FIFO with room,
// its rows in one chunk, its lanes kept in place.
bool HeadProducts::Pipelines() const {
  for (const Item& it : items_)
    if (it.abs.size() * it.obs.size() + 1 >= static_cast<size_t>(e_.cfg_.weight_fifo_tiles) ||
        Moves(it) ||
        (RowsOf().second - RowsOf().first) * static_cast<int64_t>(it.obs.size()) >
            e_.cfg_.acc_depth_rows / 4)
      return false;
  return true;
}

// Item it's staged tiles into its unit's FIFO, consecutive ones in one load_weights.
void HeadProducts::Loads(const Item& it) {
  e_.p_.SetUnit(it.unit);
  size_t run0 = 0, run = 0;
  const auto load = [&] {
    if (run > 0)
      e_.p_.LoadWeights(static_cast<uint64_t>(st_ + static_cast<int64_t>(run0) * o_.n), run,
                        !mp_.k_on_pos);
    run = 0;
  };
  for (size_t qo = 0; qo < it.obs.size(); ++qo)
    for (size_t qa = 0; qa < it.abs.size(); ++qa) {
      const size_t t = it.base + qa * it.obs.size() + qo;
      if (run > 0 && t != run0 + run) load();
      if (run++ == 0) run0 = t;
    }
  load();
}

// Item k's products of the program's rows, in its group's accumulators.
void HeadProducts::Products(size_t k) {
  const Item& it = items_[k];
  const auto hh = static_cast<size_t>(it.h);
  const int64_t m0 = RowsOf().first, rows = RowsOf().second - RowsOf().first;
  if (open_.img != it.img || open_.pos0 != mp_.o.pos0[hh] || open_.obs != it.obs) {
    // A group's activates wait for a unit's turn of groups more (each unit's accumulators
    // take turns between two regions: a unit has at most two groups not yet activated).
    waiting_.push_back(open_);
    while (waiting_.size() > static_cast<size_t>(std::max(1, e_.cfg_.mxus_per_core))) {
      Flush(&waiting_.front());
      waiting_.pop_front();
    }
    OpenGroup(it, m0, rows);
  }
  e_.p_.SetUnit(it.unit);
  for (size_t qo = 0; qo < it.obs.size(); ++qo)
    for (size_t qa = 0; qa < it.abs.size(); ++qa) {
      e_.p_.Matmul(
          static_cast<uint64_t>(o_.Row(o_.In(i_, 0), it.abs[qa], it.img, mp_.a.pos0[hh] + m0)),
          static_cast<uint64_t>(open_.acc + static_cast<int64_t>(qo) * rows),
          static_cast<uint64_t>(rows), true, isa::AddIf(open_.taken[qo]));
      open_.taken[qo] = true;
    }
}

// The heads, pipelined: their staging and loads in turn across the units (each
// unit's in order), each head's products once the loads of `units` more have been issued
// (the program is in order, and a product waiting for its tiles holds every instruction
// behind it): the units' loads run side by side.
void HeadProducts::Pipelined() {
  const auto units = static_cast<size_t>(std::max(1, e_.cfg_.mxus_per_core));
  std::vector<std::vector<size_t>> of(units);
  for (size_t k = 0; k < items_.size(); ++k) of[items_[k].unit].push_back(k);
  std::vector<size_t> order;
  for (size_t r = 0; order.size() < items_.size(); ++r)
    for (size_t u = 0; u < units; ++u)
      if (r < of[u].size()) order.push_back(of[u][r]);
  std::vector<size_t> loaded(items_.size(), SIZE_MAX);
  size_t next = 0;  // the next head's products
  for (size_t s = 0; s < order.size(); ++s) {
    Stage(items_[order[s]]);
    Loads(items_[order[s]]);
    loaded[order[s]] = s;
    while (next < items_.size() && loaded[next] != SIZE_MAX && loaded[next] + units <= s)
      Products(next++);
  }
  while (next < items_.size()) Products(next++);
  for (Open& g : waiting_) Flush(&g);
  waiting_.clear();
}

void HeadProducts::Run() {
  const auto units = static_cast<size_t>(std::max(1, e_.cfg_.mxus_per_core));
  Items();
  const bool pipelined = Pipelines();
  const size_t buffers = pipelined ? 2 * units : 2;  // staging buffers, taken in turn
  for (size_t k = 0; k < items_.size(); ++k) items_[k].base = (k % buffers) * most_;
  const auto rows = static_cast<int64_t>(buffers * most_) * o_.n;
  st_ = o_.Scratch(rows, i_);
  written_.assign(buffers * most_, {-1, -1});
  quarter_ = e_.cfg_.acc_depth_rows / 4;
  turns_.assign(units, 0);
  if (pipelined) {
    Pipelined();
  } else {
    Stage(items_.front());
    for (size_t k = 0; k < items_.size(); ++k) Head(k);
  }
  Flush(&done_);
  Flush(&open_);
  e_.p_.SetUnit(0);
  e_.ub_.Give(st_, rows);
}

void TransformerOps::MatMulHeads(int i, const MatMulPlan& mp) { HeadProducts(*this, i, mp).Run(); }

void TransformerEmitter::Layer(int i) {
  const nn::Layer& l = L(i);
  if (l.type == LayerType::kReshape || l.type == LayerType::kTranspose ||
      l.type == LayerType::kSlice)
    return;
  if (group_ == 0) ops_.push_back(i);
  layer_ = i;
  const auto op = std::find(ops_.begin(), ops_.end(), i) - ops_.begin();
  TensorArea& out = areas_[static_cast<size_t>(places_[static_cast<size_t>(i)].area)];
  if (out.base < 0) Put(places_[static_cast<size_t>(i)].area, l.name);
  TransformerOps ops{*this};
  switch (l.type) {
    case LayerType::kConv2d:
      ops.Dense(i);
      break;
    case LayerType::kAdd:
      ops.Add(i);
      break;
    case LayerType::kLayerNorm:
      ops.LayerNorm(i);
      break;
    case LayerType::kSoftmax:
      ops.Softmax(i);
      break;
    case LayerType::kGelu:
      ops.Gelu(i);
      break;
    case LayerType::kMatMul:
      ops.MatMul(i);
      break;
    case LayerType::kEmbedding:
      ops.Embedding(i);
      break;
    case LayerType::kPrepend:
      ops.Prepend(i);
      break;
    case LayerType::kAddConstant:
      ops.AddConstant(i);
      break;
    default:
      throw UsageError(fmt::format(
          "{} '{}' is not among the operations the chip's transformer program runs yet "
          "(1 x 1 conv2d, a first conv2d over patches, add, matmul, softmax, layer_norm, "
          "gelu, embedding, prepend, add_constant, and the reshapes, transposes and slices "
          "between them; docs/transformers.md, \"On the chip\")",
          l.TypeName(), l.name));
  }
  op_of_.resize(p_.program().words.size(), static_cast<int32_t>(op));
  const auto [w0, w1, ahead] = prefetch_words_;
  for (size_t w = w0; w < w1; ++w) op_of_[w] = static_cast<int32_t>(op + ahead);
  prefetch_words_ = {};
  Free(i);
}

// Area `area` into the buffer: where the program before put it (a cached program's), and
// a first cached program's kept tensor zeroed (the positions it does not compute read as +0
// by the products of the programs after it: masked, they add +0).
void TransformerEmitter::Put(int area, const std::string& name) {
  TensorArea& a = areas_[static_cast<size_t>(area)];
  a.base = ub_.Take(a.Rows(batch_), fmt::format("layer '{}'", name));
  if (taken_[static_cast<size_t>(area)] < 0) taken_[static_cast<size_t>(area)] = a.base;
  if (after_ && after_->bases[static_cast<size_t>(area)] != a.base)
    throw std::logic_error(fmt::format("TransformerEmitter: '{}' put at row {}, not {}", name,
                                       a.base, after_->bases[static_cast<size_t>(area)]));
  if (a.kept && !after_) Zero(a.base, a.Rows(batch_));
}

void TransformerEmitter::Free(int i) {
  for (TensorArea& a : areas_) {
    // (an area nothing reads is given back after the layer that wrote it; with read_ahead_
    // the input's rows are the inputs' and stay taken)
    if (a.base < 0 || a.output || a.kept || a.last_reader > i) continue;
    if (read_ahead_ && &a == &areas_.front()) continue;
    ub_.Give(a.base, a.Rows(batch_));
    a.base = -2;  // freed
  }
}

void TransformerEmitter::Group() {
  // A whole pass takes rows next fit where it can, so that each layer's scratch is not the
  // rows the layer before just gave back (the schedule then overlaps them); a cached
  // program's tensors lie where its prefill's do, first fit in both.
  ub_ = BufferRows(consts_.Base(), next_fit_ && !at_.Cached());
  for (TensorArea& a : areas_) a.base = -1;
  // A cached program's keys and values first: their rows are never another tensor's, nor
  // scratch, in any of the programs (what the programs before left there is read).
  for (size_t k = 0; k < areas_.size(); ++k)
    if (areas_[k].kept) Put(static_cast<int>(k), "the keys and values");
  TensorArea& in = areas_.front();
  const int64_t most = isa::ProgramBuilder::kMaxLength, rows = in.Rows(batch_);
  int64_t read = 0;  // rows the group before read already
  if (read_ahead_) {
    inputs_at_ = ub_.Take(2 * rows, "the inputs of two groups (read ahead)");
    in.base = inputs_at_ + group_ % 2 * rows;
    read = std::exchange(ahead_rows_, 0);
  } else {
    Put(0, "the batch's input");
  }
  for (const auto& [at, count] : Runs(in))
    ReadInput(group_, std::max(at, read), at + count, in.base);
  op_of_.resize(p_.program().words.size(), -1);
  for (size_t i = 0; i < m_.layers.size(); ++i) Layer(static_cast<int>(i));
  const TensorArea& y = OutputArea();
  const int64_t out = y.Rows(batch_);
  for (const auto& [at, count] : Runs(y))
    for (int64_t r = at; r < at + count; r += most)
      p_.WriteHost(static_cast<uint64_t>(y.base + r),
                   OutputAddr() + static_cast<uint64_t>((group_ * out + r) * RowBytes()),
                   static_cast<uint64_t>(std::min(most, at + count - r)));
}

void TransformerEmitter::ReadNextInput() {
  if (!read_ahead_ || group_ + 1 >= groups_) return;
  const int64_t rows = areas_.front().Rows(batch_);
  const int64_t end = std::min(ahead_rows_ + ahead_piece_, rows);
  ReadInput(group_ + 1, ahead_rows_, end, inputs_at_ + (group_ + 1) % 2 * rows);
  ahead_rows_ = std::max(ahead_rows_, end);
}

void TransformerEmitter::ReadInput(int64_t g, int64_t first, int64_t end, int64_t at) {
  const int64_t most = isa::ProgramBuilder::kMaxLength, rows = areas_.front().Rows(batch_);
  for (int64_t r = first; r < end; r += most)
    p_.ReadHost(static_cast<uint64_t>((g * rows + r) * RowBytes()), static_cast<uint64_t>(at + r),
                static_cast<uint64_t>(std::min(most, end - r)));
}

std::vector<std::pair<int64_t, int64_t>> TransformerEmitter::Runs(const TensorArea& a) const {
  if (!at_.Cached()) return {{0, a.Rows(batch_)}};
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (int64_t k = 0; k < a.blocks; ++k)
    for (const auto& [at, count] : Spans(a)) runs.push_back({k * batch_ * a.p + at, count});
  return runs;
}

void TransformerEmitter::Run() {
  const auto& out = places_.back();
  const TensorArea& oa = areas_[static_cast<size_t>(out.area)];
  for (size_t x = 0; x < out.pos.size(); ++x)
    if (out.pos[x] != static_cast<int64_t>(x) / oa.c || out.ch[x] != static_cast<int64_t>(x) % oa.c)
      throw UsageError("the model's output is a view the chip program does not write yet");
  p_.SetFormat(true);
  op_of_.clear();
  const int64_t most = isa::ProgramBuilder::kMaxLength;
  p_.ReadHbmParams(params_at_, 0, 1);  // the identity set
  // The constants: read from weight memory (a Cloud TPU's HBM) at the start, counted by the
  // first emission (its rows are 0), at the front of the weight image (after a cached
  // program: in the buffer already).
  if (consts_.Base() < cfg_.ub_depth_rows && !after_) {
    const int64_t rows = cfg_.ub_depth_rows - consts_.Base();
    for (int64_t r = 0; r < rows; r += most)
      p_.ReadHbm(static_cast<uint64_t>(r * RowBytes()), static_cast<uint64_t>(consts_.Base() + r),
                 static_cast<uint64_t>(std::min(most, rows - r)));
  }
  op_of_.resize(p_.program().words.size(), -1);
  if (read_ahead_) {  // the next group's input in a piece after each linear layer
    read_ahead_ = groups_ > 1 && !at_.Cached();
    const auto dense = std::count_if(m_.layers.begin(), m_.layers.end(), [](const nn::Layer& l) {
      return l.type == LayerType::kConv2d || l.type == LayerType::kEmbedding;
    });
    const int64_t rows = areas_.front().Rows(batch_);
    ahead_piece_ = (rows + dense - 1) / std::max<int64_t>(dense, 1);
  }
  for (group_ = 0; group_ < groups_; ++group_) Group();
  p_.Halt();
  if (after_ && consts_.Rows() != after_->consts.Rows())
    throw std::logic_error("TransformerEmitter: a decoding program's constants differ");
  if (after_) return op_of_.resize(p_.program().words.size(), -1);  // (nothing to write)
  if (!count_only_) {  // the parameter sets where ReserveParams kept them
    if (params_reserved_ != static_cast<int64_t>(params_.size()))
      throw std::logic_error("TransformerEmitter: the parameter sets differ from those counted");
    std::copy(params_.begin(), params_.end(),
              weights_.begin() + static_cast<std::ptrdiff_t>(params_at_));
  }
  const std::vector<uint8_t> constants = consts_.Bytes();
  std::copy(constants.begin(),
            constants.begin() + static_cast<std::ptrdiff_t>(std::min(
                                    constants.size(), static_cast<size_t>(constants_bytes_))),
            weights_.begin());
  op_of_.resize(p_.program().words.size(), -1);
}

}  // namespace tpu::compiler
