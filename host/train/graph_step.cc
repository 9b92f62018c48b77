// See graph_step.h. Every product runs in chunks of at most the accumulator rows set aside
// for it, and every value goes through the unified buffer between the operations, in the
// order the reference computes it; the interlocks keep the order (docs/timing.md, "Issue").
#include "host/train/graph_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "host/common/errors.h"
#include "host/compiler/unit_schedule.h"
#include "host/engine/chip_engine.h"
#include "host/isa/program_builder.h"
#include "host/report/program_bound.h"
#include "host/train/graph_reference.h"
#include "host/train/step_emit.h"
#include "host/train/step_image.h"
#include "host/train/step_shell.h"

namespace tpu::train {
// Its own namespace: the library's unity build puts this file beside the other steps, whose
// helpers have the same names.
namespace graph_step {
namespace {

using hw::VectorOp;
using nn::Layer;
using nn::LayerType;
using shell::ParamRows;
using shell::TilesOf;

// A layer's rows: its output and its gradient, a pixel a row (lanes its channels), the
// core's images one after the other (`rows` of them, up to whole chunks of N: `padded`); a
// map of more than N channels (a multiple of N) in `cb` channel blocks of N lanes, block j's
// rows j padded rows after the first's (Block);
// a weighted layer's operand, a convolution's receptive fields F or a dense layer's input
// X (kb blocks of `padded` rows, the bias lane's 1 from parameter set `set`); a pooling's
// tile (kh kw identities times 1/(kh kw); a global one's, the whole map's).
struct LayerRows {
  int source = 0;                   // the layer whose rows these are (a flatten's: its input's; -1)
  int h = 1, w = 1, c = 1, cb = 1;  // the map (a flatten's: its input's), its channel blocks
  int param = -1, set = 0;
  int64_t pixels = 0, rows = 0, padded = 0;  // an image's pixels; the core's; rounded up
  int64_t out = 0, grad = 0, f = 0, tile = 0;
  // A concatenation's tiles: input k's identity shifted to its lanes at shift + 2 k N, and
  // back at shift + (2 k + 1) N. A depthwise convolution's: 1 where its gradient's rows are
  // off the diagonal, the gradient's Values rows at `mask`.
  int64_t shift = 0, mask = 0;
  // A convolution's W'' (ConvInputBlock), each input block's FlippedRows apart: the layout's
  // `flipped`, or with several passes rows of its own, made in the first pass for them all
  // (or its home in the layout's area in HBM: Layout::hbm_made).
  int64_t flipped = 0, flipped_home = -1;
  // A batch normalization's: its constants (chip::BatchNormConstants, a float32 row each),
  // the batch's mean, variance and 1 / sqrt(variance + epsilon) (float32 rows), its running
  // statistics (the layout's kept[kept], kept[kept + 1]); x^ goes to f.
  int64_t bn_const = 0, bn_stats = 0;
  int kept = -1;
  int64_t Block(int64_t j) const { return j * padded; }
  // Output block j (the logits' blocks are the whole batch's, out_stride apart).
  int64_t out_stride = 0;
  int64_t OutBlock(int64_t j) const { return j * (out_stride > 0 ? out_stride : padded); }
  int64_t f_hbm = -1;  // with the layout's hbm_f, its F's first row in a core's area
  // With the layout's hbm_maps, its output's, gradient's and F's (x^'s) first rows in a
  // core's area of maps in HBM (-1: none), and its F's rows (kb blocks, or x^'s cb).
  int64_t out_home = -1, grad_home = -1, f_home = -1, f_rows = 0;
};

// What layer k's rows are (a flatten has none of its own: its input's).
int RowsSource(const nn::Model& m, int k) {
  while (k != nn::kModelInput && m.layers[static_cast<size_t>(k)].type == LayerType::kFlatten)
    k = m.layers[static_cast<size_t>(k)].inputs[0];
  return k;
}
nn::Shape3 RowsShape(const nn::Model& m, int k) {
  k = RowsSource(m, k);
  return k == nn::kModelInput ? m.input : m.OutputOf(k);
}

// The channel blocks of a map of c channels, and the lanes of each (docs/training.md,
// "Channel blocks").
int BlocksOf(int c, int n) { return static_cast<int>(TilesOf(c, n)); }
int BlockLanes(int c, int n) { return std::min(c, n); }

// Unified-buffer rows (bf16 rows of N lanes), host rows (2N bytes), accumulator rows: the
// fields step_shell.h names.
// A core's b images go through the layers in `passes` passes of mb images each (the layers'
// rows hold mb images; the batch buffers and the results hold b); a later pass's weight
// gradients go into pass_g's rows and a vector add into the first's.
struct Layout {
  int n = 0, b = 0, cores = 1, core = 0, sets = 1, mb = 0, passes = 1, pass = 0;
  int mxus = 1;               // a core's matrix units (StepEmitter::SideUnit where several)
  bool keep_flipped = false;  // each convolution's W'' in rows of its own (MakeLayout)
  int64_t pass_g = 0;
  int64_t bp = 0, img_rows = 0;
  int64_t id = 0, zero = 0, pad = 0, inv_batch = 0, consts = 0;
  int64_t six = -1;    // a row of 6s, where a layer has ReLU6 (its mask's)
  int relu6_set = -1;  // the parameter set that bounds by 6 (ReLU6's activate)
  std::vector<ParamRows> param;
  std::vector<shell::KeptRows> kept;
  std::vector<LayerRows> layer;
  std::vector<int64_t> bias_lane = {-1};  // each parameter set's
  int64_t state_begin = 0, state_end = 0;
  // The state in HBM (step_shell.h's StateRows), where it does not fit beside the pass.
  bool hbm_state = false;
  uint64_t hbm_state_addr = 0, hbm_grad_addr = 0;
  // With hbm_f too, each layer's F in HBM (its rows from LayerRows::f_hbm in a core's area
  // of f_rows rows from hbm_f_addr) between its forward pass and its weight gradient, and
  // in the buffer in rows every layer's in turn (FOut, FIn).
  bool hbm_f = false;
  uint64_t hbm_f_addr = 0;
  // With hbm_maps (the state in HBM too), every layer's output, gradient and F in HBM
  // (LayerRows' homes, a core's area of maps_rows rows from hbm_maps_addr), and in the
  // buffer only in the rows of the layer that runs and its inputs, from `window` (StepRows).
  bool hbm_maps = false;
  // With hbm_maps and several passes: a batch buffer holds a pass's images (PassImages).
  bool pass_images = false;
  uint64_t hbm_maps_addr = 0;
  int64_t maps_rows = 0, window = 0, window_rows = 0;
  // With the state in HBM and several passes (and not keep_flipped), what the first pass
  // makes from the weights for them all: each layer's bfloat16 tile (from ParamRows::g_hbm)
  // and each convolution's W'' (from LayerRows::flipped_home), in a core's area of
  // made_rows rows from hbm_made_addr (LayerTile, EmitConvBackward).
  bool hbm_made = false;
  uint64_t hbm_made_addr = 0;
  int64_t made_rows = 0;
  int64_t f_piece_rows = 0;  // with hbm_maps, the most a convolution's F takes (FPieces)
  size_t program_words = engine::kMaxProgramWords;  // a part of the step's most (StepProgram)
  int64_t f_rows = 0, f_shared = 0;
  int64_t stage = 0;
  int64_t scalars = 0, x0 = 0, y = 0, scalars_next = 0, x0_next = 0, y_next = 0;
  int64_t activations = 0;  // from here to end: what the init program zeroes
  int64_t loss = 0, mean = 0, logits = 0, sm = 0, mx = 0, sum = 0, recip = 0, pick = 0;
  int64_t dzt = 0, scratch = 0, mask_rows = 0, flipped = 0, contrib = 0, tmp = 0, tmp2 = 0;
  int64_t tap = 0, taken = 0, shares = 0;  // a max pooling's gradient: a tap's, the mask, D_t
  // Batch normalization's float32 scratch: a layer's rows, and kBnRows single rows. With the
  // state in HBM, a batch normalization's gamma and beta (bn_w) and running statistics
  // (bn_kept) in rows every one's in turn (StageBatchNorm).
  int64_t bn_tmp = 0, bn_rows = 0, bn_w = 0, bn_kept = 0;
  int64_t other = 0, end = 0, update_rows = 0, acc_rows = 0, acc_t = 0, acc_g = 0;
  int64_t g_tiles = 0;  // the K-tiles dWᵀ's accumulators hold: a wider layer's in groups
  int64_t h_params = 0, h_zero = 0, h_bias = 0, h_batch = 0, h_batch_next = 0, h_out = 0,
          h_grads = 0;
  int Sets() const { return sets; }
  int64_t BiasLane(int s) const { return bias_lane[static_cast<size_t>(s)]; }
  float Upper(int s) const {
    return s == relu6_set ? 6.0f : std::numeric_limits<float>::infinity();
  }
  int class_blocks = 1;  // the blocks of N lanes the classes take
  int64_t BatchRows() const { return 4 + b * img_rows + int64_t{b} * class_blocks; }
  // The losses, their mean, the logits (each block of classes bp rows after the one before).
  int64_t OutRows() const { return 2 * int64_t{b} + 2 + (class_blocks - 1) * bp + b; }
  int64_t GradRows() const {
    int64_t rows = 0;
    for (const ParamRows& r : param) rows += r.Values(n);
    return rows;
  }
  // The rows of what layer input `k` (a layer, not the model's input) produced.
  const LayerRows& In(int k) const { return layer[static_cast<size_t>(k)]; }
};

using Emitter = shell::StepEmitter<Layout>;

bool Relu6(const Layer& l) { return l.activation == nn::Activation::kRelu6; }
// Whether the layer's activate takes the ReLU (ReLU6 too, bounded by its parameter set).
bool Relu(const Layer& l) { return l.activation == nn::Activation::kRelu || Relu6(l); }
// The parameter set of the layer's activate that bounds ReLU6's output (0: none does).
int SetOf(const Layout& a, const Layer& l) { return Relu6(l) ? a.relu6_set : 0; }
bool HasRelu6(const nn::Model& m) { return std::any_of(m.layers.begin(), m.layers.end(), Relu6); }
bool IsBatchNorm(const Layer& l) { return l.type == LayerType::kBatchNorm; }

// Batch normalization's single float32 rows (two buffer rows each, from bn_rows): the sums
// of dy and dy x^ over m, gamma inv, the running statistics' terms, a row_sum's piece.
enum BnRow : int64_t { kMeanDy, kMeanDyX, kGammaInv, kTerm, kTerm2, kPiece, kBnRows };
int64_t BnRowAt(const Layout& a, BnRow r) { return a.bn_rows + 2 * r; }

// How a map of more than 15 x 15 pixels is read whole (a dense layer's X, a global pooling):
// each image's pixels (in order) in chunks of `a` x `b` pixels, one window each (a kernel of at
// most 15 x 15), the values of a chunk filling whole K-tiles so that the next starts a K-tile; the
// last chunk, the rest, `last_a` x `last_b`. None (a = 0) where no such chunks exist.
struct Chunks {
  int a = 0, b = 0, last_a = 0, last_b = 0;
  int64_t Pixels() const { return int64_t{a} * b; }
};

// A factor pair of `pixels`, each at most 15: (0, 0) if none.
std::pair<int, int> Factors(int64_t pixels) {
  for (int a = 15; a >= 1; --a)
    if (pixels % a == 0 && pixels / a <= 15) return {a, static_cast<int>(pixels / a)};
  return {0, 0};
}

// The largest chunks for a map of `pixels` pixels of c channels on an array of n.
Chunks ChunksOf(int64_t pixels, int c, int n) {
  for (int64_t size = 225; size >= 1; --size) {
    const auto [a, b] = Factors(size);
    if (a == 0 || size * c % n || size > pixels) continue;
    const int64_t rest = pixels % size ? pixels % size : size;
    const auto [la, lb] = Factors(rest);
    if (la) return {a, b, la, lb};
  }
  return {};
}

bool FitsAWindow(int h, int w) { return h <= 15 && w <= 15; }

// The rows of an average pooling's window (its K-tiles' values): a tap's channels (a
// block's) a tap (the whole map's, for a global one; a chunk's, for a global one of a map
// more than 15 x 15: ChunksOf).
int64_t PoolWindowRows(const Layer& l, int n) {
  if (l.global_pool && !FitsAWindow(l.in.h, l.in.w))
    return ChunksOf(int64_t{l.in.h} * l.in.w, l.in.c, n).Pixels() * l.in.c;
  return int64_t{l.pool_h} * l.pool_w * BlockLanes(l.in.c, n);
}
int64_t PoolKTiles(const Layer& l, int n) { return TilesOf(PoolWindowRows(l, n), n); }

// Whether each K-tile of an average pooling's window is one tap of N channels (a map of N
// channels, or of channel blocks, in one window): all go through one tile.
bool TapATile(const Layer& l, int n) {
  return BlockLanes(l.in.c, n) == n && !(l.global_pool && !FitsAWindow(l.in.h, l.in.w));
}

// Rows an average pooling's tile takes: an identity a tap of its window (PoolWindowRows), each
// times 1/(kh kw); one where each tap is a K-tile (TapATile).
int64_t PoolTileRows(const Layer& l, int n) { return TapATile(l, n) ? n : PoolWindowRows(l, n); }

// The parameter set that adds the bias lane's 1 in lane `lane`: the layers whose bias lanes
// are alike share one (a set is its lane alone; ReLU6's bounds have a set of their own).
int BiasSet(Layout* a, int64_t lane) {
  for (int s = 1; s < a->sets; ++s)
    if (s != a->relu6_set && a->bias_lane[static_cast<size_t>(s)] == lane) return s;
  a->bias_lane.push_back(lane);
  return a->sets++;
}

// The lanes of the bias lanes' 1s of m's convolutions and dense layers on an array of n (one
// parameter set each: BiasSet).
std::set<int64_t> BiasLanes(const nn::Model& m, int n) {
  std::set<int64_t> lanes;
  for (const Layer& l : m.layers) {
    if (!l.HasWeights() || IsBatchNorm(l)) continue;
    const int64_t ins =
        l.type == LayerType::kConv2d ? int64_t{l.kernel_h} * l.kernel_w * l.in.c : l.in.Size();
    lanes.insert(ins % n);
  }
  return lanes;
}

// Layer i's rows (the last's output is the logits, its gradient dL/dlogits).
// `take` gives buffer rows, `map` the rows of its output, gradient and F (with hbm_maps, in
// its area in HBM).
void PlaceLayer(const nn::Model& m, size_t i, Layout* a,
                const std::function<int64_t(int64_t)>& take,
                const std::function<int64_t(int64_t)>& map) {
  const Layer& l = m.layers[i];
  LayerRows& r = a->layer[i];
  if (l.type == LayerType::kFlatten) {
    if (l.inputs[0] != nn::kModelInput) {
      r = a->layer[static_cast<size_t>(l.inputs[0])];
      return;
    }
    r = LayerRows();  // the images': the dense layer reading them takes them from the batch
    r.source = nn::kModelInput;
    return;
  }
  const LayerRows constants = r;  // MakeLayout's
  r = LayerRows();
  r.tile = constants.tile;
  r.shift = constants.shift;
  r.mask = constants.mask;
  r.bn_const = constants.bn_const;
  r.source = static_cast<int>(i);
  r.h = l.out.h;
  r.w = l.out.w;
  r.c = l.out.c;
  r.cb = BlocksOf(l.out.c, a->n);
  r.pixels = int64_t{l.out.h} * l.out.w;
  r.rows = a->mb * r.pixels;
  r.padded = TilesOf(r.rows, a->n) * a->n;
  r.out = i + 1 == m.layers.size() ? a->logits : map(r.cb * r.padded);
  if (i + 1 == m.layers.size()) r.out_stride = a->bp;
  r.grad = map(r.cb * r.padded);
  if (!l.HasWeights()) return;
  for (size_t p = 0; p < a->param.size(); ++p)
    if (a->param[p].layer == static_cast<int>(i)) r.param = static_cast<int>(p);
  const ParamRows& pr = a->param[static_cast<size_t>(r.param)];
  if (IsBatchNorm(l)) {  // on the vector unit: no parameter set of the activation unit
    r.f_rows = r.cb * r.padded;
    r.f = map(r.f_rows);                    // x^
    r.bn_stats = take(10 * int64_t{r.cb});  // each block's BnBlock rows
    r.kept = 0;
    for (size_t j = 0; j < i; ++j) r.kept += static_cast<int>(m.layers[j].state.size());
    return;
  }
  r.f_rows = pr.kb * r.padded;
  if (a->hbm_f) {  // the shared rows (MakeLayout's), its own in HBM
    r.f = a->f_shared;
    r.f_hbm = a->f_rows;
    a->f_rows += r.f_rows;
  } else {
    r.f = map(r.f_rows);
  }
  r.set = BiasSet(a, pr.ins % a->n);
}

// The rows of a convolution's W'' of one input block (ConvInputBlock).
int64_t FlippedRows(const Layer& l, int n) {
  return TilesOf(int64_t{l.kernel_h} * l.kernel_w * l.out.c, n) * n;
}

// The scratch rows of the backward pass and the update, after the layers'.
void PlaceScratch(const nn::Model& m, const Optimizer& opt, Layout* a,
                  const std::function<int64_t(int64_t)>& take) {
  const int n = a->n;
  int64_t most = 0, blocks = 0, flipped = 0, values = 0, pooled = 0, shares = 0;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    most = std::max(most, a->layer[i].padded);
    blocks = std::max(blocks, a->layer[i].cb * a->layer[i].padded);
    const Layer& l = m.layers[i];
    if (l.type == LayerType::kConv2d)
      flipped = std::max(flipped, int64_t{l.kernel_h} * l.kernel_w * l.out.c);
    if (l.type != LayerType::kMaxPool2d) continue;
    pooled = std::max(pooled, a->layer[i].padded);
    shares = std::max(shares, int64_t{l.pool_h} * l.pool_w * a->layer[i].padded);
  }
  for (int64_t* p : {&a->mx, &a->sum, &a->recip, &a->pick}) *p = take(2 * int64_t{a->mb});
  a->sm = take(2 * int64_t{a->mb} * a->class_blocks);
  for (const ParamRows& r : a->param) values = std::max(values, r.Values(n));
  // With the state in HBM, one layer's gradient (in the shared tile's rows: GradientOut) and
  // dWᵀ's group at a time (GradHbm).
  const int64_t g = a->hbm_state ? a->param.front().wb : 0;
  const int64_t gt = a->hbm_state ? take(a->g_tiles * n) : 0;
  int64_t g_hbm = 0;
  for (ParamRows& r : a->param) {
    // One after the other: the cores' gradient sum takes them whole.
    r.g = a->hbm_state ? g : take(r.Values(n));
    r.g_hbm = g_hbm;
    g_hbm += r.Values(n);
  }
  for (ParamRows& r : a->param) r.gt = a->hbm_state ? gt : take(r.Values(n));
  a->dzt = take(2 * int64_t{n});  // two: StepEmitter::TakeTurns
  a->scratch = take(a->mask_rows = std::min<int64_t>(most, 8 * int64_t{n}));
  a->flipped = take(TilesOf(flipped, n) * n);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const Layer& l = m.layers[i];
    if (l.type != LayerType::kConv2d || l.inputs[0] == nn::kModelInput) continue;
    a->layer[i].flipped =
        a->keep_flipped ? take(a->In(l.inputs[0]).cb * FlippedRows(l, n)) : a->flipped;
  }
  a->contrib = take(a->hbm_maps ? 0 : blocks);  // with hbm_maps in the window (StepRows)
  if (a->hbm_maps) pooled = shares = 0;         // in the window (StepRows)
  a->tap = take(pooled);
  a->taken = take(pooled);
  a->shares = take(shares);
  a->update_rows = std::min<int64_t>(values, 2 * int64_t{n});
  a->tmp = take(2 * a->update_rows);
  a->tmp2 = take(2 * a->update_rows);
  if (a->hbm_state) a->stage = take(2 * shell::StageParts(opt.Slots()) * 2 * a->update_rows);
  int64_t bn = 0, bn_values = 0, bn_blocks = 0;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    if (!IsBatchNorm(m.layers[i])) continue;
    bn = std::max(bn, a->layer[i].rows);
    bn_values = std::max(bn_values, a->param[static_cast<size_t>(a->layer[i].param)].Values(n));
    bn_blocks = std::max<int64_t>(bn_blocks, a->layer[i].cb);
  }
  a->bn_tmp = take(a->hbm_maps ? 0 : 2 * bn);  // with hbm_maps in the window (StepRows)
  a->bn_rows = take(bn > 0 ? 2 * kBnRows : 0);
  a->bn_w = take(a->hbm_state ? 2 * bn_values : 0);
  a->bn_kept = take(a->hbm_state ? 2 * 2 * bn_blocks : 0);
  if (a->hbm_state) return;  // the sums are in HBM
  if (a->cores > 1) a->other = take(a->GradRows());
  if (a->passes > 1) a->pass_g = take(a->GradRows());
}

// Whether a weighted layer's inputs fill whole K-tiles, so that the bias lane's 1 is a
// K-tile of its own, past the window's field: that tile's rows are zeros through a zero
// tile (N rows from `zero`), the 1 from the parameter set.
bool FieldFillsItsTiles(const nn::Model& m, int n) {
  for (const Layer& l : m.layers) {
    const int64_t ins =
        l.type == LayerType::kConv2d ? int64_t{l.kernel_h} * l.kernel_w * l.in.c : l.in.Size();
    if (l.HasWeights() && ins % n == 0) return true;
  }
  return false;
}

// How many of a map's `in` rows (or columns) lie under some window of `kernel` every
// `stride` (1 or 2) padded by `pad`, `out` windows a side: the first ones, as many as the
// gradient's window, which walks them over the windows' map padded by kernel - 1 - pad
// (dilated for stride 2), can start inside it for.
int Covered(int in, int out, int kernel, int stride, int pad) {
  return std::min(in, (stride == 2 ? 2 * (out - 1) : out - 1) + kernel - pad);
}

// Whether a layer's gradient reaches only some of its input's pixels (Covered), the rest
// +0 from the zero tile's rows (IntoInput).
bool LeavesPixelsOut(const nn::Model& m) {
  for (const Layer& l : m.layers) {
    const bool pool = l.IsPool() && !l.global_pool;
    if ((!pool && l.type != LayerType::kConv2d) || l.inputs[0] == nn::kModelInput) continue;
    const int stride = pool ? l.pool_stride : l.stride;
    if (Covered(l.in.h, l.out.h, pool ? l.pool_h : l.kernel_h, stride, l.pad_top) < l.in.h ||
        Covered(l.in.w, l.out.w, pool ? l.pool_w : l.kernel_w, stride, l.pad_left) < l.in.w)
      return true;
  }
  return false;
}

// The rows of the largest F (or X) of a pass of a.mb images of m's weighted layers.
int64_t LargestF(const nn::Model& m, const Layout& a) {
  int64_t most = 0;
  for (const ParamRows& p : a.param) {
    const Layer& l = m.layers[static_cast<size_t>(p.layer)];
    if (IsBatchNorm(l)) continue;
    most = std::max(most, p.kb * TilesOf(a.mb * int64_t{l.out.h} * l.out.w, a.n) * a.n);
  }
  return most;
}

// Whether a dense layer's input gradient reads past its tile: each pixel's transposed loads
// take N rows from its first (EmitDenseBackward), and the last pixel's run past the tile's
// rows where its inputs leave less than N rows of the last K-tile. The tile rows are followed
// by the last layer's tile or the batch's float32 scalars, whose low halves may read as
// infinities or NaNs in bfloat16 (and +0 times those is not +0): N rows of zeros after them.
bool ReadsPastItsTile(const nn::Model& m, const ParamRows& p, int n) {
  const Layer& l = m.layers[static_cast<size_t>(p.layer)];
  if (l.type != LayerType::kDense || RowsSource(m, l.inputs[0]) == nn::kModelInput) return false;
  const nn::Shape3 in = RowsShape(m, l.inputs[0]);
  const int64_t pixels = int64_t{in.h} * in.w, cb = BlocksOf(in.c, n);
  return (pixels - 1) * in.c + cb * n > p.kb * n;
}
bool ReadsPastItsTile(const nn::Model& m, const Layout& a) {
  return std::any_of(a.param.begin(), a.param.end(),
                     [&](const ParamRows& p) { return ReadsPastItsTile(m, p, a.n); });
}

// With hbm_maps, the rows of layer r's tile (its gradient's too) in its step's window, and N
// more (zeroed) where its input gradient reads past it: none without weights.
int64_t TileRows(const nn::Model& m, const Layout& a, const LayerRows& r) {
  if (r.param < 0) return 0;
  const ParamRows& p = a.param[static_cast<size_t>(r.param)];
  return p.Values(a.n) + (ReadsPastItsTile(m, p, a.n) ? a.n : 0);
}

// The layers whose rows the step of layer i (its forward pass, its backward pass) reads or
// writes: i's, and its inputs' (a flatten's: what it flattens; not the images).
std::vector<int> Involved(const nn::Model& m, size_t i) {
  std::vector<int> k = {static_cast<int>(i)};
  for (const int in : m.layers[i].inputs) {
    const int src = RowsSource(m, in);
    if (src != nn::kModelInput && std::find(k.begin(), k.end(), src) == k.end()) k.push_back(src);
  }
  return k;
}

// A flatten's rows: what it flattens.
void CopyFlattens(const nn::Model& m, Layout* a) {
  for (size_t k = 0; k < m.layers.size(); ++k) {
    const int src = RowsSource(m, static_cast<int>(k));
    if (src != static_cast<int>(k) && src != nn::kModelInput)
      a->layer[k] = a->layer[static_cast<size_t>(src)];
  }
}

int64_t Taps(const Layer& l) { return int64_t{l.pool_h} * l.pool_w; }

// The output rows [o0, o1) of max pooling l whose windows read its input's rows [y0, y1).
std::pair<int64_t, int64_t> OutRowsOf(const Layer& l, int64_t y0, int64_t y1) {
  const int64_t s = l.pool_stride, first = y0 + l.pad_top - (l.pool_h - 1);
  return {first <= 0 ? 0 : (first + s - 1) / s,
          std::min<int64_t>(l.out.h, (y1 - 1 + l.pad_top) / s + 1)};
}

// A max pooling's gradient with hbm_maps: where its shares of every image (its taps' D_t, its
// tap and mask: 2 + T maps) take more than the layout's f_piece_rows, an image and `rows`
// of its input's rows (a band) at a time, as many as keep the shares of the output rows that
// read them within f_piece_rows (one row at least); `stride` the rows of a map of shares.
struct MaxBands {
  int64_t rows = 0, stride = 0;
};
MaxBands MaxBandsOf(const Layout& a, const Layer& l) {
  const int64_t maps = 2 + Taps(l), padded = TilesOf(int64_t{a.mb} * l.out.h * l.out.w, a.n) * a.n;
  if (!a.hbm_maps || maps * padded <= a.f_piece_rows) return {l.in.h, padded};
  auto most = [&](int64_t rows) {  // the most output rows a band of `rows` reads
    int64_t m = 0;
    for (int64_t y0 = 0; y0 < l.in.h; y0 += rows) {
      const auto [o0, o1] = OutRowsOf(l, y0, std::min<int64_t>(y0 + rows, l.in.h));
      m = std::max(m, o1 - o0);
    }
    return m;
  };
  int64_t rows = l.in.h - 1;
  while (rows > 1 && maps * most(rows) * l.out.w > a.f_piece_rows) --rows;
  return {rows, most(rows) * l.out.w};
}

// With hbm_maps, the scratch rows of layer i's step in the window after its rows: a max
// pooling's tap, taken and shares (each tap's); a batch normalization's float32 rows.
int64_t ScratchRows(const Layout& a, const Layer& l, const LayerRows& r) {
  if (l.type == LayerType::kMaxPool2d)
    return (2 + int64_t{l.pool_h} * l.pool_w) * MaxBandsOf(a, l).stride;
  return IsBatchNorm(l) ? 2 * r.rows : 0;
}
void PlaceStepScratch(const Layout& a, const Layer& l, int64_t at, Layout* s) {
  if (IsBatchNorm(l)) s->bn_tmp = at;
  if (l.type != LayerType::kMaxPool2d) return;
  const int64_t stride = MaxBandsOf(a, l).stride;
  s->tap = at;
  s->taken = at + stride;
  s->shares = at + 2 * stride;
}

// With hbm_maps, the rows a later gradient of an input of layer i goes through before it is
// added to the one there (Sums::Into): the largest input's, where an input has more readers
// than i.
int64_t ContribRows(const nn::Model& m, const Layout& a, size_t i) {
  int64_t rows = 0;
  for (const int k : Involved(m, i)) {
    if (static_cast<size_t>(k) == i) continue;
    int readers = 0;
    for (const Layer& l : m.layers)
      for (const int in : l.inputs)
        readers += l.type != LayerType::kFlatten && RowsSource(m, in) == k;
    const LayerRows& r = a.layer[static_cast<size_t>(k)];
    if (readers > 1) rows = std::max(rows, r.cb * r.padded);
  }
  return rows;
}

// With hbm_maps, a convolution's F in the window in pieces of `rows` rows of each of its kb
// blocks, in `buffers` buffers taken in turn, the layout's f_piece_rows rows in all at most
// (N rows a block at least): its forward pass writes each piece to its home as it is made,
// and its weight gradient reads each back while it sums the one before (the sum's chunks of
// N rows, and their order, as they were).
struct FPieces {
  int64_t rows = 0, buffers = 1, kb = 1;
  int64_t Count(const LayerRows& r) const { return TilesOf(r.padded, rows); }
  // The buffer of piece i (its kb blocks `rows` apart) in layer r's F rows of the window.
  int64_t At(const LayerRows& r, int64_t i) const { return r.f + (i % buffers) * kb * rows; }
};
bool Pieced(const Layout& a, const Layer& l) { return a.hbm_maps && l.type == LayerType::kConv2d; }
FPieces FPiecesOf(const Layout& a, const LayerRows& r) {
  const int64_t kb = a.param[static_cast<size_t>(r.param)].kb, n = a.n;
  const int64_t rows = std::max(n, a.f_piece_rows / (2 * kb) / n * n);
  return 2 * rows >= r.padded ? FPieces{r.padded, 1, kb}
                              : FPieces{rows, 2, kb};  // one: two take no fewer
}
// The rows layer l's F takes in its step's window.
int64_t FWindowRows(const Layout& a, const Layer& l, const LayerRows& r) {
  if (!Pieced(a, l)) return r.f_rows;
  const FPieces f = FPiecesOf(a, r);
  return f.buffers * f.kb * f.rows;
}

// With hbm_maps, the rows of the layers of layer i's step in the window (the rest as they
// were: their homes), a flatten's as what it flattens: each involved layer's output (the
// logits have their own) and gradient; layer i's F (its inputs' no step of its reads), its
// scratch, tile and inputs' later gradients. The window rows it takes into *rows: from the
// window's first row, or with `top` up to its last (Resident).
Layout StepRows(const nn::Model& m, const Layout& a, size_t i, int64_t* rows = nullptr,
                bool top = false) {
  Layout s = a;
  int64_t at = a.window;
  if (top) {
    int64_t need = 0;
    StepRows(m, a, i, &need);
    at = a.window + a.window_rows - need;
  }
  const int64_t first = at;
  for (const int k : Involved(m, i)) {
    LayerRows& r = s.layer[static_cast<size_t>(k)];
    if (static_cast<size_t>(k) + 1 < m.layers.size()) {
      r.out = at;
      at += r.cb * r.padded;
    }
    r.grad = at;
    at += r.cb * r.padded;
    if (static_cast<size_t>(k) != i) continue;
    if (r.f_rows > 0) r.f = at;
    at += FWindowRows(a, m.layers[i], r);
    PlaceStepScratch(a, m.layers[i], at, &s);
    at += ScratchRows(a, m.layers[i], r);
    if (r.param >= 0) {
      ParamRows& p = s.param[static_cast<size_t>(r.param)];
      p.wb = p.g = at;
    }
    at += TileRows(m, a, r);
    s.contrib = at;
    at += ContribRows(m, a, i);
  }
  CopyFlattens(m, &s);
  if (rows) *rows = at - first;
  return s;
}

// With hbm_maps, each layer's rows' homes in a core's area in HBM (where PlaceLayer put
// them), and the window as large as the largest step's rows.
void PlaceMaps(const nn::Model& m, Layout* a, const std::function<int64_t(int64_t)>& take) {
  for (size_t k = 0; k < m.layers.size(); ++k) {
    LayerRows& r = a->layer[k];
    if (m.layers[k].type == LayerType::kFlatten) continue;  // its source's, copied below
    r.out_home = k + 1 == m.layers.size() ? -1 : r.out;
    r.grad_home = r.grad;
    r.f_home = r.f_rows > 0 ? r.f : -1;
  }
  CopyFlattens(m, a);
  int64_t most = 0;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    if (m.layers[i].type == LayerType::kFlatten) continue;  // no step of its own
    int64_t rows = 0;
    StepRows(m, *a, i, &rows);
    most = std::max(most, rows);
  }
  a->window = take(most);
  a->window_rows = most;
}

// With the state in HBM and several passes, homes in HBM for what the first pass makes for
// the later ones (Layout::hbm_made): each layer's tile, and each convolution's W'' where
// keep_flipped does not keep it in the buffer.
void PlaceMade(const nn::Model& m, Layout* a) {
  a->hbm_made = true;
  int64_t rows = a->GradRows();  // the tiles, in the gradients' order (g_hbm)
  for (size_t i = 0; i < m.layers.size() && !a->keep_flipped; ++i) {
    const Layer& l = m.layers[i];
    if (l.type != LayerType::kConv2d || l.inputs[0] == nn::kModelInput) continue;
    a->layer[i].flipped_home = rows;
    rows += a->In(l.inputs[0]).cb * FlippedRows(l, a->n);
  }
  a->made_rows = rows;
}

// With `keep_flipped` (several passes), each convolution's W'' has rows of its own
// (LayerRows::flipped). With the state `where` kHbm, the state is in HBM (StateRows), after
// the cores' gradient sums' (EmitGradientSum); kHbmWithF, each layer's F too; kHbmWithMaps,
// every layer's output, gradient and F too (PlaceMaps).
Layout MakeLayout(const nn::Model& m, int batch, const Optimizer& opt, const config::TpuConfig& cfg,
                  int cores, int mb, bool keep_flipped, StateAt where) {
  Layout a;
  a.keep_flipped = keep_flipped;
  a.hbm_state = where != StateAt::kBuffer;
  a.hbm_f = where == StateAt::kHbmWithF;
  a.hbm_maps = where == StateAt::kHbmWithMaps;
  a.f_piece_rows = cfg.ub_depth_rows / 8;  // an eighth of the buffer: most for the maps
  const int n = cfg.array_dim;
  a.mxus = cfg.mxus_per_core;
  shell::SetBatch(&a, n, batch, cores);
  a.mb = mb;
  a.passes = batch / mb;
  a.img_rows = TilesOf(m.input.Size(), n);
  int64_t at = 0;
  const std::function<int64_t(int64_t)> take = shell::RowsFrom(&at);
  a.id = take(n);
  // N rows where whole tiles of zeros are read, or (hbm_maps) the window's padding zeroed.
  a.zero = take(FieldFillsItsTiles(m, n) || LeavesPixelsOut(m) || a.hbm_maps ? n : 1);
  a.class_blocks = BlocksOf(m.layers.back().out.c, n);
  a.pad = take(2 * int64_t{a.class_blocks});
  a.inv_batch = take(2);
  a.consts = take(2 * static_cast<int64_t>(UpdateConstants(opt).size()));
  if (HasRelu6(m)) a.six = take(1);
  a.layer.resize(m.layers.size());
  for (size_t i = 0; i < m.layers.size(); ++i) {  // constants: before the state
    const Layer& l = m.layers[i];
    if (l.type == LayerType::kAvgPool2d) a.layer[i].tile = take(TilesOf(PoolTileRows(l, n), n) * n);
    if (l.type == LayerType::kConcat)
      a.layer[i].shift = take(2 * static_cast<int64_t>(l.inputs.size()) * n);
    if (l.depthwise)
      a.layer[i].mask = take(TilesOf(int64_t{l.kernel_h} * l.kernel_w * l.in.c + 1, n) * n);
    if (IsBatchNorm(l)) a.layer[i].bn_const = take(2 * chip::kBnConstants);
  }
  shell::PlaceParams(m, opt, &a, take, /*step_tiles=*/a.hbm_maps);
  if (!a.hbm_maps && ReadsPastItsTile(m, a)) take(n);  // zeros, never written (StepRows')
  a.pass_images = a.hbm_maps && mb < batch;            // one pass: its images read ahead, as before
  shell::PlaceBatchBuffers(&a, batch, a.pass_images ? mb : batch, take);
  // dWᵀ's accumulators: at most half of them (a wider layer's dWᵀ in groups), the rest a
  // product's chunks'.
  shell::PlaceAccumulators(&a, cfg.acc_depth_rows,
                           std::max<int64_t>(1, cfg.acc_depth_rows / (2 * n)));
  a.activations = at;
  a.loss = take(2 * int64_t{batch});  // the results, one write_host: losses, mean, logits
  a.mean = take(2);
  a.logits = take(a.bp * a.class_blocks);
  // With hbm_f, every layer's F in the same rows, as many as the largest takes.
  if (a.hbm_f) a.f_shared = take(LargestF(m, a));
  int64_t home = 0;
  const std::function<int64_t(int64_t)> map = a.hbm_maps ? shell::RowsFrom(&home) : take;
  for (size_t i = 0; i < m.layers.size(); ++i) PlaceLayer(m, i, &a, take, map);
  if (a.hbm_maps) PlaceMaps(m, &a, take);
  a.maps_rows = home;
  if (HasRelu6(m)) {
    a.relu6_set = a.sets++;
    a.bias_lane.push_back(-1);
  }
  PlaceScratch(m, opt, &a, take);
  a.end = at;
  shell::PlaceHostRows(&a);
  const uint64_t kPage = 4096;
  auto page = [](uint64_t x) { return (x + kPage - 1) / kPage * kPage; };
  a.hbm_state_addr = page(2 * static_cast<uint64_t>(a.GradRows()) * 2 * n);
  a.hbm_grad_addr =
      page(a.hbm_state_addr + static_cast<uint64_t>(cores * shell::StateRows(a)) * 2 * n);
  a.hbm_f_addr = page(shell::GradHbm(a, 2 * cores, 0));  // past the cores' sums
  a.hbm_maps_addr = page(a.hbm_f_addr + static_cast<uint64_t>(cores * a.f_rows) * 2 * n);
  if (a.hbm_state && a.passes > 1) PlaceMade(m, &a);
  a.hbm_made_addr = page(a.hbm_maps_addr + static_cast<uint64_t>(cores * a.maps_rows) * 2 * n);
  return a;
}

// The layout of pass u: its images, labels, losses and logits; a later pass's weight
// gradients into pass_g's rows (in the first's order).
Layout ForPass(const Layout& a0, int u) {
  Layout a = a0;
  if (!a.pass_images) a.x0 += int64_t{u} * a.mb * a.img_rows;
  a.y += int64_t{u} * a.mb;
  a.loss += 2 * int64_t{u} * a.mb;
  a.logits += int64_t{u} * a.mb;
  a.layer.back().out = a.logits;
  a.pass = u;
  if (u > 0 && !a.hbm_state)  // in HBM, summed as they come (GradientOut)
    for (ParamRows& r : a.param) r.g += a.pass_g - a0.param.front().g;
  return a;
}

// The layout whose batch buffer is buffer `parity` (0: MakeLayout's own, 1: the other).
Layout ForParity(const Layout& a0, int parity) {
  Layout a = a0;
  if (parity == 0) return a;
  shell::SwapBatchBuffers(&a);
  return a;
}

isa::WindowGeometry MapGeometry(int64_t h, int64_t w, int64_t channels, int64_t pixel_bytes) {
  isa::WindowGeometry g;
  g.in_h = static_cast<uint64_t>(h);
  g.in_w = static_cast<uint64_t>(w);
  g.channels = static_cast<uint64_t>(channels);
  g.pixel_bytes = static_cast<uint64_t>(pixel_bytes);
  return g;
}

// A window of kernel kh x kw over each image's map stacked one under the other, one output
// pixel an image: the whole map's values in (y, x, c) order (a flatten, a global pooling).
isa::WindowGeometry WholeMaps(const LayerRows& in, int b, int n) {
  isa::WindowGeometry g = MapGeometry(int64_t{in.h} * b, in.w, BlockLanes(in.c, n), n);
  g.kh = g.stride_y = static_cast<uint64_t>(in.h);
  g.kw = static_cast<uint64_t>(in.w);
  g.out_h = static_cast<uint64_t>(b);
  g.out_w = 1;
  return g;
}

// With hbm_maps: buffer rows [ub, ub + rows) out to (`out`) or in from rows [home, home +
// rows) of this core's area of maps in HBM, through program `p` (an emitter's P(), or Raw()
// where its held-back activates write none of those rows).
void MoveRows(isa::ProgramBuilder& p, const Layout& a, int64_t ub, int64_t home, int64_t rows,
              bool out) {
  const uint64_t hbm =
      a.hbm_maps_addr + static_cast<uint64_t>(a.core * a.maps_rows + home) * 2 * a.n;
  shell::MoveHbm(p, a.n, ub, hbm, rows, out);
}
void MoveMap(Emitter& e, const Layout& a, int64_t ub, int64_t home, int64_t rows, bool out) {
  MoveRows(e.P(), a, ub, home, rows, out);
}

// Where K-tile k of a weighted layer's field comes from: the map's `cb` channel blocks
// (`block` rows apart) from `map`. With one, the window's K-tile k of the map; with several,
// each tap of the window is a K-tile of each block in turn: K-tile k is tap k / cb of block
// k % cb, the order of the layer's weight rows (tap, then channel).
struct FieldMap {
  int64_t map = 0, block = 0;
  int cb = 1;
};

// K-tile k of the operand of weighted layer p (its window's field through the identity, the
// bias lane's 1 from parameter set `set` in the tile that holds it) for `pixels` output
// pixels of the window set last over the map `in` (FieldMap), into rows from `out`. A tile
// past the field (the bias lane's alone) is zeros through the zero tile.
void FieldTile(Emitter& e, const Layout& a, const ParamRows& p, int64_t k, const FieldMap& in,
               int64_t pixels, int64_t out, int set, int64_t first = 0) {
  const bool past = k * a.n >= p.ins;
  const int64_t map = past ? in.map : in.map + (k % in.cb) * in.block;
  e.Window(map, pixels, past ? a.zero : a.id, past ? 0 : k / in.cb, 1, out,
           k == p.ins / a.n ? set : 0, first, /*one_tile=*/false, /*side=*/true);
}

// out = F W of weighted layer p for `rows` rows of F (r.f), each block of its outputs into
// its channel block of r.out.
void Outputs(Emitter& e, const ParamRows& p, const LayerRows& r, int64_t rows, bool relu, int set) {
  for (int64_t j = 0; j < p.mb; ++j)
    e.Dense(r.f, r.padded, p, j, rows, r.out + r.OutBlock(j), relu, set);
}

// Rows [r0, r1) of convolution l's F (each image's pixels among them) into rows from `f`
// (its kb blocks f_stride apart).
void ConvField(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r, int64_t r0,
               int64_t r1, int64_t f, int64_t f_stride) {
  const ParamRows& p = a.param[static_cast<size_t>(r.param)];
  const int n = a.n;
  const bool images = l.inputs[0] == nn::kModelInput;
  FieldMap map{a.x0, 0, 1};
  int64_t per = a.img_rows;
  if (!images) {
    const LayerRows& in = a.In(l.inputs[0]);
    map = {in.out, in.padded, in.cb};
    per = in.pixels;
  }
  isa::WindowGeometry g = MapGeometry(l.in.h, l.in.w, BlockLanes(l.in.c, n), images ? l.in.c : n);
  g.kh = static_cast<uint64_t>(l.kernel_h);
  g.kw = static_cast<uint64_t>(l.kernel_w);
  g.stride_y = g.stride_x = static_cast<uint64_t>(l.stride);
  g.pad_top = static_cast<uint64_t>(l.pad_top);
  g.pad_left = static_cast<uint64_t>(l.pad_left);
  g.out_h = static_cast<uint64_t>(l.out.h);
  g.out_w = static_cast<uint64_t>(l.out.w);
  e.SetWindow(g);
  for (int t = 0; t < a.mb; ++t) {
    const int64_t q0 = std::max<int64_t>(r0 - t * r.pixels, 0);
    const int64_t q1 = std::min(r1 - t * r.pixels, r.pixels);
    if (q0 >= q1) continue;
    FieldMap image = map;
    image.map += t * per;
    for (int64_t k = 0; k < p.kb; ++k)
      FieldTile(e, a, p, k, image, q1 - q0, f + k * f_stride + t * r.pixels + q0 - r0, r.set, q0);
  }
}

// With FPieces, each piece of F made, its outputs formed, the piece out to its home (the
// padding's rows past the map zeroed: the weight gradient reads whole chunks of N rows).
void PiecedConvForward(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r) {
  const ParamRows& p = a.param[static_cast<size_t>(r.param)];
  const FPieces fp = FPiecesOf(a, r);
  for (int64_t i = 0; i < fp.Count(r); ++i) {
    const int64_t r0 = i * fp.rows, end = std::min(r0 + fp.rows, r.padded);
    const int64_t last = std::min(end, r.rows);
    const int64_t f = fp.At(r, i);
    for (int64_t k = 0; k < p.kb && end > last; ++k)
      e.Vector(VectorOp::kCopy, a.zero, 0, f + k * fp.rows + last - r0, end - last, 0);
    ConvField(e, a, l, r, r0, last, f, fp.rows);
    for (int64_t j = 0; j < p.mb; ++j)
      e.Dense(f, fp.rows, p, j, last - r0, r.out + r.OutBlock(j) + r0, Relu(l), SetOf(a, l));
    for (int64_t k = 0; k < p.kb; ++k)
      MoveMap(e, a, f + k * fp.rows, r.f_home + k * r.padded + r0, end - r0, /*out=*/true);
  }
}

// The tiles of a read of what the first pass made (MadeRows): each read's latency
// (weight_mem_latency_cycles, 70 on tpu-v3) is 14 % of its 4 N rows, and a product waits for
// its own piece, not the whole tile's (docs/training.md, "The state in HBM", measures 1, 2,
// 4 and 8).
constexpr int64_t kMadePieceTiles = 4;

// Rows [home, home + rows) of this core's area of what the first pass made (hbm_made) to or
// from buffer rows from `ub`: out with `out`, else in, kMadePieceTiles tiles a read.
void MadeRows(Emitter& e, const Layout& a, int64_t ub, int64_t home, int64_t rows, bool out) {
  const uint64_t hbm =
      a.hbm_made_addr + static_cast<uint64_t>(a.core * a.made_rows + home) * 2 * a.n;
  // No activate writes or reads these rows: Raw().
  if (out) return shell::MoveHbm(e.Raw(), a.n, ub, hbm, rows, out);
  shell::MoveHbm(e.Raw(), a.n, ub, hbm, rows, out, kMadePieceTiles * a.n);
}

// Weighted layer p's bfloat16 tile into its rows (a forward pass's with `forward`, else an
// input gradient's): made from its float32 weights (MakeTile). With hbm_made the first
// pass's forward pass writes it out to HBM, and every later use reads it back: a row a value
// row through the host DMA, where making it reads two (float32) and copies them.
void LayerTile(Emitter& e, const Layout& a, const ParamRows& p, bool forward) {
  if (a.hbm_made && (a.pass > 0 || !forward)) {
    MadeRows(e, a, p.wb, p.g_hbm, p.Values(a.n), /*out=*/false);
    return e.ForgetTile();  // the rows are every layer's tile in turn
  }
  shell::MakeTile(e, a, p);
  if (a.hbm_made) MadeRows(e, a, p.wb, p.g_hbm, p.Values(a.n), /*out=*/true);
}

void EmitConvForward(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r) {
  const ParamRows& p = a.param[static_cast<size_t>(r.param)];
  e.Pass(l.name + " forward", a.b * r.pixels * (p.ins + 1) * p.outs);
  LayerTile(e, a, p, /*forward=*/true);
  if (Pieced(a, l)) return PiecedConvForward(e, a, l, r);
  ConvField(e, a, l, r, 0, r.rows, r.f, r.padded);
  Outputs(e, p, r, r.rows, Relu(l), SetOf(a, l));
}

// A dense layer's X from the images (the batch buffer's rows, each image's values in order):
// K-tile k is row k of each image through the identity (`matmul stride=` the image's rows),
// the bias lane's 1 from parameter set `set` in the tile that holds it; a tile past the
// images' values (the bias lane's alone) is zeros through the zero tile.
void ImageTiles(Emitter& e, const Layout& a, const ParamRows& p, const LayerRows& r) {
  for (int64_t k = 0; k < p.kb; ++k) {
    const bool past = k * a.n >= p.ins;
    e.Chunks(a.mb, r.f + k * r.padded, k == p.ins / a.n ? r.set : 0, false,
             [&](uint64_t acc, int64_t r0, int64_t len) {
               const bool load = e.Tile(past ? a.zero : a.id, false, true);
               e.Raw().Matmul(e.U(a.x0 + r0 * a.img_rows + (past ? 0 : k)), acc, e.U(len), load,
                              isa::Acc::kOverwrite, e.U(a.img_rows));
             });
  }
}

// The window over an a x b chunk (kernel the chunk, one output pixel).
isa::WindowGeometry ChunkWindow(int a, int b, int c, int n) {
  isa::WindowGeometry g = MapGeometry(a, b, c, n);
  g.kh = static_cast<uint64_t>(a);
  g.kw = static_cast<uint64_t>(b);
  g.out_h = g.out_w = 1;
  return g;
}

// run(p0, kh, kw) for each chunk of an image of `in` (ChunksOf) in order: its first pixel and
// its sides.
void ForEachChunk(const LayerRows& in, int n, const std::function<void(int64_t, int, int)>& run) {
  const Chunks c = ChunksOf(in.pixels, in.c, n);
  for (int64_t p0 = 0; p0 < in.pixels; p0 += c.Pixels()) {
    const bool last = p0 + c.Pixels() >= in.pixels;
    run(p0, last ? c.last_a : c.a, last ? c.last_b : c.b);
  }
}

// A dense layer's X from a map of more than 15 x 15 pixels (ChunksOf): a window over each
// chunk of each image, its K-tiles through the identity (FieldTile).
void ChunkTiles(Emitter& e, const Layout& a, const ParamRows& p, const LayerRows& in,
                const LayerRows& r) {
  int64_t k0 = 0;
  ForEachChunk(in, a.n, [&](int64_t p0, int kh, int kw) {
    e.SetWindow(ChunkWindow(kh, kw, in.c, a.n));
    const bool last = p0 + int64_t{kh} * kw >= in.pixels;
    const int64_t kts = last ? p.kb - k0 : int64_t{kh} * kw * in.c / a.n;
    for (int64_t k = 0; k < kts; ++k)
      for (int t = 0; t < a.mb; ++t) {
        const bool past = (k0 + k) * a.n >= p.ins;
        e.Window(in.out + t * in.pixels + p0, 1, past ? a.zero : a.id, past ? 0 : k, 1,
                 r.f + (k0 + k) * r.padded + t, k0 + k == p.ins / a.n ? r.set : 0);
      }
    k0 += kts;
  });
}

void EmitDenseForward(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r) {
  const ParamRows& p = a.param[static_cast<size_t>(r.param)];
  e.Pass(l.name + " forward", int64_t{a.b} * (p.ins + 1) * p.outs);
  LayerTile(e, a, p, /*forward=*/true);
  const int k0 = l.inputs[0];
  if (k0 == nn::kModelInput || a.In(k0).source == nn::kModelInput) {
    ImageTiles(e, a, p, r);
  } else if (!FitsAWindow(a.In(k0).h, a.In(k0).w)) {
    ChunkTiles(e, a, p, a.In(k0), r);
  } else {
    const LayerRows& in = a.In(k0);
    e.SetWindow(WholeMaps(in, a.mb, a.n));
    for (int64_t k = 0; k < p.kb; ++k)
      FieldTile(e, a, p, k, {in.out, in.padded, in.cb}, a.mb, r.f + k * r.padded, r.set);
  }
  Outputs(e, p, r, a.mb, Relu(l), SetOf(a, l));
}

// A global pooling of a map of more than 15 x 15 pixels: each image's chunks (ChunksOf) one
// window each through the chunk's tile, K-tile after K-tile added in the accumulators in the
// order one window of the whole map would take them (each chunk fills whole K-tiles).
void ChunkedPool(Emitter& e, const Layout& a, const LayerRows& in, const LayerRows& r) {
  for (int t = 0; t < a.mb; ++t) {
    ForEachChunk(in, a.n, [&](int64_t p0, int kh, int kw) {
      e.SetWindow(ChunkWindow(kh, kw, in.c, a.n));
      for (int64_t k = 0; k < TilesOf(int64_t{kh} * kw * in.c, a.n); ++k) {
        const bool load = e.Tile(r.tile + k * a.n);
        e.P().MatmulWindow(e.U(in.out + t * in.pixels + p0), 0, 1, 0, e.U(k), load,
                           isa::AddIf(p0 > 0 || k > 0));
      }
    });
    e.P().Activate(0, e.U(r.out + t), 1, 0, false, isa::Pool::kNone);
  }
}

// A global pooling's gradient over a map of more than 15 x 15 pixels: for each chunk of each
// image, a window over its pooled 1 x 1 map padded to the chunk's size, each pixel's one tap
// through the chunk's tile.
void ChunkedPoolGradient(Emitter& e, const Layout& a, const LayerRows& in, const LayerRows& r,
                         int64_t into) {
  for (int t = 0; t < a.mb; ++t)
    ForEachChunk(in, a.n, [&](int64_t p0, int kh, int kw) {
      isa::WindowGeometry g = ChunkWindow(1, 1, in.c, a.n);
      g.kh = static_cast<uint64_t>(kh);
      g.kw = static_cast<uint64_t>(kw);
      g.pad_top = static_cast<uint64_t>(kh - 1);
      g.pad_left = static_cast<uint64_t>(kw - 1);
      g.out_h = static_cast<uint64_t>(kh);
      g.out_w = static_cast<uint64_t>(kw);
      e.SetWindow(g);
      e.Window(r.grad + t, int64_t{kh} * kw, r.tile, 0, TilesOf(int64_t{kh} * kw * in.c, a.n),
               into + t * in.pixels + p0, 0);
    });
}

// A global pooling's gradient where PoolGradientIsCopied (graph_reference.h): each block's
// pooled gradient rows (an image's a row) through the tile of one tap, once, then each
// pixel's row of every image from the accumulators (activate stride=pixels).
void CopiedPoolGradient(Emitter& e, const Layout& a, const LayerRows& in, const LayerRows& r,
                        int64_t into) {
  for (int j = 0; j < r.cb; ++j)
    for (int64_t r0 = 0; r0 < a.mb; r0 += a.acc_rows) {
      const int64_t len = std::min<int64_t>(a.acc_rows, a.mb - r0);
      const bool load = e.Tile(r.tile, false, true);
      e.P().Matmul(e.U(r.grad + r.Block(j) + r0), 0, e.U(len), load, isa::Acc::kOverwrite);
      for (int64_t px = 0; px < in.pixels; ++px)
        e.P().Activate(0, e.U(into + in.Block(j) + r0 * in.pixels + px), e.U(len), 0, false,
                       isa::Pool::kNone, e.U(in.pixels));
    }
}

// An average pooling, each channel block by itself.
void EmitPoolForward(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r) {
  e.Pass(l.name + " forward");
  const LayerRows& in = a.In(l.inputs[0]);
  const int64_t kts = PoolKTiles(l, a.n);
  const bool one = TapATile(l, a.n);
  if (l.global_pool && !FitsAWindow(in.h, in.w)) return ChunkedPool(e, a, in, r);
  if (l.global_pool) {
    e.SetWindow(WholeMaps(in, a.mb, a.n));
    for (int j = 0; j < r.cb; ++j)
      e.Window(in.out + in.Block(j), a.mb, r.tile, 0, kts, r.out + r.Block(j), 0, 0, one);
    return;
  }
  isa::WindowGeometry g = MapGeometry(in.h, in.w, BlockLanes(in.c, a.n), a.n);
  g.kh = static_cast<uint64_t>(l.pool_h);
  g.kw = static_cast<uint64_t>(l.pool_w);
  g.stride_y = g.stride_x = static_cast<uint64_t>(l.pool_stride);
  g.pad_top = static_cast<uint64_t>(l.pad_top);
  g.pad_left = static_cast<uint64_t>(l.pad_left);
  g.out_h = static_cast<uint64_t>(r.h);
  g.out_w = static_cast<uint64_t>(r.w);
  e.SetWindow(g);
  for (int j = 0; j < r.cb; ++j)
    for (int t = 0; t < a.mb; ++t)
      e.Window(in.out + in.Block(j) + t * in.pixels, r.pixels, r.tile, 0, kts,
               r.out + r.Block(j) + t * r.pixels, 0, 0, one);
}

// A max pooling's window over a map of one row a pixel: with N channels, K-tile t is tap t
// (docs/isa.md, "Max pooling"); the padding reads the most negative bfloat16.
isa::WindowGeometry MaxGeometry(const Layer& l, int n) {
  isa::WindowGeometry g = MapGeometry(l.in.h, l.in.w, n, n);
  g.kh = static_cast<uint64_t>(l.pool_h);
  g.kw = static_cast<uint64_t>(l.pool_w);
  g.stride_y = g.stride_x = static_cast<uint64_t>(l.pool_stride);
  g.pad_top = static_cast<uint64_t>(l.pad_top);
  g.pad_left = static_cast<uint64_t>(l.pad_left);
  g.pad_min = true;
  g.out_h = static_cast<uint64_t>(l.out.h);
  g.out_w = static_cast<uint64_t>(l.out.w);
  return g;
}

// Output pixels [first, first + pixels) of the max pooling's window over the map at `map`:
// taps [t0, t1) through the identity, the first overwriting and the rest kept larger
// (`max`), into rows from `out` (through the ReLU with `relu`, bounded by parameter set `set`).
void MaxTaps(Emitter& e, const Layout& a, int64_t map, int64_t pixels, int64_t t0, int64_t t1,
             int64_t out, bool relu, int set = 0, int64_t first = 0) {
  e.Chunks(pixels, out, set, relu, [&](uint64_t acc, int64_t r0, int64_t len) {
    for (int64_t t = t0; t < t1; ++t) {
      const bool load = e.Tile(a.id, false, true);
      e.Raw().MatmulWindow(e.U(map), acc, e.U(len), e.U(first + r0), e.U(t), load,
                           t > t0 ? isa::Acc::kMax : isa::Acc::kOverwrite);
    }
  });
}

void EmitMaxPoolForward(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r) {
  e.Pass(l.name + " forward");
  const LayerRows& in = a.In(l.inputs[0]);
  e.SetWindow(MaxGeometry(l, a.n));
  for (int j = 0; j < r.cb; ++j)
    for (int t = 0; t < a.mb; ++t)
      MaxTaps(e, a, in.out + in.Block(j) + t * in.pixels, r.pixels, 0, Taps(l),
              r.out + r.Block(j) + t * r.pixels, Relu(l), SetOf(a, l));
}

// The ReLU (and ReLU6's bound) of layer l on the vector unit, over `rows` rows from `out`.
void VectorActivation(Emitter& e, const Layout& a, const Layer& l, int64_t out, int64_t rows) {
  if (Relu(l)) EmitVector(e.P(), VectorOp::kMax, out, a.zero, out, rows, kBcast);
  if (Relu6(l)) EmitVector(e.P(), VectorOp::kMin, out, a.six, out, rows, kBcast);
}

void EmitAddForward(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r) {
  e.Pass(l.name + " forward");
  for (int j = 0; j < r.cb; ++j) {
    const int64_t out = r.out + r.Block(j);
    EmitVector(e.P(), VectorOp::kAdd, a.In(l.inputs[0]).out + r.Block(j),
               a.In(l.inputs[1]).out + r.Block(j), out, r.rows, 0);
    VectorActivation(e, a, l, out, r.rows);
  }
}

// Each input's rows through its shifted identity into its channels' lanes, added.
void EmitConcatForward(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r) {
  e.Pass(l.name + " forward");
  e.Chunks(r.rows, r.out, 0, false, [&](uint64_t acc, int64_t r0, int64_t len) {
    for (size_t k = 0; k < l.inputs.size(); ++k) {
      e.Tile(r.shift + 2 * static_cast<int64_t>(k) * a.n);
      e.Raw().Matmul(e.U(a.In(l.inputs[k]).out + r0), acc, e.U(len), true, isa::AddIf(k > 0));
    }
  });
}

// The sum of `rows` rows from `src` (float32 with kA32 in `flags`), lane by lane, into the
// float32 row `out`: a row_sum of at most kMaxLength rows each, the later ones' sums added
// (chip::RowSum).
void EmitRowSum(Emitter& e, const Layout& a, int64_t src, int flags, int64_t out, int64_t rows) {
  const int64_t piece = static_cast<int64_t>(isa::ProgramBuilder::kMaxLength);
  const int64_t step = flags & kA32 ? 2 : 1;
  for (int64_t r0 = 0; r0 < rows; r0 += piece) {
    const int64_t to = r0 == 0 ? out : BnRowAt(a, kPiece);
    EmitVector(e.P(), VectorOp::kRowSum, src + r0 * step, 0, to, std::min(piece, rows - r0),
               flags | kO32);
    if (r0 > 0) EmitVector(e.P(), VectorOp::kAdd, out, to, out, 1, kA32 | kB32 | kO32);
  }
}

// A float32 op on single float32 rows (a, b: constants or statistics), into out.
void RowOp(Emitter& e, VectorOp op, int64_t x, int64_t y, int64_t out) {
  EmitVector(e.P(), op, x, y, out, 1, kA32 | kB32 | kO32);
}
int64_t BnConst(const LayerRows& r, chip::BatchNormConstant k) { return r.bn_const + 2 * k; }

// Channel block j of a batch normalization (LayerRows r, parameters p): its input's, x^'s,
// output's and gradient's rows, gamma's and beta's float32 rows and their gradient's rows,
// the batch's mean, variance and 1 / sqrt(variance + epsilon), the sums of dy and dy x^
// (float32 rows).
struct BnBlock {
  int64_t x = 0, f = 0, out = 0, grad = 0, gamma = 0, beta = 0, g = 0;
  int64_t mean = 0, var = 0, inv = 0, sum_dy = 0, sum_dyx = 0;
  int j = 0;
};
BnBlock BnBlockOf(const Layout& a, const Layer& l, const LayerRows& r, int j) {
  const ParamRows& p = a.param[static_cast<size_t>(r.param)];
  BnBlock b;
  b.j = j;
  b.x = a.In(l.inputs[0]).out + r.Block(j);
  b.f = r.f + r.Block(j);
  b.out = r.out + r.Block(j);
  b.grad = r.grad + r.Block(j);
  b.gamma = (a.hbm_state ? a.bn_w : p.w) + 2 * p.Block(j, 0, a.n);
  b.beta = b.gamma + 2;
  b.g = p.g + p.Block(j, 0, a.n);
  b.mean = r.bn_stats + 10 * int64_t{j};
  b.var = b.mean + 2;
  b.inv = b.mean + 4;
  b.sum_dy = b.mean + 6;
  b.sum_dyx = b.mean + 8;
  return b;
}

// The row of block j of running statistic s (0: the mean, 1: the variance) of a batch
// normalization: the state's, or with the state in HBM, its staged copy's (StageBatchNorm).
int64_t RunningRow(const Layout& a, const LayerRows& r, int s, int j) {
  if (a.hbm_state) return a.bn_kept + 2 * (int64_t{s} * r.cb + j);
  return a.kept[static_cast<size_t>(r.kept + s)].RowOf(j * a.n, a.n);
}

// With the state in HBM, a batch normalization's gamma and beta (float32 rows) into bn_w,
// and with `kept` its running statistics into bn_kept (`in`) or back (not `in`).
void StageBatchNorm(Emitter& e, const Layout& a, const LayerRows& r, bool in, bool kept) {
  if (!a.hbm_state) return;
  const ParamRows& p = a.param[static_cast<size_t>(r.param)];
  if (in) e.P().ReadHbm(shell::StateHbm(a, p.w), e.U(a.bn_w), e.U(2 * p.Values(a.n)));
  for (int s = 0; kept && s < 2; ++s) {
    const uint64_t hbm = shell::StateHbm(a, a.kept[static_cast<size_t>(r.kept + s)].row);
    const uint64_t ub = e.U(RunningRow(a, r, s, 0)), len = e.U(2 * int64_t{r.cb});
    in ? e.P().ReadHbm(hbm, ub, len) : e.P().WriteHbm(ub, hbm, len);
  }
}

// The running statistics after the batch's: running (1 - momentum) + batch momentum, the
// variance's batch value unbiased (graph_ref::UpdateRunning).
void EmitRunningStatistics(Emitter& e, const Layout& a, const LayerRows& r, const BnBlock& b) {
  const int64_t term = BnRowAt(a, kTerm), term2 = BnRowAt(a, kTerm2);
  for (int s = 0; s < 2; ++s) {
    const int64_t running = RunningRow(a, r, s, b.j);
    const int64_t batch = s == 0 ? b.mean : b.var;
    RowOp(e, VectorOp::kMul, running, BnConst(r, chip::kBnKeep), running);
    int64_t from = batch;
    if (s == 1) {
      RowOp(e, VectorOp::kMul, batch, BnConst(r, chip::kBnUnbiased), term2);
      from = term2;
    }
    RowOp(e, VectorOp::kMul, from, BnConst(r, chip::kBnMomentum), term);
    RowOp(e, VectorOp::kAdd, running, term, running);
  }
}

// Batch normalization in training mode on the vector unit (graph_ref::BatchNormForward),
// channel block b: the batch's statistics, x^ into f, y = gamma x^ + beta (the master
// weights' float32 rows) through the activation, the running statistics.
void BatchNormBlockForward(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r,
                           const BnBlock& b) {
  const int64_t x = b.x, mean = b.mean, var = b.var, inv = b.inv, t = a.bn_tmp;
  EmitRowSum(e, a, x, 0, mean, r.rows);
  RowOp(e, VectorOp::kMul, mean, BnConst(r, chip::kBnInvM), mean);
  EmitVector(e.P(), VectorOp::kSub, x, mean, t, r.rows, kB32 | kO32 | kBcast);
  EmitVector(e.P(), VectorOp::kMul, t, t, t, r.rows, kA32 | kB32 | kO32);
  EmitRowSum(e, a, t, kA32, var, r.rows);
  RowOp(e, VectorOp::kMul, var, BnConst(r, chip::kBnInvM), var);
  RowOp(e, VectorOp::kAdd, var, BnConst(r, chip::kBnEps), inv);
  EmitVector(e.P(), VectorOp::kRsqrt, inv, 0, inv, 1, kA32 | kO32);
  EmitVector(e.P(), VectorOp::kSub, x, mean, t, r.rows, kB32 | kO32 | kBcast);
  EmitVector(e.P(), VectorOp::kMul, t, inv, b.f, r.rows, kA32 | kB32 | kBcast);
  EmitVector(e.P(), VectorOp::kMul, b.f, b.gamma, t, r.rows, kB32 | kO32 | kBcast);
  EmitVector(e.P(), VectorOp::kAdd, t, b.beta, b.out, r.rows, kA32 | kB32 | kBcast);
  VectorActivation(e, a, l, b.out, r.rows);
  EmitRunningStatistics(e, a, r, b);
}

void EmitBatchNormForward(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r) {
  e.Pass(l.name + " forward");
  StageBatchNorm(e, a, r, /*in=*/true, /*kept=*/true);
  for (int j = 0; j < r.cb; ++j) BatchNormBlockForward(e, a, l, r, BnBlockOf(a, l, r, j));
  StageBatchNorm(e, a, r, /*in=*/false, /*kept=*/true);
}

// With hbm_f, layer r's F between its rows in the buffer (the shared ones) and its own in
// this core's area in HBM: out after its forward pass (`out`), back in before its weight
// gradient.
void MoveF(Emitter& e, const Layout& a, const LayerRows& r, bool out) {
  if (!a.hbm_f) return;
  const int64_t rows = a.param[static_cast<size_t>(r.param)].kb * r.padded;
  const int64_t piece = static_cast<int64_t>(isa::ProgramBuilder::kMaxLength);
  for (int64_t r0 = 0; r0 < rows; r0 += piece) {
    const uint64_t hbm =
        a.hbm_f_addr + static_cast<uint64_t>(a.core * a.f_rows + r.f_hbm + r0) * 2 * a.n;
    const uint64_t ub = e.U(r.f + r0), len = e.U(std::min(piece, rows - r0));
    out ? e.P().WriteHbm(ub, hbm, len) : e.P().ReadHbm(hbm, ub, len);
  }
}

void EmitLayerForward(Emitter& e, const Layout& a, const nn::Model& m, size_t i) {
  const Layer& l = m.layers[i];
  const LayerRows& r = a.layer[i];
  switch (l.type) {
    case LayerType::kConv2d:
      EmitConvForward(e, a, l, r);
      MoveF(e, a, r, /*out=*/true);
      break;
    case LayerType::kDense:
      EmitDenseForward(e, a, l, r);
      MoveF(e, a, r, /*out=*/true);
      break;
    case LayerType::kAvgPool2d:
      EmitPoolForward(e, a, l, r);
      break;
    case LayerType::kMaxPool2d:
      EmitMaxPoolForward(e, a, l, r);
      break;
    case LayerType::kAdd:
      EmitAddForward(e, a, l, r);
      break;
    case LayerType::kConcat:
      EmitConcatForward(e, a, l, r);
      break;
    case LayerType::kBatchNorm:
      EmitBatchNormForward(e, a, l, r);
      break;
    default:  // a flatten: its input's rows
      break;
  }
}

// The gradients summed so far: a layer's first goes into its gradient's rows, a later one
// into the scratch rows and then a vector add into them (chip::CoreSum), in the order the
// backward pass gives them, as the reference sums them.
class Sums {
 public:
  explicit Sums(size_t layers) : has_(layers, false) {}
  // Where the gradient by layer input k's output goes; nothing for the model's input (-1).
  int64_t Into(const Layout& a, int k) const {
    if (k == nn::kModelInput || a.In(k).source == nn::kModelInput) return -1;
    const LayerRows& r = a.In(k);
    return has_[static_cast<size_t>(r.source)] ? a.contrib : r.grad;
  }
  void Done(Emitter& e, const Layout& a, int k) {
    const LayerRows& r = a.In(k);
    if (has_[static_cast<size_t>(r.source)])
      for (int j = 0; j < r.cb; ++j)
        EmitVector(e.P(), VectorOp::kAdd, r.grad + r.Block(j), a.contrib + r.Block(j),
                   r.grad + r.Block(j), r.rows, 0);
    has_[static_cast<size_t>(r.source)] = true;
  }
  // Whether layer k (not a flatten) has a gradient yet.
  bool Has(int k) const { return has_[static_cast<size_t>(k)]; }
  // The gradient `dz` (rows of layer input k's size) added in as it is (an add's inputs).
  void AddRows(Emitter& e, const Layout& a, int k, int64_t dz) {
    if (k == nn::kModelInput) return;
    const LayerRows& r = a.In(k);
    const bool has = has_[static_cast<size_t>(r.source)];
    for (int j = 0; j < r.cb; ++j) {
      const int64_t grad = r.grad + r.Block(j), from = dz + r.Block(j);
      if (has) {
        EmitVector(e.P(), VectorOp::kAdd, grad, from, grad, r.rows, 0);
      } else {
        EmitVector(e.P(), VectorOp::kCopy, from, 0, grad, r.rows, 0);
      }
    }
    has_[static_cast<size_t>(r.source)] = true;
  }

 private:
  std::vector<bool> has_;
};

// With the state in HBM (StateRows), layer p's weight gradient (its rows p.g: the shared
// tile's, PlaceScratch) into its rows of this core's area in HBM (GradHbm) once made, before
// the layer's input gradient makes the tile there again: the first pass's written, a later
// one's added piece by piece (in the staging rows) to what is there and written back, as the
// passes' sum in the buffer takes them.
void GradientOut(Emitter& e, const Layout& a, const ParamRows& p) {
  if (!a.hbm_state) return;
  const int64_t rows = p.Values(a.n), piece = 2 * a.update_rows;
  const int slots = static_cast<int>(p.slot.size());
  for (int64_t r0 = 0, k = 0; r0 < rows; r0 += piece, ++k) {
    const uint64_t at = shell::GradHbm(a, a.core, p.g_hbm + r0);
    const uint64_t len = e.U(std::min(piece, rows - r0));
    if (a.pass == 0) {
      e.P().WriteHbm(e.U(p.g + r0), at, len);
      continue;
    }
    const int64_t sum = shell::StageRows(a, static_cast<int>(k % 2), 0, slots);
    e.P().ReadHbm(at, e.U(sum), len);
    e.Vector(VectorOp::kAdd, sum, p.g + r0, sum, static_cast<int64_t>(len), 0);
    e.P().WriteHbm(e.U(sum), at, len);
  }
}

void EmitDenseBackward(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r,
                       Sums* sums) {
  const ParamRows& p = a.param[static_cast<size_t>(r.param)];
  const int n = a.n;
  e.Pass(l.name + " weight gradient", int64_t{a.b} * (p.ins + 1) * p.outs);
  MoveF(e, a, r, /*out=*/false);
  e.WeightGradient(p, r.grad, r.padded, r.f, r.padded, r.padded / n);
  GradientOut(e, a, p);
  const int k = l.inputs[0];
  const int64_t into = sums->Into(a, k);
  if (into < 0) return;
  e.Pass(l.name + " input gradient", int64_t{a.b} * p.ins * p.outs);
  if (a.hbm_state) LayerTile(e, a, p, /*forward=*/false);  // the shared rows: its tile again
  const LayerRows& in = a.In(k);
  // A pixel (and an input channel block) at a time: the transposed loads of the tile's rows
  // of that pixel's block (its channels the first lanes), one a block of the outputs,
  // added; each image's row of it (activate stride=pixels).
  for (int64_t px = 0; px < in.pixels; ++px)
    for (int bi = 0; bi < in.cb; ++bi)
      e.Chunks(
          a.mb, into + in.Block(bi) + px, 0, false,
          [&](uint64_t acc, int64_t r0, int64_t len) {
            for (int64_t j = 0; j < p.mb; ++j) {
              e.Tile(p.wb + p.Block(j, 0, n) + px * in.c + int64_t{bi} * n, true);
              e.Raw().Matmul(e.U(r.grad + r.Block(j) + r0), acc, e.U(len), true, isa::AddIf(j > 0));
            }
          },
          in.pixels);
  sums->Done(e, a, k);
}

// The window of an input gradient: over the gradient's map `r` (`channels` a pixel), the
// forward window of kernel kh x kw, `stride` and top and left padding turned around
// (padding the kernel's side less 1 less the forward's, read dilated for stride 2), walking
// the input's pixels that some window covers (Covered: the first of in.h rows and in.w
// columns): each meets each output pixel whose window read it, through the flipped tap.
isa::WindowGeometry GradientWindow(const LayerRows& r, int64_t channels, int n, int kh, int kw,
                                   int stride, int pad_top, int pad_left, const LayerRows& in) {
  isa::WindowGeometry g = MapGeometry(r.h, r.w, channels, n);
  g.kh = static_cast<uint64_t>(kh);
  g.kw = static_cast<uint64_t>(kw);
  g.pad_top = static_cast<uint64_t>(kh - 1 - pad_top);
  g.pad_left = static_cast<uint64_t>(kw - 1 - pad_left);
  g.dilated = stride == 2;
  g.out_h = static_cast<uint64_t>(Covered(in.h, r.h, kh, stride, pad_top));
  g.out_w = static_cast<uint64_t>(Covered(in.w, r.w, kw, stride, pad_left));
  return g;
}

// The pixels of the gradient's window `g` (GradientWindow's) of one image into the input
// map's rows from `out` (in.w pixels a row): `run(first, count, to)` forms output pixels
// [first, first + count) of the window into rows from `to`, all at once where the window
// covers whole rows, else row by row; the pixels no window covers get +0 (copies of the zero
// tile's rows), as the reference's windows of padding alone give.
// Input rows [y0, y1) alone (a band: BandedMaxPoolGradient) where given.
void IntoInput(Emitter& e, const Layout& a, const isa::WindowGeometry& g, const LayerRows& in,
               int64_t out, const std::function<void(int64_t, int64_t, int64_t)>& run,
               int64_t y0 = 0, int64_t y1 = -1) {
  if (y1 < 0) y1 = in.h;
  const int64_t h = static_cast<int64_t>(g.out_h), w = static_cast<int64_t>(g.out_w);
  const int64_t top = std::min(y1, h);
  if (w == in.w && y0 < top) run(y0 * w, (top - y0) * w, out + y0 * in.w);
  for (int64_t y = y0; y < top && w < in.w; ++y) {
    run(y * w, w, out + y * in.w);
    e.Vector(VectorOp::kCopy, a.zero, 0, out + y * in.w + w, in.w - w, 0);
  }
  const int64_t end = std::min(y1 * in.w, in.pixels);
  for (int64_t r0 = std::max(y0, h) * in.w; r0 < end; r0 += a.n)
    e.Vector(VectorOp::kCopy, a.zero, 0, out + r0, std::min<int64_t>(a.n, end - r0), 0);
}

// W'' of input channel block bi (its input channels the lanes): its tap (taps - 1 - t), an
// output channel a row, from tap t of the weights transposed, a block of the outputs at a
// time (out.c rows a tap: with one block, the outputs packed; with several, block j's N
// rows j N rows on).
void ConvInputBlock(Emitter& e, const Layout& a, const Layer& l, const ParamRows& p, int bi,
                    int64_t flipped) {
  const int64_t taps = int64_t{l.kernel_h} * l.kernel_w;
  std::vector<std::array<int64_t, 3>> each;
  for (int64_t t = 0; t < taps; ++t)
    for (int64_t j = 0; j < p.mb; ++j)
      each.push_back({p.wb + p.Block(j, 0, a.n) + t * l.in.c + int64_t{bi} * a.n,
                      flipped + (taps - 1 - t) * l.out.c + j * a.n, p.Outs(j, a.n)});
  e.Transposes(each);
}

// Output pixels [first, first + count) of the input gradient's window (set last) over the
// gradient's map from `dz` into rows from `to`, through W'' (ConvInputBlock): with one
// block of outputs the window's K-tiles of the packed taps; with several, each tap of each
// block in turn (the order of W'''s rows: tap, then output channel), added.
void FlippedWindow(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r, int64_t dz,
                   int64_t flipped, int64_t first, int64_t count, int64_t to) {
  const int64_t taps = int64_t{l.kernel_h} * l.kernel_w;
  if (r.cb == 1) return e.Window(dz, count, flipped, 0, TilesOf(taps * r.c, a.n), to, 0, first);
  e.Chunks(count, to, 0, false, [&](uint64_t acc, int64_t r0, int64_t len) {
    for (int64_t t = 0; t < taps; ++t)
      for (int j = 0; j < r.cb; ++j) {
        e.Tile(flipped + t * r.c + int64_t{j} * a.n);
        e.Raw().MatmulWindow(e.U(dz + r.Block(j)), acc, e.U(len), e.U(first + r0), e.U(t), true,
                             isa::AddIf(t > 0 || j > 0));
      }
  });
}

// With FPieces of more than one buffer, the weight gradient over F's pieces read back from
// its home, each (and the next) at its first chunk: a group of dWᵀ's K-tiles (and each block
// of outputs) reads them all again.
void PiecedWeightGradient(Emitter& e, const Layout& a, const ParamRows& p, const LayerRows& r) {
  const FPieces fp = FPiecesOf(a, r);
  const int64_t chunks = fp.rows / a.n;  // a piece's
  auto read = [&](int64_t i) {
    if (i >= fp.Count(r)) return;
    const int64_t r0 = i * fp.rows, len = std::min(fp.rows, r.padded - r0);
    for (int64_t k = 0; k < p.kb; ++k)
      MoveRows(e.Raw(), a, fp.At(r, i) + k * fp.rows, r.f_home + k * r.padded + r0, len, false);
  };
  e.WeightGradient(
      p, r.grad, r.padded,
      [&](int64_t c) {
        if (c == 0) read(0);
        if (c % chunks == 0) read(c / chunks + 1);
        return fp.At(r, c / chunks) + (c % chunks) * a.n;
      },
      fp.rows, r.padded / a.n);
}

void EmitConvBackward(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r, Sums* sums) {
  const ParamRows& p = a.param[static_cast<size_t>(r.param)];
  const int n = a.n;
  e.Pass(l.name + " weight gradient", a.b * r.pixels * (p.ins + 1) * p.outs);
  MoveF(e, a, r, /*out=*/false);
  if (Pieced(a, l) && FPiecesOf(a, r).buffers > 1) {
    PiecedWeightGradient(e, a, p, r);
  } else {
    e.WeightGradient(p, r.grad, r.padded, r.f, r.padded, r.padded / n);
  }
  if (l.depthwise)  // the expanded kernels' zeros take none: +0 off the diagonal
    EmitVector(e.P(), VectorOp::kSelect, r.mask, a.zero, p.g, p.Values(n), kBcast);
  GradientOut(e, a, p);
  const int k = l.inputs[0];
  const int64_t into = sums->Into(a, k);
  if (into < 0) return;
  const LayerRows& in = a.In(k);
  e.Pass(l.name + " input gradient", int64_t{a.b} * in.pixels * p.ins * p.outs);
  const bool home = r.flipped_home >= 0;                            // W'' in HBM (hbm_made)
  const bool made = (a.keep_flipped || home) && a.pass > 0;         // in the first pass
  if (a.hbm_state && !made) LayerTile(e, a, p, /*forward=*/false);  // the shared rows
  const isa::WindowGeometry g = GradientWindow(r, BlockLanes(r.c, n), n, l.kernel_h, l.kernel_w,
                                               l.stride, l.pad_top, l.pad_left, in);
  for (int bi = 0; bi < in.cb; ++bi) {
    const int64_t flipped = r.flipped + (a.keep_flipped ? bi * FlippedRows(l, n) : 0);
    if (!made) ConvInputBlock(e, a, l, p, bi, flipped);
    if (home)
      MadeRows(e, a, flipped, r.flipped_home + bi * FlippedRows(l, n), FlippedRows(l, n),
               /*out=*/!made);
    e.SetWindow(g);
    for (int img = 0; img < a.mb; ++img)
      IntoInput(e, a, g, in, into + in.Block(bi) + img * in.pixels,
                [&](int64_t first, int64_t count, int64_t to) {
                  FlippedWindow(e, a, l, r, r.grad + img * r.pixels, flipped, first, count, to);
                });
  }
  sums->Done(e, a, k);
}

void EmitPoolBackward(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r, Sums* sums) {
  const int k = l.inputs[0];
  const int64_t into = sums->Into(a, k);
  if (into < 0) return;
  e.Pass(l.name + " gradient");
  const LayerRows& in = a.In(k);
  const bool global = l.global_pool;  // a window of the whole map, one output pixel
  if (global && !FitsAWindow(in.h, in.w)) {
    ChunkedPoolGradient(e, a, in, r, into);
    return sums->Done(e, a, k);
  }
  if (PoolGradientIsCopied(l, a.n)) {
    CopiedPoolGradient(e, a, in, r, into);
    return sums->Done(e, a, k);
  }
  const isa::WindowGeometry g =
      GradientWindow(r, BlockLanes(r.c, a.n), a.n, l.pool_h, l.pool_w, global ? 1 : l.pool_stride,
                     l.pad_top, l.pad_left, in);
  e.SetWindow(g);
  for (int j = 0; j < r.cb; ++j)
    for (int img = 0; img < a.mb; ++img)
      IntoInput(e, a, g, in, into + in.Block(j) + img * in.pixels,
                [&](int64_t first, int64_t count, int64_t to) {
                  e.Window(r.grad + r.Block(j) + img * r.pixels, count, r.tile, 0,
                           PoolKTiles(l, a.n), to, 0, first, TapATile(l, a.n));
                });
  sums->Done(e, a, k);
}

// Tap after tap, output pixels [p0, p0 + px) of each of `images` images (their maps from
// `map`, `in_pixels` apart; their outputs and gradients from `out` and `grad`, px apart) again
// (into `tap`), where they equal the maximum and no earlier tap did (`taken`), the
// gradient's share D_t (into rows from shares + t stride).
void MaxShares(Emitter& e, const Layout& a, const Layer& l, int64_t map, int64_t in_pixels,
               int images, int64_t p0, int64_t px, int64_t out, int64_t grad, int64_t stride) {
  const int64_t rows = images * px;
  e.SetWindow(MaxGeometry(l, a.n));
  for (int64_t t = 0; t < Taps(l); ++t) {
    for (int img = 0; img < images; ++img)
      MaxTaps(e, a, map + img * in_pixels, px, t, t + 1, a.tap + img * px, false, 0, p0);
    const int64_t mask = t == 0 ? a.taken : a.tap;
    EmitVector(e.P(), VectorOp::kEqual, a.tap, out, mask, rows, 0);
    if (t > 0) {
      EmitVector(e.P(), VectorOp::kSelect, a.taken, a.zero, a.tap, rows, kBcast);
      EmitVector(e.P(), VectorOp::kMax, a.taken, a.tap, a.taken, rows, 0);
    }
    EmitVector(e.P(), VectorOp::kMul, grad, mask, a.shares + t * stride, rows, 0);
  }
}

// Input pixels [first, first + count) of one image through the gradient's window (set last)
// into rows from `to`: each one's shares, K-tile T - 1 - t of D_t's map (from shares + t
// stride), added.
void SharesIntoInput(Emitter& e, const Layout& a, const Layer& l, int64_t shares, int64_t stride,
                     int64_t first, int64_t count, int64_t to) {
  const int64_t taps = Taps(l);
  e.Chunks(count, to, 0, false, [&](uint64_t acc, int64_t r0, int64_t len) {
    for (int64_t t = 0; t < taps; ++t) {
      const bool load = e.Tile(a.id, false, true);
      e.Raw().MatmulWindow(e.U(shares + t * stride), acc, e.U(len), e.U(first + r0),
                           e.U(taps - 1 - t), load, isa::AddIf(t > 0));
    }
  });
}

// Channel block j of a max pooling's gradient: every image's shares (MaxShares), then each
// input pixel's through the gradient's window (SharesIntoInput), into rows from `into`.
void MaxPoolBlockGradient(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r, int j,
                          int64_t into) {
  const LayerRows& in = a.In(l.inputs[0]);
  MaxShares(e, a, l, in.out + in.Block(j), in.pixels, a.mb, 0, r.pixels, r.out + r.Block(j),
            r.grad + r.Block(j), r.padded);
  const isa::WindowGeometry g =
      GradientWindow(r, a.n, a.n, l.pool_h, l.pool_w, l.pool_stride, l.pad_top, l.pad_left, in);
  e.SetWindow(g);
  for (int img = 0; img < a.mb; ++img)
    IntoInput(e, a, g, in, into + img * in.pixels, [&](int64_t first, int64_t count, int64_t to) {
      SharesIntoInput(e, a, l, a.shares + img * r.pixels, r.padded, first, count, to);
    });
}

// With MaxBands, channel block j of a max pooling's gradient an image and a band of its
// input's rows at a time: the shares of the band's output rows (those whose windows read it),
// then the band's pixels through the gradient's window, which reads only those rows: D_t's
// map from `shares` less the band's first output pixel.
void BandedMaxPoolGradient(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r, int j,
                           int64_t into) {
  const LayerRows& in = a.In(l.inputs[0]);
  const MaxBands bands = MaxBandsOf(a, l);
  const isa::WindowGeometry g =
      GradientWindow(r, a.n, a.n, l.pool_h, l.pool_w, l.pool_stride, l.pad_top, l.pad_left, in);
  for (int img = 0; img < a.mb; ++img)
    for (int64_t y0 = 0; y0 < in.h; y0 += bands.rows) {
      const int64_t y1 = std::min<int64_t>(y0 + bands.rows, in.h);
      const auto [o0, o1] = OutRowsOf(l, y0, y1);
      const int64_t p0 = o0 * r.w, at = img * r.pixels + p0;
      if (o1 > o0)
        MaxShares(e, a, l, in.out + in.Block(j) + img * in.pixels, in.pixels, 1, p0,
                  (o1 - o0) * r.w, r.out + r.Block(j) + at, r.grad + r.Block(j) + at, bands.stride);
      e.SetWindow(g);
      IntoInput(
          e, a, g, in, into + img * in.pixels,
          [&](int64_t first, int64_t count, int64_t to) {
            SharesIntoInput(e, a, l, a.shares - p0, bands.stride, first, count, to);
          },
          y0, y1);
    }
}

void EmitMaxPoolBackward(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r,
                         Sums* sums) {
  const int k = l.inputs[0];
  const int64_t into = sums->Into(a, k);
  if (into < 0) return;
  e.Pass(l.name + " gradient");
  for (int j = 0; j < r.cb; ++j)
    (MaxBandsOf(a, l).rows < l.in.h ? BandedMaxPoolGradient : MaxPoolBlockGradient)(
        e, a, l, r, j, into + a.In(k).Block(j));
  sums->Done(e, a, k);
}

// Each input's gradient: the output's through the identity shifted back from its lanes.
void EmitConcatBackward(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r,
                        Sums* sums) {
  e.Pass(l.name + " gradient");
  for (size_t k = 0; k < l.inputs.size(); ++k) {
    const int64_t into = sums->Into(a, l.inputs[k]);
    e.Chunks(r.rows, into, 0, false, [&](uint64_t acc, int64_t r0, int64_t len) {
      e.Tile(r.shift + (2 * static_cast<int64_t>(k) + 1) * a.n);
      e.Raw().Matmul(e.U(r.grad + r0), acc, e.U(len), true, isa::Acc::kOverwrite);
    });
    sums->Done(e, a, l.inputs[k]);
  }
}

// A batch normalization's backward pass (graph_ref::BatchNormBackward), channel block bk:
// dgamma and dbeta from float32 sums into its gradient's rows (gamma's row, then beta's).
void BatchNormBlockGradient(Emitter& e, const Layout& a, const LayerRows& r, const BnBlock& bk) {
  const int64_t t = a.bn_tmp, b = bk.sum_dy, g = bk.sum_dyx;
  EmitRowSum(e, a, bk.grad, 0, b, r.rows);
  EmitVector(e.P(), VectorOp::kMul, bk.grad, bk.f, t, r.rows, kO32);
  EmitRowSum(e, a, t, kA32, g, r.rows);
  EmitVector(e.P(), VectorOp::kCopy, g, 0, bk.g, 1, kA32);
  EmitVector(e.P(), VectorOp::kCopy, b, 0, bk.g + 1, 1, kA32);
}

// Then its input's gradient gamma inv (dy - (dbeta / m + x^ dgamma / m)) into `into`.
void BatchNormBlockInput(Emitter& e, const Layout& a, const LayerRows& r, const BnBlock& bk,
                         int64_t into) {
  const int64_t t = a.bn_tmp, b = bk.sum_dy, g = bk.sum_dyx;
  const int64_t bm = BnRowAt(a, kMeanDy), gm = BnRowAt(a, kMeanDyX), kg = BnRowAt(a, kGammaInv);
  RowOp(e, VectorOp::kMul, b, BnConst(r, chip::kBnInvM), bm);
  RowOp(e, VectorOp::kMul, g, BnConst(r, chip::kBnInvM), gm);
  RowOp(e, VectorOp::kMul, bk.gamma, bk.inv, kg);
  EmitVector(e.P(), VectorOp::kMul, bk.f, gm, t, r.rows, kB32 | kO32 | kBcast);
  EmitVector(e.P(), VectorOp::kAdd, t, bm, t, r.rows, kA32 | kB32 | kO32 | kBcast);
  EmitVector(e.P(), VectorOp::kSub, bk.grad, t, t, r.rows, kB32 | kO32);
  EmitVector(e.P(), VectorOp::kMul, t, kg, into, r.rows, kA32 | kB32 | kBcast);
}

void EmitBatchNormBackward(Emitter& e, const Layout& a, const Layer& l, const LayerRows& r,
                           Sums* sums) {
  e.Pass(l.name + " weight gradient");
  for (int j = 0; j < r.cb; ++j) BatchNormBlockGradient(e, a, r, BnBlockOf(a, l, r, j));
  GradientOut(e, a, a.param[static_cast<size_t>(r.param)]);
  const int k = l.inputs[0];
  if (sums->Into(a, k) >= 0) StageBatchNorm(e, a, r, /*in=*/true, /*kept=*/false);  // gamma
  const int64_t into = sums->Into(a, k);
  if (into < 0) return;
  e.Pass(l.name + " input gradient");
  for (int j = 0; j < r.cb; ++j)
    BatchNormBlockInput(e, a, r, BnBlockOf(a, l, r, j), into + r.Block(j));
  sums->Done(e, a, k);
}

void EmitLayerBackward(Emitter& e, const Layout& a, const nn::Model& m, size_t i, Sums* sums) {
  const Layer& l = m.layers[i];
  const LayerRows& r = a.layer[i];
  if (l.type == LayerType::kFlatten) return;  // its gradient is its input's
  if (Relu(l)) {
    e.Pass(l.name + (l.HasWeights() ? " weight gradient" : " gradient"));
    for (int j = 0; j < r.cb; ++j)
      e.Mask(r.out + r.Block(j), r.grad + r.Block(j), r.rows, Relu6(l) ? a.six : -1);
  }
  switch (l.type) {
    case LayerType::kConv2d:
      EmitConvBackward(e, a, l, r, sums);
      break;
    case LayerType::kDense:
      EmitDenseBackward(e, a, l, r, sums);
      break;
    case LayerType::kAvgPool2d:
      EmitPoolBackward(e, a, l, r, sums);
      break;
    case LayerType::kMaxPool2d:
      EmitMaxPoolBackward(e, a, l, r, sums);
      break;
    case LayerType::kConcat:
      EmitConcatBackward(e, a, l, r, sums);
      break;
    case LayerType::kBatchNorm:
      EmitBatchNormBackward(e, a, l, r, sums);
      break;
    default:  // an add: its gradient to both its inputs
      e.Pass(l.name + " gradient");
      sums->AddRows(e, a, l.inputs[0], r.grad);
      sums->AddRows(e, a, l.inputs[1], r.grad);
      break;
  }
}

// The step on batch buffer `a`'s (ForParity); with `prefetch` it first reads the next
// batch into the other buffer, which runs behind the step (the infeed). Then the forward
// pass, the loss, the backward pass, the cores' gradient sum, the update, the results out.
// The loss's rows of pass layout `a`, dL/dlogits into the last layer's gradient; its classes
// in blocks of N lanes (the logits' bp rows apart, the labels' b, the gradient's a block's).
LossRows LossOf(const Layout& a) {
  const LayerRows& last = a.layer.back();
  LossRows r = LossRowsOf(a, last.grad);
  r.blocks = a.class_blocks;
  r.logits_stride = a.bp;
  r.y_stride = a.b;
  r.dz_stride = last.padded;
  r.sm_stride = 2 * int64_t{a.mb};
  return r;
}

// Layer r's output, gradient or F (`which`) between its rows in the window and its home.
enum class Map { kOut, kGrad, kF };
void MoveMap(Emitter& e, const Layout& a, const LayerRows& r, Map which, bool out) {
  const int64_t map = r.cb * r.padded;
  if (which == Map::kOut) return MoveMap(e, a, r.out, r.out_home, map, out);
  if (which == Map::kGrad) return MoveMap(e, a, r.grad, r.grad_home, map, out);
  MoveMap(e, a, r.f, r.f_home, r.f_rows, out);
}

// With hbm_maps, the maps the step before wrote out (a forward pass's output, the loss's
// gradient, a backward pass's inputs' gradients), which are in its window as they are in
// HBM: the next step takes them there instead of reading them in, where its own rows leave
// them be. The steps' windows take the window's two ends in turn (`top`), so that the next
// step's rows lie clear of the step before's where both fit.
class Resident {
 public:
  // The step's window: the rows of StepRows(..., top()) for a step of `rows` rows, from
  // First.
  bool top() const { return top_; }
  int64_t First(const Layout& a, int64_t rows) const {
    return top_ ? a.window + a.window_rows - rows : a.window;
  }
  // Where the step before left layer k's map `which` and the step of window [lo, hi) may
  // take it from: its row, or -1.
  int64_t Find(const Layout& a, int k, Map which, int64_t lo, int64_t hi) const {
    const LayerRows& r = a.layer[static_cast<size_t>(k)];
    for (const auto& [layer, w, row] : left_)
      if (layer == k && w == which && (row + r.cb * r.padded <= lo || row >= hi)) return row;
    return -1;
  }
  // The step just emitted wrote out these maps (layer, map, row) and took the window's
  // `top` end.
  void Left(std::vector<std::tuple<int, Map, int64_t>> maps) {
    left_ = std::move(maps);
    top_ = !top_;
  }

 private:
  std::vector<std::tuple<int, Map, int64_t>> left_;
  bool top_ = false;
};

// Layer k's map `which` (output or gradient) in step layout s: where the step before left
// it (Resident), else read in from its home.
void TakeMap(Emitter& e, const nn::Model& m, Layout* s, int k, Map which, const Resident& res,
             int64_t lo, int64_t hi) {
  LayerRows& r = s->layer[static_cast<size_t>(k)];
  const int64_t row = res.Find(*s, k, which, lo, hi);
  if (row < 0) return MoveMap(e, *s, r, which, false);
  (which == Map::kOut ? r.out : r.grad) = row;
  CopyFlattens(m, s);
}

// Zeros into each of the `blocks` blocks from `at` (r.padded rows apart) past its r.rows: a
// window's rows were another layer's, and a weight gradient reads whole chunks of N rows.
void ZeroPadding(Emitter& e, const Layout& a, int64_t at, int64_t blocks, const LayerRows& r) {
  for (int64_t j = 0; j < blocks && r.rows < r.padded; ++j)
    e.Vector(VectorOp::kCopy, a.zero, 0, at + j * r.padded + r.rows, r.padded - r.rows, 0);
}

// With hbm_maps, layer i's forward pass in the window: its inputs' outputs in, its output
// and F out.
void MapsForward(Emitter& e, const Layout& a, const nn::Model& m, size_t i, Resident* res) {
  const Layer& l = m.layers[i];
  if (l.type == LayerType::kFlatten) return;
  int64_t rows = 0;
  Layout s = StepRows(m, a, i, &rows, res->top());
  const int64_t lo = res->First(a, rows);
  const LayerRows& r = s.layer[i];
  const bool last = i + 1 == m.layers.size();
  e.Pass(l.name + " forward");
  for (const int k : Involved(m, i))
    if (k != static_cast<int>(i)) TakeMap(e, m, &s, k, Map::kOut, *res, lo, lo + rows);
  const bool f = r.f_rows > 0 && !Pieced(s, l);  // a convolution's: PiecedConvForward
  if (!last) ZeroPadding(e, s, r.out, r.cb, r);
  if (f) ZeroPadding(e, s, r.f, r.f_rows / r.padded, r);
  EmitLayerForward(e, s, m, i);
  if (!last) MoveMap(e, s, r, Map::kOut, true);
  if (f) MoveMap(e, s, r, Map::kF, true);
  std::vector<std::tuple<int, Map, int64_t>> left;
  if (!last) left.emplace_back(static_cast<int>(i), Map::kOut, r.out);
  res->Left(std::move(left));
}

// With hbm_maps, the loss into the last layer's gradient, out.
void MapsLoss(Emitter& e, const Layout& a, const nn::Model& m, bool mean, Resident* res) {
  const Layout s = StepRows(m, a, m.layers.size() - 1, nullptr, res->top());
  const LayerRows& r = s.layer.back();
  e.Pass("loss");
  ZeroPadding(e, s, r.grad, r.cb, r);
  EmitSoftmaxLoss(e.P(), LossOf(s), s.mb, mean);
  MoveMap(e, s, r, Map::kGrad, true);
  res->Left({{static_cast<int>(m.layers.size() - 1), Map::kGrad, r.grad}});
}

// With hbm_maps, layer i's backward pass in the window: its gradient, and its output and F
// where it reads them, in; its inputs' gradients so far in (a first one's padding zeroed),
// then out.
void MapsBackward(Emitter& e, const Layout& a, const nn::Model& m, size_t i, Sums* sums,
                  Resident* res) {
  const Layer& l = m.layers[i];
  if (l.type == LayerType::kFlatten) return;
  int64_t rows = 0;
  Layout s = StepRows(m, a, i, &rows, res->top());
  const int64_t lo = res->First(a, rows);
  const LayerRows& r = s.layer[i];
  const bool max_pool = l.type == LayerType::kMaxPool2d;
  e.Pass(l.name + (l.HasWeights() ? " weight gradient" : " gradient"));
  TakeMap(e, m, &s, static_cast<int>(i), Map::kGrad, *res, lo, lo + rows);
  if (Relu(l) || max_pool) MoveMap(e, s, r, Map::kOut, false);
  if (r.f_rows > 0 && !(Pieced(s, l) && FPiecesOf(s, r).buffers > 1))  // PiecedWeightGradient
    MoveMap(e, s, r, Map::kF, false);
  std::vector<int> inputs = Involved(m, i);
  inputs.erase(inputs.begin());
  for (const int k : inputs) {
    const LayerRows& in = s.layer[static_cast<size_t>(k)];
    if (max_pool) MoveMap(e, s, in, Map::kOut, false);
    if (sums->Has(k)) {
      MoveMap(e, s, in, Map::kGrad, false);
    } else {
      ZeroPadding(e, s, in.grad, in.cb, in);
    }
  }
  if (r.param >= 0) {  // the rows an input gradient reads past the tile: zeros
    const ParamRows& p = s.param[static_cast<size_t>(r.param)];
    if (ReadsPastItsTile(m, p, s.n))
      e.Vector(VectorOp::kCopy, s.zero, 0, p.wb + p.Values(s.n), s.n, 0);
  }
  EmitLayerBackward(e, s, m, i, sums);
  std::vector<std::tuple<int, Map, int64_t>> left;
  for (const int k : inputs) {
    if (!sums->Has(k)) continue;
    MoveMap(e, s, s.layer[static_cast<size_t>(k)], Map::kGrad, true);
    left.emplace_back(k, Map::kGrad, s.layer[static_cast<size_t>(k)].grad);
  }
  res->Left(std::move(left));
}

// With pass_images, pass a.pass's images from the batch's host rows into the batch buffer's.
void PassImages(Emitter& e, const Layout& a) {
  e.Pass("images in");
  const int64_t rows = int64_t{a.mb} * a.img_rows;
  EmitReadHost(e.P(), a.n, a.h_batch + 4 + a.pass * rows, a.x0, rows);
}

// Pass u of a step: its images (pass_images), the forward pass, the loss, the backward pass,
// and a later pass's gradients added to the first's (in the buffer).
void EmitPass(Emitter& e, const Layout& a, const nn::Model& m, int u) {
  const Layout au = ForPass(a, u);
  if (a.pass_images) PassImages(e, au);
  const size_t layers = m.layers.size();
  Resident res;  // nothing left in the window that this pass knows of
  for (size_t i = 0; i < layers; ++i)
    a.hbm_maps ? MapsForward(e, au, m, i, &res) : EmitLayerForward(e, au, m, i);
  if (a.hbm_maps) {
    MapsLoss(e, au, m, a.passes == 1, &res);
  } else {
    e.Pass("loss");
    EmitSoftmaxLoss(e.P(), LossOf(au), a.mb, a.passes == 1);
  }
  if (a.passes > 1 && u + 1 == a.passes) EmitLossMean(e.P(), LossRowsOf(a, 0), a.b);
  Sums sums(layers);
  for (size_t i = layers; i-- > 0;)
    a.hbm_maps ? MapsBackward(e, au, m, i, &sums, &res) : EmitLayerBackward(e, au, m, i, &sums);
  if (u == 0 || a.hbm_state) return;
  e.Pass("pass gradient sum");
  EmitVector(e.P(), VectorOp::kAdd, a.param.front().g, a.pass_g, a.param.front().g, a.GradRows(),
             0);
}

// A fresh emitter of a step's part.
std::unique_ptr<Emitter> PartEmitter(const Layout& a, PassLog log) {
  auto e = std::make_unique<Emitter>(a);
  e->TakeTurns();
  if (a.mxus > 1) e->SideUnit();
  e->Passes() = std::move(log);
  return e;
}

// The instructions of a step's end (FinishStep: the cores' gradient sum, the updates, the
// results out).
size_t FinishWords(const Layout& a, const Optimizer& opt) {
  Emitter e(a);
  e.TakeTurns();
  std::vector<int32_t> pass_of;
  PassLog passes;
  return shell::FinishStep(e, a, opt, &pass_of, &passes).words.size();
}

// The step: the next batch read ahead with `prefetch`, the passes, the end (FinishStep). In
// parts of whole passes where it is longer than a core's program region holds
// (the layout's program_words): a part ends before a pass that might not fit beside the passes
// before it and the end, the next starting afresh (its tiles loaded and windows set again).
std::vector<isa::Program> StepProgram(const Layout& a, const nn::Model& m, const Optimizer& opt,
                                      bool prefetch, std::vector<std::vector<int32_t>>* pass_of,
                                      PassLog* passes) {
  std::vector<isa::Program> parts;
  pass_of->clear();
  std::unique_ptr<Emitter> e = PartEmitter(a, PassLog());
  shell::StartStep(*e, a, prefetch);
  const size_t finish = a.passes > 1 ? FinishWords(a, opt) : 0;
  size_t most = 0;  // the most instructions a pass has taken
  for (int u = 0; u < a.passes; ++u) {
    if (e->Raw().program().words.size() + most + finish > a.program_words) {
      parts.push_back(e->Take());
      pass_of->push_back(e->Passes().PassOf(parts.back().words.size()));
      e = PartEmitter(a, e->Passes().Continued());
    }
    const size_t before = e->Raw().program().words.size();
    EmitPass(*e, a, m, u);
    most = std::max(most, e->Raw().program().words.size() - before);
  }
  pass_of->emplace_back();
  parts.push_back(shell::FinishStep(*e, a, opt, &pass_of->back(), passes));
  return parts;
}

// Every row after the batch buffers zeroed (from the host's zero rows), once: rows that the
// step reads as zeros without writing them (past a tensor's last row up to a whole chunk of
// N, dWᵀ's rows past the outputs, W'''s past its taps) stay so.
void EmitStart(Emitter& e, const Layout& a) {
  for (int64_t r0 = a.activations; r0 < a.end; r0 += a.n)
    EmitReadHost(e.P(), a.n, a.h_zero, r0, std::min<int64_t>(a.n, a.end - r0));
}

// A concatenation's shifted identities (MakeLayout's `shift`) and a depthwise
// convolution's gradient mask.
void PutConcatAndMask(const nn::Model& m, const Layout& a, size_t i, std::vector<uint16_t>* img) {
  const Layer& l = m.layers[i];
  const int n = a.n;
  auto at = [n](int64_t row, int64_t lane) { return static_cast<size_t>(row * n + lane); };
  if (l.type == LayerType::kConcat) {
    int64_t c0 = 0;
    for (size_t k = 0; k < l.inputs.size(); ++k) {
      const int64_t c = m.OutputOf(l.inputs[k]).c, s = a.layer[i].shift + 2 * int64_t(k) * n;
      for (int64_t ch = 0; ch < c; ++ch) {
        (*img)[at(s + ch, c0 + ch)] = Bf16Of(1.0f);
        (*img)[at(s + n + c0 + ch, ch)] = Bf16Of(1.0f);
      }
      c0 += c;
    }
  }
  if (l.depthwise)
    for (int64_t row = 0; row < int64_t{l.kernel_h} * l.kernel_w * l.in.c; ++row)
      for (int64_t o = 0; o < l.out.c; ++o)
        if (row % l.in.c != o) (*img)[at(a.layer[i].mask + row, o)] = Bf16Of(1.0f);
}

// The poolings' tiles, the concatenations' and the depthwise convolutions' masks.
void PutTiles(const nn::Model& m, const Layout& a, std::vector<uint16_t>* img) {
  for (int j = 0; a.six >= 0 && j < a.n; ++j)
    (*img)[static_cast<size_t>(a.six * a.n + j)] = Bf16Of(6.0f);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const Layer& l = m.layers[i];
    PutConcatAndMask(m, a, i, img);
    if (IsBatchNorm(l)) {
      const std::vector<float> k = chip::BatchNormConstants(l.epsilon, l.momentum, a.layer[i].rows);
      for (int64_t c = 0; c < chip::kBnConstants; ++c)
        for (int j = 0; j < a.n; ++j) PutFp32(img, a.layer[i].bn_const + 2 * c, a.n, j, k[c]);
    }
    if (l.type != LayerType::kAvgPool2d) continue;
    const int64_t c = BlockLanes(l.in.c, a.n), taps = PoolTileRows(l, a.n) / c;
    const uint16_t v = Bf16Of(1.0f / static_cast<float>(int64_t{l.pool_h} * l.pool_w));
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t ch = 0; ch < c; ++ch)
        (*img)[static_cast<size_t>((a.layer[i].tile + t * c + ch) * a.n + ch)] = v;
  }
}

// Why the chip's graph step does not take layer i's channels ("" where it does): a map of
// more than N channels goes in channel blocks of N (a multiple of N; the classes any count),
// which a concatenation, a depthwise convolution, the images and a map read in chunks do not
// take.
std::string ChannelsUnsupported(const nn::Model& m, size_t i, const nn::Shape3& s, bool images,
                                int n) {
  const Layer& l = m.layers[i];
  const int out = l.type == LayerType::kFlatten ? s.c : l.out.c;
  const bool logits = i + 1 == m.layers.size();  // the classes: any count (the loss pads)
  for (const int c : {s.c, logits ? s.c : out})
    if (c > n && c % n != 0)
      return fmt::format(
          "a map of more than N = {} channels goes in blocks of N, and {} channels are not a "
          "multiple of N",
          n, c);
  if (std::max(s.c, out) <= n) return "";
  if (l.type == LayerType::kConcat || l.depthwise)
    return fmt::format(
        "a concatenation or a depthwise convolution of maps of at most N = {} "
        "channels",
        n);
  if (images && s.c > n) return fmt::format("images of at most N = {} channels", n);
  const bool whole = l.type == LayerType::kDense || (l.IsPool() && l.global_pool);
  if (whole && !FitsAWindow(s.h, s.w))
    return fmt::format(
        "the {} x {} x {} map it reads is more than 15 x 15 pixels and more than "
        "N = {} channels",
        s.h, s.w, s.c, n);
  return "";
}

// Why the chip's graph step does not take layer i ("" where it does): beyond
// CheckGraphTrainable's, the step's own limits.
std::string Unsupported(const nn::Model& m, size_t i, int n) {
  const Layer& l = m.layers[i];
  const int in = l.inputs[0];
  const bool images = RowsSource(m, in) == nn::kModelInput;
  if (images && !(l.type == LayerType::kConv2d && in == nn::kModelInput) &&
      l.type != LayerType::kDense && l.type != LayerType::kFlatten)
    return "only a convolution or a dense layer (flattened or not) reads the images";
  const nn::Shape3 s = RowsShape(m, in);
  if (std::string why = ChannelsUnsupported(m, i, s, images, n); !why.empty()) return why;
  const bool whole = l.type == LayerType::kDense || (l.IsPool() && l.global_pool);
  const bool chunked =
      (l.type == LayerType::kDense || l.global_pool) && ChunksOf(int64_t{s.h} * s.w, s.c, n).a > 0;
  if (whole && !images && !chunked && (s.h > 15 || s.w > 15))
    return fmt::format(
        "the {} x {} x {} map it reads is more than 15 x 15 pixels (a window's "
        "kernel) and its pixels do not part into windows of whole K-tiles",
        s.h, s.w, s.c);
  if (l.type == LayerType::kConv2d &&
      (l.kernel_h > 15 || l.kernel_w > 15 || l.pad_top > 15 || l.pad_left > 15))
    return "a convolution of at most 15 x 15 taps and padding";
  if (l.IsPool() && !l.global_pool && (l.pool_h > 15 || l.pool_w > 15))
    return "a pooling of at most 15 x 15";
  return "";
}

void CheckGraphStep(const nn::Model& m, const config::TpuConfig& cfg) {
  CheckTrainingChip(cfg);
  CheckGraphTrainable(m);
  std::vector<int> readers(m.layers.size(), 0);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const std::string why = Unsupported(m, i, cfg.array_dim);
    if (!why.empty()) {
      throw UsageError(
          fmt::format("layer '{}' ({}) of model '{}' on config '{}': {} "
                      "(docs/training.md, \"Graphs\"); train it on the CPU "
                      "(tpusim train without --config)",
                      m.layers[i].name, m.layers[i].TypeName(), m.name, cfg.name, why));
    }
  }
  const int lanes = static_cast<int>(BiasLanes(m, cfg.array_dim).size());
  const int sets = 1 + lanes + HasRelu6(m);
  if (sets > cfg.param_sets) {
    throw UsageError(fmt::format(
        "model '{}': the bias lanes of its convolution and dense layers (in {} lanes){} take "
        "{} of the activation unit's parameter sets; config '{}' has param_sets = {}",
        m.name, lanes, HasRelu6(m) ? " and ReLU6" : "", sets, cfg.name, cfg.param_sets));
  }
}

bool HasBatchNorm(const nn::Model& m) {
  return std::any_of(m.layers.begin(), m.layers.end(), IsBatchNorm);
}

// Throws UsageError where the cores' copies of the state in HBM do not fit the weight memory.
void CheckHbmState(const nn::Model& m, const Layout& a, const config::TpuConfig& cfg) {
  const uint64_t end =
      a.hbm_made ? a.hbm_made_addr + static_cast<uint64_t>(a.cores * a.made_rows) * 2 * a.n
                 : a.hbm_maps_addr + static_cast<uint64_t>(a.cores * a.maps_rows) * 2 * a.n;
  if (a.hbm_state && end > static_cast<uint64_t>(cfg.weight_mem_bytes)) {
    const char* too =
        a.hbm_maps ? " and every layer's maps" : (a.hbm_f ? " and each layer's F" : "");
    throw UsageError(fmt::format(
        "the step of '{}' keeps its state and gradients{} in HBM, {} bytes at {} images a "
        "pass; config '{}' has weight_mem_bytes = {}: a smaller --batch",
        m.name, too, end, a.mb, cfg.name, cfg.weight_mem_bytes));
  }
}

constexpr StateAt kPlaces[] = {StateAt::kBuffer, StateAt::kHbm, StateAt::kHbmWithF,
                               StateAt::kHbmWithMaps};

// The layout of a core's b images in passes of mb with the state at `where` (kBuffer, kHbm or
// kHbmWithF); with several passes, each convolution's W'' kept for them all where that fits
// too. Throws UsageError where the accumulators are too few.
Layout LayoutAt(const nn::Model& m, int b, const Optimizer& opt, const config::TpuConfig& cfg,
                int cores, int mb, StateAt where) {
  const Layout a = MakeLayout(m, b, opt, cfg, cores, mb, false, where);
  if (a.acc_rows < a.n) {
    throw UsageError(fmt::format("config '{}': acc_depth_rows = {} is too few for the step of '{}'",
                                 cfg.name, cfg.acc_depth_rows, m.name));
  }
  if (mb == b || a.end > cfg.ub_depth_rows) return a;
  const Layout kept = MakeLayout(m, b, opt, cfg, cores, mb, /*keep_flipped=*/true, where);
  return kept.end <= cfg.ub_depth_rows ? kept : a;
}

// The first place of the state (`at` may choose) where b images in one pass fit the chip.
std::optional<Layout> OnePass(const nn::Model& m, int b, const Optimizer& opt,
                              const config::TpuConfig& cfg, int cores, StateAt at) {
  for (const StateAt where : kPlaces) {
    if (at != StateAt::kAny && at != where) continue;
    const Layout a = LayoutAt(m, b, opt, cfg, cores, b, where);
    if (a.end > cfg.ub_depth_rows) continue;
    CheckHbmState(m, a, cfg);
    return a;
  }
  return std::nullopt;
}

// Throws UsageError: the step needs `rows` unified-buffer rows even one image a pass.
[[noreturn]] void TooFewRows(const nn::Model& m, int64_t rows, const config::TpuConfig& cfg) {
  throw UsageError(fmt::format(
      "the step of '{}' needs {} unified-buffer rows even one image a pass (the state and "
      "every layer's output, gradient and F in HBM, the buffer holding one layer's and its "
      "inputs' at a time); config '{}' has ub_depth_rows = {}: --set ub_depth_rows={}",
      m.name, rows, cfg.name, cfg.ub_depth_rows, rows));
}

// A model with batch normalization takes a core's share in one pass: a pass of fewer images
// would normalize each pass over its own (ghost batch normalization, another network). Throws
// UsageError where it does not fit, naming the largest share that does.
Layout BatchNormLayout(const nn::Model& m, int b, const Optimizer& opt,
                       const config::TpuConfig& cfg, int cores, StateAt at) {
  if (std::optional<Layout> a = OnePass(m, b, opt, cfg, cores, at)) return *a;
  int most = b - 1;
  while (most >= 1 && !OnePass(m, most, opt, cfg, cores, at)) --most;
  if (most < 1) {
    const StateAt last = at == StateAt::kAny ? StateAt::kHbmWithMaps : at;
    TooFewRows(m, LayoutAt(m, 1, opt, cfg, cores, 1, last).end, cfg);
  }
  const size_t i = static_cast<size_t>(std::find_if(m.layers.begin(), m.layers.end(), IsBatchNorm) -
                                       m.layers.begin());
  throw UsageError(fmt::format(
      "batch_norm '{}' of model '{}' normalizes over a core's whole share of the batch, but the "
      "unified buffer holds {} of its {} images at once{}: a smaller --batch (at most {} a "
      "core), or train it on the CPU (tpusim train without --config)",
      m.layers[i].name, m.name, most, b,
      at == StateAt::kAny ? " even with the state and the maps in HBM" : "", most));
}

// The attainable bound (report/program_bound.h) of the step program of layout `a`'s core 0.
double StepBound(const nn::Model& m, const Layout& a, const Optimizer& opt,
                 const config::TpuConfig& cfg) {
  std::vector<std::vector<int32_t>> pass_of;
  PassLog passes;
  double cycles = 0;
  for (const isa::Program& p :
       StepProgram(ForParity(a, 0), m, opt, /*prefetch=*/true, &pass_of, &passes))
    cycles += report::BoundPrograms({p}, cfg).Cycles();
  return cycles;
}

// The layout of a core's b images in as few passes as fit the chip with the state in the
// unified buffer: the most images a pass that divide b and whose layout fits it. Where none
// does, the state in HBM, alone, with each layer's F, or with every layer's maps, each in as
// few passes as fit: whichever's step has the least attainable bound (the first of them
// where they tie), since fewer passes make every tile fewer times and the maps cost their
// moves (`at` may choose). The buffer first even at more passes: its updates do not cross
// the host DMA a row a cycle (docs/training.md, "The state in HBM", measures both ways). A
// model with batch
// normalization in one pass (BatchNormLayout). Throws UsageError where even one image a pass
// does not fit, or the accumulators are too few.
Layout FittingLayout(const nn::Model& m, int b, const Optimizer& opt, const config::TpuConfig& cfg,
                     int cores, StateAt at) {
  if (HasBatchNorm(m)) return BatchNormLayout(m, b, opt, cfg, cores, at);
  int64_t fewest = 0;  // the rows of one image a pass, the state where it goes furthest
  std::optional<Layout> best;
  double least = 0;  // best's bound, where the state is in HBM
  for (const StateAt where : kPlaces) {
    if (at != StateAt::kAny && at != where) continue;
    if (best && !best->hbm_state) break;  // the buffer's won
    for (int mb = b; mb >= 1; --mb) {
      if (b % mb != 0) continue;
      const Layout a = LayoutAt(m, b, opt, cfg, cores, mb, where);
      if (mb == 1) fewest = a.end;
      if (a.end > cfg.ub_depth_rows) continue;
      const double bound = a.hbm_state && at == StateAt::kAny ? StepBound(m, a, opt, cfg) : 0;
      if (!best || bound < least) {
        best = a;
        least = bound;
      }
      break;
    }
  }
  if (!best) TooFewRows(m, fewest, cfg);
  CheckHbmState(m, *best, cfg);
  return *best;
}

// Throws UsageError where a batch normalization sees one value a channel.
void CheckBatchNorms(const nn::Model& m, const Layout& a) {
  for (size_t i = 0; i < m.layers.size(); ++i) {
    if (!IsBatchNorm(m.layers[i])) continue;
    const std::string where =
        fmt::format("batch_norm '{}' of model '{}'", m.layers[i].name, m.name);
    if (a.layer[i].rows < 2) {
      throw UsageError(fmt::format(
          "{} normalizes each channel over its values in a core's share of the batch, and "
          "there is one: a --batch of at least 2 images a core",
          where));
    }
  }
}

// Each part of a step scheduled (compiler::ScheduleUnits: docs/training.md, "Each unit's
// work beside the others'"), as many at once as the machine has cores.
void ScheduleParts(std::vector<isa::Program>* parts, std::vector<std::vector<int32_t>>* pass_of,
                   const config::TpuConfig& cfg, int cores) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k = next++; k < parts->size(); k = next++)
      (*parts)[k] = compiler::ScheduleUnits((*parts)[k], &(*pass_of)[k], cfg, cores);
  };
  const size_t workers =
      std::min<size_t>(parts->size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::future<void>> running;
  for (size_t w = 1; w < workers; ++w) running.push_back(std::async(std::launch::async, work));
  work();
  for (std::future<void>& f : running) f.get();
}

}  // namespace

CompiledStep Compile(const nn::Model& model, int batch, const Optimizer& opt,
                     const config::TpuConfig& config, int cores, StateAt at, size_t words) {
  CheckGraphStep(model, config);
  if (batch < 1) throw UsageError("--batch must be at least 1");
  CheckTrainingCores(config, cores, batch);
  Layout a = FittingLayout(model, batch / cores, opt, config, cores, at);
  a.program_words = words;
  CheckBatchNorms(model, a);
  CompiledStep step = shell::Programs<Layout>(
      a, opt, "graph-train", ForParity, EmitStart,
      [&](std::vector<uint16_t>* img) { PutTiles(model, a, img); },
      [&](const Layout& ap, bool prefetch, std::vector<std::vector<int32_t>>* pass_of,
          PassLog* passes) {
        std::vector<isa::Program> parts = StepProgram(ap, model, opt, prefetch, pass_of, passes);
        ScheduleParts(&parts, pass_of, config, cores);
        return parts;
      });
  step.programs.passes = a.passes;
  step.programs.in_hbm_too = a.hbm_maps ? "hbm-with-maps" : (a.hbm_f ? "hbm-with-f" : "");
  return step;
}

}  // namespace graph_step

CompiledStep CompileGraphStep(const nn::Model& model, int batch, const Optimizer& opt,
                              const config::TpuConfig& config, int cores, StateAt at,
                              size_t program_words) {
  return graph_step::Compile(model, batch, opt, config, cores, at,
                             program_words > 0 ? program_words : engine::kMaxProgramWords);
}

}  // namespace tpu::train
