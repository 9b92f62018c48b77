// What the compiled steps of the CNN (conv_step.h) and of graphs (graph_step.h) share around
// their layers' passes, over any step layout with the fields named below: a weighted layer's
// rows, the emitter of products, transposes, masks and weight gradients, the optimizer's
// update of every layer, the host's images (constants, state, batch, results, gradients),
// and the programs (init, the step of each batch buffer with and without the next batch read
// ahead, fetch, save, grads) with their host side.
//
// A layout has: n, b (a core's images), cores, core, bp, img_rows; id (the identity), zero
// (a zero row), pad, inv_batch, consts; param (std::vector<ParamRows>); kept
// (std::vector<KeptRows>: what the layers keep in the state, after the parameters); state_begin,
// state_end, hbm_state, hbm_state_addr, stage (where the state is: StateInHbm); scalars, x0, y and
// their *_next (the two batch buffers), pass_images (ReadBatch); loss, mean, logits; acc_rows,
// acc_t, acc_g (accumulator rows: a product's chunk, a transpose's, dWᵀ's); dzt, scratch,
// mask_rows, tmp, tmp2, update_rows, other, end; the host rows h_params, h_zero, h_bias, h_batch,
// h_batch_next, h_out, h_grads; Sets() and BiasLane(set) (the lane a parameter set adds a 1 to, or
// -1); BatchRows(), OutRows(), GradRows().
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "arith/fp32.h"
#include "host/isa/program_builder.h"
#include "host/nn/model.h"
#include "host/train/dense_reference.h"
#include "host/train/dense_step.h"
#include "host/train/step_emit.h"
#include "host/train/step_image.h"

namespace tpu::train::shell {

inline int64_t TilesOf(int64_t x, int n) { return (x + n - 1) / n; }

// A weighted layer's rows: its tile in bfloat16 (kb x mb blocks of N rows, block (j, k) at
// wb + (j kb + k) N; rows the inputs then the bias, lanes the outputs), dWᵀ in blocks of the
// same place (gt: rows the outputs, lanes the inputs) and the gradient in the tile's layout
// (g).
struct ParamRows {
  std::string name;       // the model's
  int layer = 0;          // index in the model's layers
  int ins = 0, outs = 0;  // ins without the bias
  int64_t kb = 0, mb = 0;
  int64_t w = 0;              // the float32 weights: two buffer rows a row of wb
  std::vector<int64_t> slot;  // the optimizer's state, as w
  int64_t wb = 0, gt = 0, g = 0;
  int64_t g_hbm = 0;  // with the state in HBM: its gradient's first row in a core's area
  // The rows of a block: N (a tile of the array's), or fewer where no tile is loaded from
  // them (a batch normalization's gamma and beta: 2).
  int block_rows = 0;  // 0: N
  int64_t BlockRows(int n) const { return block_rows > 0 ? block_rows : n; }
  int64_t Values(int n) const { return kb * mb * BlockRows(n); }
  int64_t Block(int64_t j, int64_t k, int n) const { return (j * kb + k) * BlockRows(n); }
  int Outs(int64_t j, int n) const { return std::min(n, outs - static_cast<int>(j) * n); }
};

// A tensor a layer keeps in the state (batch normalization's running mean and variance):
// float32 rows (two buffer rows each) of N lanes, `values` values in all, value v in row
// v / N's lane v % N.
struct KeptRows {
  int64_t row = 0;
  int values = 0;
  int64_t RowOf(int value, int n) const { return row + 2 * (value / n); }
};

// Where a layout's state (the float32 weights, the optimizer's state, what the layers keep)
// is. In the unified buffer: rows [state_begin, state_end), read from the same host rows by
// the init program and written back by the save program. With `hbm_state` (a state beyond
// the buffer): those rows' image in HBM from hbm_state_addr, each core's copy after the one
// before (the cores update alike), which the host writes and reads directly; a layer's
// forward pass and update bring it into the staging rows (`stage`: two sets, each the
// float32 weights and then each slot of update_rows values) a piece at a time, the update
// writing each piece back (MakeTile, EmitUpdates).
template <typename Layout>
int64_t StateRows(const Layout& a) {
  return a.state_end - a.state_begin;
}
// The host rows before the parameter sets: the constants, then the state where it is in the
// buffer.
template <typename Layout>
int64_t HostStateEnd(const Layout& a) {
  return a.hbm_state ? a.state_begin : a.state_end;
}
// The HBM byte address of state row `row` (from state_begin) in core a.core's copy.
template <typename Layout>
uint64_t StateHbm(const Layout& a, int64_t row) {
  return a.hbm_state_addr +
         static_cast<uint64_t>(a.core * StateRows(a) + row - a.state_begin) * 2 * a.n;
}
// The parts of a staging set: the float32 weights, each slot, the gradient and the other
// core's (2 update_rows rows each).
inline int StageParts(int slots) { return 3 + slots; }
// Staging set `set` (0 or 1), part `part` (0: the float32 weights; then the slots, the
// gradient, the other core's).
template <typename Layout>
int64_t StageRows(const Layout& a, int set, int part, int slots) {
  return a.stage + (int64_t{set} * StageParts(slots) + part) * 2 * a.update_rows;
}
// With the state in HBM the weight gradients are there too, and the tile, the gradient and
// dWᵀ's rows in the buffer are each one layer's at a time (PlaceParams, PlaceScratch): each
// core's gradients in an area of GradRows() rows (a layer's from g_hbm), written as a layer's
// backward pass ends and summed there over the passes (graph_step.cc's GradientOut); with
// several cores, the sum of the cores' in an area of each core's own (read by
// Gradients()). The HBM byte address of row `row` of core `core`'s area:
template <typename Layout>
uint64_t GradHbm(const Layout& a, int core, int64_t row) {
  return a.hbm_grad_addr + static_cast<uint64_t>(core * a.GradRows() + row) * 2 * a.n;
}
// ... and of the cores' sum's, core a.core's.
template <typename Layout>
uint64_t SumHbm(const Layout& a, int64_t row) {
  return GradHbm(a, a.cores + a.core, row);
}

// A layout's array size N, a core's images b (its share of the batch), the cores and b
// rounded up to whole chunks of N.
template <typename Layout>
void SetBatch(Layout* a, int n, int batch, int cores) {
  a->n = n;
  a->b = batch;
  a->cores = cores;
  a->bp = TilesOf(batch, n) * n;
}

// The host rows after the state's (state_end: the host's image of buffer rows [0,
// state_end) comes first): the parameter sets (5 host rows each, docs/isa.md), N zero
// rows, the bias block, the two batch areas and the results (each core's after the one
// before), the gradients.
template <typename Layout>
void PlaceHostRows(Layout* a) {
  a->h_params = HostStateEnd(*a);
  a->h_zero = a->h_params + 5 * int64_t{a->Sets()};
  a->h_bias = a->h_zero + a->n;
  a->h_batch = a->h_bias + a->bp;
  a->h_batch_next = a->h_batch + a->cores * a->BatchRows();
  a->h_out = a->h_batch_next + a->cores * a->BatchRows();
  a->h_grads = a->h_out + a->cores * a->OutRows();
}

// The batch buffers' rows swapped (ForParity: a step on the other buffer).
template <typename Layout>
void SwapBatchBuffers(Layout* a) {
  std::swap(a->x0, a->x0_next);
  std::swap(a->y, a->y_next);
  std::swap(a->scalars, a->scalars_next);
  std::swap(a->h_batch, a->h_batch_next);
}

// A layout's allocator of buffer rows: each call hands out the next `rows` rows after *at.
inline std::function<int64_t(int64_t)> RowsFrom(int64_t* at) {
  return [at](int64_t rows) {
    const int64_t r = *at;
    *at += rows;
    return r;
  };
}

// The blocks of N lanes a layout's classes take (more than one: a graph's of more classes
// than N; the last weighted layer's outputs are the classes).
template <typename Layout>
int64_t ClassBlocks(const Layout& a) {
  return TilesOf(a.param.back().outs, a.n);
}

// The infeed's two batch buffers (Adam's scalars, the images, the labels one-hot: a block of
// `batch` rows for each block of classes; ForParity swaps them). With the layout's
// `pass_images`, a buffer holds `images` images, a pass's (ReadPassImages).
template <typename Layout>
void PlaceBatchBuffers(Layout* a, int batch, int images,
                       const std::function<int64_t(int64_t)>& take) {
  for (int buffer = 0; buffer < 2; ++buffer) {
    (buffer ? a->scalars_next : a->scalars) = take(4);
    (buffer ? a->x0_next : a->x0) = take(int64_t{images} * a->img_rows);
    (buffer ? a->y_next : a->y) = take(batch * ClassBlocks(*a));
  }
}

// The batch in host rows from `h` (Adam's scalars, the images, the labels: BatchRows) into
// the buffer's rows from `scalars` (the labels' from `y`): all of it, or with the layout's
// `pass_images` all but the images, which each pass reads (ReadPassImages).
template <typename Layout>
void ReadBatch(isa::ProgramBuilder& p, const Layout& a, int64_t h, int64_t scalars, int64_t y) {
  if (!a.pass_images) return EmitReadHost(p, a.n, h, scalars, a.BatchRows());
  EmitReadHost(p, a.n, h, scalars, 4);
  EmitReadHost(p, a.n, h + 4 + int64_t{a.b} * a.img_rows, y, int64_t{a.b} * ClassBlocks(a));
}

// The accumulator rows of a step: dWᵀ's at the top (g_tiles K-tiles: the widest layer's,
// at most `most_tiles`; a wider layer's dWᵀ goes in groups of them), a transpose's below
// them, and a product's chunk the rest (from row 0).
template <typename Layout>
void PlaceAccumulators(Layout* a, int64_t acc_depth_rows,
                       int64_t most_tiles = std::numeric_limits<int64_t>::max()) {
  int64_t kb_max = 1;
  for (const ParamRows& r : a->param) kb_max = std::max(kb_max, r.kb);
  a->g_tiles = std::min(kb_max, most_tiles);
  a->acc_g = acc_depth_rows - a->g_tiles * a->n;
  a->acc_t = a->acc_g - a->n;
  a->acc_rows = a->acc_t;
}

// The weighted layers' rows (their tiles' and state's). With the state in HBM, one tile's
// rows for every layer's in turn, or with `step_tiles` none: each step's own (graph_step.cc's
// StepRows).
template <typename Layout>
void PlaceParams(const nn::Model& m, const Optimizer& opt, Layout* a,
                 const std::function<int64_t(int64_t)>& take, bool step_tiles = false) {
  const int n = a->n;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const nn::Layer& l = m.layers[i];
    if (!l.HasWeights()) continue;
    ParamRows r;
    r.name = l.name;
    r.layer = static_cast<int>(i);
    // A batch normalization's gamma is one row (its ins), its beta the bias row.
    r.ins = static_cast<int>(l.type == nn::LayerType::kConv2d
                                 ? int64_t{l.kernel_h} * l.kernel_w * l.in.c
                                 : (l.type == nn::LayerType::kBatchNorm ? 1 : l.in.Size()));
    r.outs = l.out.c;
    r.kb = TilesOf(r.ins + 1, n);
    r.mb = TilesOf(r.outs, n);
    if (l.type == nn::LayerType::kBatchNorm) r.block_rows = r.ins + 1;  // gamma, beta
    a->param.push_back(r);
  }
  a->state_begin = take(0);
  int64_t state_at = a->state_begin;  // with hbm_state: HBM's rows, not the buffer's
  const std::function<int64_t(int64_t)> state = a->hbm_state ? RowsFrom(&state_at) : take;
  for (ParamRows& r : a->param) {
    r.w = state(2 * r.Values(n));
    for (int s = 0; s < opt.Slots(); ++s) r.slot.push_back(state(2 * r.Values(n)));
  }
  for (const nn::Layer& l : m.layers)
    for (const Tensor<float>& t : l.state)
      a->kept.push_back({state(2 * TilesOf(t.Size(), n)), static_cast<int>(t.Size())});
  a->state_end = state(0);
  int64_t widest = 0;
  for (const ParamRows& r : a->param) widest = std::max(widest, r.Values(n));
  const int64_t tile = a->hbm_state ? (step_tiles ? -1 : take(widest)) : 0;  // one at a time
  for (ParamRows& r : a->param) r.wb = a->hbm_state ? tile : take(r.Values(n));
}

// The program, with the addresses of a layout.
template <typename Layout>
class StepEmitter {
 public:
  explicit StepEmitter(const Layout& a) : a_(a) { p_.SetFormat(/*bf16=*/true); }
  // The program, every activate Dense and Window have held back emitted (TakeTurns).
  isa::ProgramBuilder& P() {
    Flush();
    window_known_ = false;  // the caller may set another window
    return p_;
  }
  // The instructions from here on belong to pass `name`, of `macs` useful MACs. The
  // activates held back stay held (each counted in its own pass): the next pass's reads
  // emit those that write what they read (Dense, Window), or all of them (Chunks, P).
  void Pass(const std::string& name, int64_t macs = 0) {
    passes_.Start(p_.program().words.size(), name, macs);
  }
  // Sets the window geometry the next windows take. Emitted without the held-back
  // activates, which no window setting touches; Window reads its map's rows (docs/isa.md).
  void SetWindow(const isa::WindowGeometry& g) {
    p_.SetWindow(g);
    window_ = g;
    window_known_ = true;
  }
  // A vector instruction over `rows` rows (float32 operands two rows a row) after the
  // held-back activates that write any row it reads or writes.
  void Vector(hw::VectorOp op, int64_t x, int64_t y, int64_t out, int64_t rows, int flags) {
    for (const int64_t at : {x, y, out}) FlushWriting(at, at + 2 * rows);
    EmitVector(p_, op, x, y, out, rows, flags);
  }
  // From here on, the chunks of Chunks, Dense and Window take their accumulator rows from a
  // ring over the product's (NextAcc), and each chunk's activate is held back and emitted
  // among the later chunks' matmuls (HoldBack): the controller issues in order, and an
  // activate waits for its rows to drain from the array (2N cycles after the last enters:
  // docs/timing.md, "Issue"), so a chunk's matmuls issued after it would wait too. A read of
  // rows a held-back activate writes emits it first (FlushWriting); P, Transpose and Take
  // emit them all (docs/training.md, "Activates held back").
  void TakeTurns() { turns_ = true; }
  // From here on (with TakeTurns, on a core of several matrix units), the transposes whose
  // activates are held back (a weight gradient's dZ chunks and dWᵀ's K-tiles, W'':
  // SideTranspose) and the windows asked for with `side` (a convolution's receptive fields:
  // SideChunks) run on matrix unit 1 while unit 0 runs the products. Each unit's
  // accumulators drain on their own (docs/timing.md, "Issue"), so their activates wait for
  // unit 1's products alone, not for unit 0's stream of short matmuls.
  void SideUnit() { side_ = true; }
  PassLog& Passes() { return passes_; }
  // The constant tile in the array (Tile) is so no more: its rows are written (the shared
  // rows of every layer's tile with the state in HBM).
  void ForgetTile() { current_[0] = current_[1] = -1; }
  // Loads the tile at `ub` (transposed with `transpose`) for the next matmul, which switches
  // to it: returns true. A `constant` tile (one no instruction of the program writes after
  // it is loaded: the identity, the poolings' tiles, a layer's bfloat16 tile once made; or
  // none but an activate, which forgets it: W'') that is already the array's is kept
  // instead: no load, and the matmul does not switch (returns false).
  bool Tile(int64_t ub, bool transpose = false, bool constant = false) {
    FlushWriting(ub, ub + a_.n);  // an activate that writes its rows forgets it (Emit)
    int64_t& current = current_[p_.Unit() != 0];
    if (constant && ub == current) return false;
    p_.LoadWeights(U(ub), 1, transpose);
    ++loads_;
    current = constant ? ub : -1;
    return true;
  }
  uint64_t U(int64_t row) const { return static_cast<uint64_t>(row); }

  // `rows` rows of a product, chunk by chunk: `matmuls(acc, r0, len)` issues rows [r0, r0 +
  // len)'s matmuls into the accumulator rows from `acc` (through Raw(), Tile and U only),
  // then the chunk's activate (through the ReLU with `relu`, parameter set `set`) writes
  // them to rows from out + r0 (`stride` apart), held back where TakeTurns. The rows the
  // matmuls read are not ones this pass's held-back activates write; an earlier pass's are
  // emitted first.
  void Chunks(int64_t rows, int64_t out, int set, bool relu,
              const std::function<void(uint64_t, int64_t, int64_t)>& matmuls, int64_t stride = 1) {
    FlushEarlierPasses();
    TakeChunks(rows, out, set, relu, matmuls, stride);
  }
  // The program for a Chunks callback's matmuls: the held-back activates stay held.
  isa::ProgramBuilder& Raw() { return p_; }

  // out = x W for `rows` rows (x: kb blocks x_stride rows apart; W: the tile's column block
  // j), through the ReLU with `relu`, chunk by chunk, each after the held-back activates
  // that write the x rows it reads.
  void Dense(int64_t x, int64_t x_stride, const ParamRows& r, int64_t j, int64_t rows, int64_t out,
             bool relu, int set = 0) {
    TakeChunks(rows, out, set, relu, [&](uint64_t acc, int64_t r0, int64_t len) {
      for (int64_t k = 0; k < r.kb; ++k)
        FlushWriting(x + k * x_stride + r0, x + k * x_stride + r0 + len);
      for (int64_t k = 0; k < r.kb; ++k) {
        const bool load = Tile(r.wb + r.Block(j, k, a_.n), false, r.kb == 1);
        p_.Matmul(U(x + k * x_stride + r0), acc, U(len), load, isa::AddIf(k > 0));
      }
    });
  }
  // Output pixels [first, first + pixels) of the window set last over the map at `map`:
  // K-tiles kt0 .. kt0 + kts - 1 through the tiles at `tile` (N rows apart), added, then
  // parameter set `set`, into rows from `out`; with `one_tile`, every K-tile through the
  // tile at `tile`. After the held-back activates that write the map's rows (the window's
  // footprint, docs/isa.md) where SetWindow set the window, else after an earlier pass's:
  // this pass's held-back activates do not write the map (the steps' windows read what
  // earlier passes or vector instructions wrote). With `side`, on matrix unit 1 where
  // SideUnit and its accumulators hold a chunk past the transposes' (SideChunks).
  void Window(int64_t map, int64_t pixels, int64_t tile, int64_t kt0, int64_t kts, int64_t out,
              int set, int64_t first = 0, bool one_tile = false, bool side = false) {
    if (window_known_) {
      FlushWriting(map, map + static_cast<int64_t>(window_.Rows(U(a_.n))));
    } else {
      FlushEarlierPasses();
    }
    auto matmuls = [&](uint64_t acc, int64_t r0, int64_t len) {
      for (int64_t t = 0; t < kts; ++t) {
        const bool load = Tile(one_tile ? tile : tile + t * a_.n, false, kts == 1 || one_tile);
        p_.MatmulWindow(U(map), acc, U(len), U(first + r0), U(kt0 + t), load, isa::AddIf(t > 0));
      }
    };
    if (side && side_ && SideRing() >= Chunk()) return SideChunks(pixels, out, set, kts, matmuls);
    TakeChunks(pixels, out, set, false, matmuls);
  }
  // Transposes (in, out, rows) one after another, as Transpose each, but each into a region
  // of the product's accumulator rows of its own turn, its activate held back where
  // TakeTurns; all written when this returns.
  void Transposes(const std::vector<std::array<int64_t, 3>>& each) {
    for (const auto& [in, out, rows] : each) TurnTranspose(in, out, rows);
    Flush();
  }
  // `rows` rows (at most N) of `in`'s N rows transposed: out's row i is lane i of in's rows.
  void Transpose(int64_t in, int64_t out, int64_t rows) {
    Flush();
    Tile(in, true);
    p_.Matmul(U(a_.id), U(a_.acc_t), U(rows), true, isa::Acc::kOverwrite);
    p_.Activate(U(a_.acc_t), U(out), U(rows), 0, false, isa::Pool::kNone);
  }
  // Where the ReLU gave 0 (h's rows), dz = 0: dz's rows in place; with `top` (a row of 6s,
  // ReLU6's), also where it gave 6. The mask goes through the scratch rows, a piece of
  // mask_rows at a time, each after the held-back activates that write its rows.
  void Mask(int64_t h, int64_t dz, int64_t rows, int64_t top = -1) {
    for (int64_t r0 = 0; r0 < rows; r0 += a_.mask_rows) {
      const int64_t len = std::min(a_.mask_rows, rows - r0);
      for (const int64_t at : {a_.zero, top}) {
        if (at < 0) continue;
        Vector(hw::VectorOp::kEqual, h + r0, at, a_.scratch, len, kBcast);
        Vector(hw::VectorOp::kSelect, a_.scratch, a_.zero, dz + r0, len, kBcast);
      }
    }
  }
  // dWᵀ = dZᵀ X of layer r (dz: mb blocks dz_stride rows apart; x: kb blocks x_stride rows
  // apart; `chunks` chunks of N rows, the sum's index), then into the tile's layout (g); its
  // K-tiles g_tiles at a time (the accumulators dWᵀ has), each group's dZ transposed again.
  // With TakeTurns (dzt two blocks of N rows), the next chunk's dZ transposed into the other
  // block while this chunk's products run: its activate held back until they are issued.
  // Its tiles are loaded after the held-back activates that write them (Tile), its
  // accumulators (acc_g, acc_t) are none of theirs.
  void WeightGradient(const ParamRows& r, int64_t dz, int64_t dz_stride, int64_t x,
                      int64_t x_stride, int64_t chunks) {
    const int n = a_.n;
    WeightGradient(
        r, dz, dz_stride, [x, n](int64_t c) { return x + c * n; }, x_stride, chunks);
  }
  // The same with chunk c's rows of X's first block at x_at(c), which may first emit (through
  // Raw) what brings them into the buffer: X in pieces (graph_step.cc's FPieces).
  void WeightGradient(const ParamRows& r, int64_t dz, int64_t dz_stride,
                      const std::function<int64_t(int64_t)>& x_at, int64_t x_stride,
                      int64_t chunks) {
    for (int64_t j = 0; j < r.mb; ++j)
      for (int64_t k0 = 0; k0 < r.kb; k0 += a_.g_tiles)
        GradientTiles(r, j, k0, std::min(a_.g_tiles, r.kb - k0), dz, dz_stride, x_at, x_stride,
                      chunks);
  }
  // WeightGradient's block row j, K-tiles [k0, k0 + kn).
  void GradientTiles(const ParamRows& r, int64_t j, int64_t k0, int64_t kn, int64_t dz,
                     int64_t dz_stride, const std::function<int64_t(int64_t)>& x_at,
                     int64_t x_stride, int64_t chunks) {
    const int n = a_.n;
    const int outs = r.Outs(j, n);
    auto dzt = [&](int64_t c) { return a_.dzt + (turns_ ? (c % 2) * n : 0); };
    auto transpose = [&](int64_t c) {  // dZ's chunk: outs rows
      TurnTranspose(dz + j * dz_stride + c * n, dzt(c), outs);
    };
    if (turns_) transpose(0);
    for (int64_t c = 0; c < chunks; ++c) {
      if (!turns_) Transpose(dz + j * dz_stride + c * n, a_.dzt, outs);
      if (turns_ && c + 1 < chunks) transpose(c + 1);
      FlushWriting(dzt(c), dzt(c) + outs);
      const int64_t x = x_at(c);
      for (int64_t k = 0; k < kn; ++k) {
        Tile(x + (k0 + k) * x_stride);
        p_.Matmul(U(dzt(c)), U(a_.acc_g + k * n), U(outs), true, isa::AddIf(c > 0));
      }
      Streams(kn, outs, a_.acc_g, a_.acc_g + (kn - 1) * n + outs);
    }
    FinishGradient(r, j, k0, kn);
  }
  // dWᵀ's block row j, K-tiles [k0, k0 + kn) (all by default), from the accumulators
  // (acc_g), then into the tile's layout (g). With TakeTurns, every K-tile's rows first,
  // then the transposes one after another, each into a region of the product's accumulator
  // rows of its own turn, its activate held back.
  void FinishGradient(const ParamRows& r, int64_t j, int64_t k0 = 0, int64_t kn = -1) {
    Flush();
    const int n = a_.n;
    if (kn < 0) kn = r.kb;
    // dWᵀ's rows: the layer's own, or with the state in HBM the group's in shared rows.
    auto gt = [&](int64_t k) { return r.gt + (a_.hbm_state ? (k - k0) * n : r.Block(j, k, n)); };
    for (int64_t k = k0; k < k0 + kn; ++k) {
      p_.Activate(U(a_.acc_g + (k - k0) * n), U(gt(k)), U(r.Outs(j, n)), 0, false,
                  isa::Pool::kNone);
      clock_.issue = std::max({clock_.issue, clock_.activate, span_.until});
      clock_.activate = clock_.issue + r.Outs(j, n);
      if (!turns_) Transpose(gt(k), r.g + r.Block(j, k, n), n);
    }
    if (!turns_) return;
    for (int64_t k = k0; k < k0 + kn; ++k) TurnTranspose(gt(k), r.g + r.Block(j, k, n), n);
    Flush();
  }
  isa::Program Take() {
    Flush();
    p_.Halt();
    return p_.Take();
  }

 private:
  // Transpose's product in a region of its own turn, its activate held back (TakeTurns).
  void HeldTranspose(int64_t in, int64_t out, int64_t rows) {
    TakeChunks(rows, out, 0, false, [&](uint64_t acc, int64_t, int64_t) {
      Tile(in, true);
      p_.Matmul(U(a_.id), acc, U(rows), true, isa::Acc::kOverwrite);
    });
  }
  // A transpose whose activate is held back (TakeTurns): on matrix unit 1 where SideUnit.
  void TurnTranspose(int64_t in, int64_t out, int64_t rows) {
    side_ ? SideTranspose(in, out, rows) : HeldTranspose(in, out, rows);
  }
  // Transpose's product on matrix unit 1 (SideUnit), in a region of N of its accumulator
  // rows of its own turn, its activate held back (HoldSide). 16 regions (or as many as the
  // accumulators hold): a group of dWᵀ's K-tiles, whose transposes come one after another, is at
  // most 16 on tpu-v3 and tpu-v4 (PlaceAccumulators: half of their 32 regions), so none waits for
  // its own group's activates (docs/training.md, "Each unit's work beside the others'").
  static constexpr int64_t kSideTurns = 16;
  void SideTranspose(int64_t in, int64_t out, int64_t rows) {
    const int n = a_.n;
    FlushWriting(in, in + n);
    const int64_t acc = (side_turn_++ % SideTurns()) * n;
    FreeSide(acc, n);
    p_.SetUnit(1);
    p_.LoadWeights(U(in), 1, true);
    p_.Matmul(U(a_.id), U(acc), U(rows), true, isa::Acc::kOverwrite);
    p_.SetUnit(0);
    // The transposed load (2N + 1 cycles), the rows through the array, their drain (2N).
    side_free_ = std::max(clock_.issue, side_free_) + 2 * n + 1 + rows;
    current_[1] = -1;  // its own load
    HoldSide(acc, out, rows, 0);
  }
  // A unit's accumulator rows (PlaceAccumulators: dWᵀ's are the last).
  int64_t AccDepth() const { return a_.acc_g + a_.g_tiles * a_.n; }
  // SideTranspose's regions: kSideTurns, or as many as the accumulators hold.
  int64_t SideTurns() const { return std::min<int64_t>(kSideTurns, AccDepth() / a_.n); }
  // Unit 1's accumulator rows past SideTranspose's regions: a ring for SideChunks.
  int64_t SideRing() const { return AccDepth() - SideTurns() * a_.n; }
  // Emits the held-back activates that read unit 1's accumulator rows [acc, acc + rows).
  void FreeSide(int64_t acc, int64_t rows) {
    auto reads = [&](const Readout& r) {
      return r.unit == 1 && r.acc < acc + rows && acc < r.acc + r.rows;
    };
    while (std::any_of(held_.begin(), held_.end(), reads)) Emit();
  }
  // Holds back the activate of unit 1's accumulator rows [acc, acc + rows) into rows from
  // `out` (parameter set `set`), ready 2N cycles after unit 1 frees by the model's clock.
  void HoldSide(int64_t acc, int64_t out, int64_t rows, int set) {
    Readout r{acc, out, rows, set, false, 1};
    r.unit = 1;
    r.ready = side_free_ + 2 * a_.n;
    HoldBack(r);
  }
  // TakeChunks on matrix unit 1 (SideUnit) for `per` matmuls a chunk: each chunk's rows from
  // a ring over SideRing's rows, its activate held back (HoldSide).
  void SideChunks(int64_t rows, int64_t out, int set, int64_t per,
                  const std::function<void(uint64_t, int64_t, int64_t)>& matmuls) {
    const int64_t lo = SideTurns() * a_.n, hi = lo + SideRing();
    for (int64_t r0 = 0; r0 < rows; r0 += Chunk()) {
      const int64_t len = std::min(Chunk(), rows - r0);
      if (side_ring_ < lo || side_ring_ + len > hi) side_ring_ = lo;
      const int64_t acc = side_ring_;
      side_ring_ += len;
      FreeSide(acc, len);
      p_.SetUnit(1);
      matmuls(U(acc), r0, len);
      p_.SetUnit(0);
      side_free_ = std::max(clock_.issue, side_free_) + per * len;
      HoldSide(acc, out + r0, len, set);
    }
  }
  // Chunks' chunks, the rows they read written (this pass's held-back activates do not write
  // them, or the caller emitted those that do).
  void TakeChunks(int64_t rows, int64_t out, int set, bool relu,
                  const std::function<void(uint64_t, int64_t, int64_t)>& matmuls,
                  int64_t stride = 1) {
    for (int64_t r0 = 0; r0 < rows; r0 += Chunk()) {
      const int64_t len = std::min(Chunk(), rows - r0);
      const int64_t acc = NextAcc(len);
      const size_t words = p_.program().words.size();
      const int64_t others = loads_ + emitted_;
      matmuls(U(acc), r0, len);
      // Its matmuls: the words it added less its loads and the activates emitted among them.
      const int64_t added = static_cast<int64_t>(p_.program().words.size() - words);
      Streams(added - (loads_ + emitted_ - others), len, acc, acc + len);
      HoldBack({acc, out + r0 * stride, len, set, relu, stride});
    }
  }
  // An activate of `rows` accumulator rows from `acc` into buffer rows from `out`, held back
  // in run `run` of pass `pass` (PassLog).
  struct Readout {
    int64_t acc = 0, out = 0, rows = 0;
    int set = 0;
    bool relu = false;
    int64_t stride = 1;
    int pass = 0;
    size_t run = 0;
    uint64_t unit = 0;  // the matrix unit whose accumulators it reads (SideUnit's work: 1)
    int64_t ready = 0;  // unit 1's: when its rows have drained, by the model's clock
  };
  // The most rows a chunk takes: an eighth of the accumulators (TakeTurns; at least N rows),
  // or all of them.
  int64_t Turns() const { return turns_ ? std::clamp<int64_t>(a_.acc_rows / a_.n, 1, 8) : 1; }
  int64_t Chunk() const { return a_.acc_rows / Turns(); }
  // A chunk's `len` accumulator rows: the next of the ring [0, acc_rows) (from 0 again where
  // they would pass its end), after the held-back activates that read any of them.
  int64_t NextAcc(int64_t len) {
    if (!turns_) return 0;
    if (ring_ + len > a_.acc_rows) ring_ = 0;
    const int64_t at = ring_;
    ring_ += len;
    auto reads = [&](const Readout& r) {
      return r.unit == 0 && r.acc < at + len && at < r.acc + r.rows;
    };
    while (std::any_of(held_.begin(), held_.end(), reads)) Emit();
    return at;
  }
  // A model of when the units free, to choose when a held-back activate goes out (the chip's
  // own timing is the engines'): `matmuls` matmuls of `len` rows each into accumulator rows
  // [lo, hi), issued one after the other as the matrix unit frees. Their rows drain 2N cycles
  // after each last row enters the array, and a matmul whose last row enters while others
  // drain joins their span (docs/timing.md, "Issue"): an activate reading any row of the
  // span waits until all of it has drained.
  void Streams(int64_t matmuls, int64_t len, int64_t lo, int64_t hi) {
    if (matmuls <= 0) return;
    const int64_t start = std::max(clock_.issue, clock_.matrix);
    if (span_.until > start + len) {
      span_.lo = std::min(span_.lo, lo);
      span_.hi = std::max(span_.hi, hi);
    } else {
      span_.lo = lo;
      span_.hi = hi;
    }
    clock_.matrix = start + matmuls * len;
    clock_.issue = clock_.matrix - len;
    span_.until = clock_.matrix + 2 * a_.n;
  }
  // When the held-back activate `r` would issue if emitted now (the model's: Streams).
  int64_t IssueAt(const Readout& r) const {
    const int64_t t = std::max(clock_.issue, clock_.activate);
    if (r.unit != 0) return std::max(t, r.ready);
    const bool drains = r.acc < span_.hi && span_.lo < r.acc + r.rows;
    return drains ? std::max(t, span_.until) : t;
  }
  // Holds the activate back, then emits the held-back activates, oldest first, that would
  // issue before the matrix unit frees (IssueAt): they delay no matmul, and what the later
  // chunks read is written early. The others wait for the ring's rows or a read of what
  // they write; but matmuls shorter than 2N rows, one after the other, keep a span draining
  // that holds every activate back, so where those held back take a quarter of the ring, the
  // oldest goes out anyway: the matrix unit waits once for the span to drain (measured on
  // the networks of docs/training.md, "Activates held back": a half or an eighth did no better),
  // and the others go out beside the matmuls after it.
  void HoldBack(Readout r) {
    r.pass = passes_.Current();
    r.run = passes_.Runs();
    held_.push_back(r);
    if (!turns_) return Flush();
    EmitTimely();
    int64_t rows = 0;
    for (const Readout& h : held_) rows += h.rows;
    if (4 * rows < a_.acc_rows) return;
    Emit();
    EmitTimely();
  }
  // Emits the oldest held-back activates while they would issue before the matrix unit frees.
  void EmitTimely() {
    while (!held_.empty() && IssueAt(held_.front()) <= clock_.matrix) Emit();
  }
  // The oldest held-back activate, counted in the pass that held it back.
  void Emit() {
    const Readout r = held_.front();
    held_.erase(held_.begin());
    const size_t at = p_.program().words.size();
    const uint64_t was = p_.Unit();
    p_.SetUnit(r.unit);
    p_.Activate(U(r.acc), U(r.out), U(r.rows), U(r.set), r.relu, isa::Pool::kNone, U(r.stride));
    p_.SetUnit(was);
    // A constant tile whose rows it writes is so no more (W'' in rows every convolution's in
    // turn, written by transposes on either unit).
    const int64_t end = r.out + (r.rows - 1) * r.stride + 1;
    for (int64_t& c : current_)
      if (c >= 0 && r.out < c + a_.n && c < end) c = -1;
    if (r.run != passes_.Runs()) passes_.Fill(at, r.pass, p_.program().words.size());
    clock_.issue = IssueAt(r);
    clock_.activate = clock_.issue + r.rows;
    ++emitted_;
  }
  void Flush() {
    while (!held_.empty()) Emit();
  }
  // Emits the activates earlier passes held back.
  void FlushEarlierPasses() {
    while (!held_.empty() && held_.front().run != passes_.Runs()) Emit();
  }
  // Emits the held-back activates up to the last that writes a row of [lo, hi).
  void FlushWriting(int64_t lo, int64_t hi) {
    size_t last = 0;
    for (size_t i = 0; i < held_.size(); ++i)
      if (held_[i].out < hi && lo < held_[i].out + (held_[i].rows - 1) * held_[i].stride + 1)
        last = i + 1;
    for (size_t i = 0; i < last; ++i) Emit();
  }

  const Layout& a_;
  isa::ProgramBuilder p_;
  PassLog passes_;
  int64_t current_[2] = {-1, -1};  // the constant tile in unit 0's and unit 1's array, or -1
  bool turns_ = false, side_ = false;
  int64_t ring_ = 0;  // the next chunk's accumulator rows (NextAcc)
  int64_t side_turn_ = 0, side_free_ = 0,
          side_ring_ = 0;  // SideTranspose's next region; when unit 1 frees
  std::vector<Readout> held_;
  struct {
    int64_t issue = 0, matrix = 0, activate = 0;  // when the last issued, when each unit frees
  } clock_;
  struct {
    int64_t lo = 0, hi = 0, until = 0;  // the accumulator rows draining, until when
  } span_;
  int64_t loads_ = 0, emitted_ = 0;  // tiles loaded, held-back activates emitted
  isa::WindowGeometry window_;       // the last SetWindow's, where window_known_
  bool window_known_ = false;
};

// `rows` buffer rows from `ub` to (`out`) or from HBM at byte address `hbm`, through program
// `p`, in instructions of at most kMaxLength rows.
inline void MoveHbm(isa::ProgramBuilder& p, int n, int64_t ub, uint64_t hbm, int64_t rows, bool out,
                    int64_t piece = static_cast<int64_t>(isa::ProgramBuilder::kMaxLength)) {
  for (int64_t r0 = 0; r0 < rows; r0 += piece) {
    const uint64_t at = hbm + static_cast<uint64_t>(r0) * 2 * n;
    const auto row = static_cast<uint64_t>(ub + r0);
    const auto len = static_cast<uint64_t>(std::min(piece, rows - r0));
    out ? p.WriteHbm(row, at, len) : p.ReadHbm(at, row, len);
  }
}

// The state's rows of layer r's values [v0, v0 + rows) (its float32 weights, then each
// slot's: `parts` of them) between HBM and staging set `set` (StateInHbm): in with `in`, else
// out.
template <typename Layout>
void Stage(StepEmitter<Layout>& e, const Layout& a, const ParamRows& r, int64_t v0, int64_t rows,
           int set, int parts, bool in) {
  const int slots = static_cast<int>(r.slot.size());
  for (int part = 0; part < parts; ++part) {
    const uint64_t hbm = StateHbm(a, (part == 0 ? r.w : r.slot[part - 1]) + 2 * v0);
    const uint64_t ub = e.U(StageRows(a, set, part, slots));
    const uint64_t count = e.U(2 * rows);
    in ? e.Raw().ReadHbm(hbm, ub, count) : e.Raw().WriteHbm(ub, hbm, count);
  }
}

// A layer's bfloat16 tile (wb) from its float32 weights, rounded to nearest even: from the
// state's rows, or with the state in HBM piece by piece through the staging rows (each
// piece's read into one set while the other's is copied).
template <typename Layout>
void MakeTile(StepEmitter<Layout>& e, const Layout& a, const ParamRows& r) {
  const int64_t values = r.Values(a.n);
  if (!a.hbm_state) return e.Vector(hw::VectorOp::kCopy, r.w, 0, r.wb, values, kA32);
  const int slots = static_cast<int>(r.slot.size());
  for (int64_t v0 = 0, k = 0; v0 < values; v0 += a.update_rows, ++k) {
    const int64_t rows = std::min(a.update_rows, values - v0);
    const int set = static_cast<int>(k % 2);
    Stage(e, a, r, v0, rows, set, 1, /*in=*/true);
    e.Vector(hw::VectorOp::kCopy, StageRows(a, set, 0, slots), 0, r.wb + v0, rows, kA32);
  }
  e.ForgetTile();  // the rows are every layer's tile in turn
}

// Layer r's gradient rows [v0, v0 + rows) from HBM into staging set `set` (StateInHbm): this
// core's, and with two cores the other's.
template <typename Layout>
void StageGradient(StepEmitter<Layout>& e, const Layout& a, const ParamRows& r, int64_t v0,
                   int64_t rows, int set) {
  const int slots = static_cast<int>(r.slot.size());
  for (int c = 0; c < a.cores; ++c) {
    const int core = c == 0 ? a.core : 1 - a.core;
    e.Raw().ReadHbm(GradHbm(a, core, r.g_hbm + v0), e.U(StageRows(a, set, 1 + slots + c, slots)),
                    e.U(rows));
  }
}

// Each layer's update from its gradient (the optimizer's vector instructions over its rows,
// update_rows value rows at a time). With the state in HBM each piece is updated in a
// staging set, read in while the piece before it is updated and written back after.
template <typename Layout>
void EmitUpdates(StepEmitter<Layout>& e, const Layout& a, const Optimizer& opt) {
  const int parts = 1 + opt.Slots();
  for (const ParamRows& r : a.param) {
    e.Pass(r.name + " update");
    const int64_t values = r.Values(a.n);
    auto rows_at = [&](int64_t v0) { return std::min(a.update_rows, values - v0); };
    auto stage_in = [&](int64_t v0, int set) {
      Stage(e, a, r, v0, rows_at(v0), set, parts, /*in=*/true);
      StageGradient(e, a, r, v0, rows_at(v0), set);
    };
    if (a.hbm_state) stage_in(0, 0);
    for (int64_t v0 = 0, k = 0; v0 < values; v0 += a.update_rows, ++k) {
      const int64_t rows = rows_at(v0), next = v0 + a.update_rows;
      const int set = static_cast<int>(k % 2);
      UpdateRows u = UpdateRowsOf(a, r, opt, v0);
      if (a.hbm_state) {
        if (next < values) stage_in(next, 1 - set);
        u.w = StageRows(a, set, 0, opt.Slots());
        u.slot0 = StageRows(a, set, 1, opt.Slots());
        u.slot1 = opt.Slots() > 1 ? StageRows(a, set, 2, opt.Slots()) : 0;
        u.g = StageRows(a, set, parts, opt.Slots());
        if (a.cores > 1) {  // the cores' sum, as EmitGradientSum's, kept for Gradients()
          EmitVector(e.P(), hw::VectorOp::kAdd, u.g, StageRows(a, set, parts + 1, opt.Slots()), u.g,
                     rows, 0);
          e.Raw().WriteHbm(e.U(u.g), SumHbm(a, r.g_hbm + v0), e.U(rows));
        }
      }
      EmitUpdate(opt, u, [&e, rows](hw::VectorOp op, int64_t x, int64_t y, int64_t out, int flags) {
        EmitVector(e.P(), op, x, y, out, rows, flags);
      });
      if (a.hbm_state) Stage(e, a, r, v0, rows, set, parts, /*in=*/false);
    }
  }
}

// A step program's start: the next batch read ahead into the other buffer with `prefetch`
// (one read_host behind the whole step: the infeed).
template <typename Layout>
void StartStep(StepEmitter<Layout>& e, const Layout& a, bool prefetch) {
  e.Pass("batch in");
  if (prefetch) ReadBatch(e.P(), a, a.h_batch_next, a.scalars_next, a.y_next);
}

// A step program's end after its backward pass: the cores' gradient sum (with two), every
// layer's update, the results out; the program, its instructions' passes into *pass_of and
// *passes.
template <typename Layout>
isa::Program FinishStep(StepEmitter<Layout>& e, const Layout& a, const Optimizer& opt,
                        std::vector<int32_t>* pass_of, PassLog* passes) {
  if (a.cores > 1) {
    e.Pass("gradient sum");
    if (a.hbm_state) {
      e.P().Barrier(3);  // every core's gradients in HBM (GradHbm): the updates sum them
    } else {
      EmitGradientSum(e.P(), a.n, a.core, a.param.front().g, a.other, a.GradRows(), /*hbm=*/0);
    }
  }
  EmitUpdates(e, a, opt);
  e.Pass("results out");
  EmitWriteHost(e.P(), a.n, a.loss, a.h_out, a.OutRows());
  isa::Program program = e.Take();
  *pass_of = e.Passes().PassOf(program.words.size());
  *passes = e.Passes();
  return program;
}

// The init program: the parameter sets, the constants and the state, then `start` (the rows
// the step reads as zeros without writing them, zeroed).
template <typename Layout>
isa::Program InitProgram(const Layout& a,
                         const std::function<void(StepEmitter<Layout>&, const Layout&)>& start) {
  StepEmitter<Layout> e(a);
  e.P().ReadParams(static_cast<uint64_t>(a.h_params) * 2 * a.n, 0, static_cast<uint64_t>(a.Sets()));
  EmitReadHost(e.P(), a.n, 0, 0, HostStateEnd(a));
  start(e, a);
  return e.Take();
}

// Reads the batch in buffer `a`'s host area into its buffer (a step without it read ahead).
template <typename Layout>
isa::Program FetchProgram(const Layout& a) {
  StepEmitter<Layout> e(a);
  ReadBatch(e.P(), a, a.h_batch, a.scalars, a.y);
  return e.Take();
}

// The state back to the host rows it came from (none to write where it is in HBM).
template <typename Layout>
isa::Program SaveProgram(const Layout& a) {
  StepEmitter<Layout> e(a);
  if (!a.hbm_state) EmitWriteHost(e.P(), a.n, a.state_begin, a.state_begin, StateRows(a));
  return e.Take();
}

// The last step's gradients to the host (none to write where they are in HBM: GradHbm).
template <typename Layout>
isa::Program GradsProgram(const Layout& a) {
  StepEmitter<Layout> e(a);
  int64_t at = a.h_grads;
  if (a.hbm_state) return e.Take();
  for (const ParamRows& r : a.param) {
    EmitWriteHost(e.P(), a.n, r.g, at, r.Values(a.n));
    at += r.Values(a.n);
  }
  return e.Take();
}

// Set s's upper bound: the layout's Upper(s) where it has one (ReLU6's 6), else none.
template <typename Layout>
auto UpperOf(const Layout& a, int s, int) -> decltype(a.Upper(s)) {
  return a.Upper(s);
}
template <typename Layout>
float UpperOf(const Layout&, int, long) {
  return std::numeric_limits<float>::infinity();
}

// The activation unit's parameter sets (five host rows each on a bf16 chip: N float32
// biases, N float32 upper bounds, N bytes unused, half a row unused): set s adds 1 to lane
// a.BiasLane(s) (none for -1) and 0 to the rest, and bounds every lane by UpperOf(a, s).
template <typename Layout>
std::vector<uint8_t> ParamSets(const Layout& a) {
  const int n = a.n;
  std::vector<uint8_t> out(static_cast<size_t>(a.Sets()) * 10 * n, 0);
  auto put = [&out](size_t at, float v) {
    const uint32_t u = arith::BitsOfFloat(v);
    std::memcpy(&out[at], &u, 4);
  };
  for (int s = 0; s < a.Sets(); ++s)
    for (int j = 0; j < n; ++j) {
      const size_t set = static_cast<size_t>(s) * 10 * n;
      put(set + 4 * static_cast<size_t>(j), j == a.BiasLane(s) ? 1.0f : 0.0f);
      put(set + 4 * static_cast<size_t>(n + j), UpperOf(a, s, 0));
    }
  return out;
}

// The host's constants: buffer rows [0, state_begin) (the identity, the loss's rows, the
// update's constants, and what `put` writes: a step's own tiles), and after the state's rows
// the parameter sets, N zero rows and the bias block (a 1 in lane 0 of each image's row).
template <typename Layout>
std::vector<uint8_t> ConstantImage(const Layout& a, const Optimizer& opt,
                                   const std::function<void(std::vector<uint16_t>*)>& put) {
  const int n = a.n;
  std::vector<uint16_t> img(static_cast<size_t>(a.state_begin * n), 0);
  for (int i = 0; i < n; ++i) img[static_cast<size_t>((a.id + i) * n + i)] = Bf16Of(1.0f);
  const int classes = a.param.back().outs;
  const std::vector<float> consts = UpdateConstants(opt);
  for (int64_t k = 0; k < ClassBlocks(a); ++k)
    for (int j = 0; j < n; ++j)
      PutFp32(&img, a.pad + 2 * k, n, j,
              k * n + j < classes ? 0.0f : -std::numeric_limits<float>::infinity());
  for (int j = 0; j < n; ++j) {
    PutFp32(&img, a.inv_batch, n, j, InverseBatch(a.b * a.cores));  // the whole batch's
    for (size_t i = 0; i < consts.size(); ++i)
      PutFp32(&img, a.consts + 2 * static_cast<int64_t>(i), n, j, consts[i]);
  }
  put(&img);
  std::vector<uint8_t> out = BytesOfHalves(img);
  out.resize(static_cast<size_t>(HostStateEnd(a)) * 2 * n, 0);
  const std::vector<uint8_t> sets = ParamSets(a);
  out.insert(out.end(), sets.begin(), sets.end());
  std::vector<uint16_t> tail(static_cast<size_t>((a.h_batch - a.h_zero) * n), 0);
  for (int i = 0; i < a.b; ++i) tail[static_cast<size_t>((n + i) * n)] = Bf16Of(1.0f);
  const std::vector<uint8_t> t = BytesOfHalves(tail);
  out.insert(out.end(), t.begin(), t.end());
  return out;
}

// fn(i, row, lane) for each value of layer r: i its index in dense_net.h's layout (rows the
// inputs then the bias, the outputs a row), row and lane its place in the tile's layout.
template <typename Fn>
void EachValue(int n, const ParamRows& r, Fn fn) {
  for (int64_t row = 0; row <= r.ins; ++row)
    for (int o = 0; o < r.outs; ++o)
      fn(static_cast<size_t>(row * r.outs + o), r.Block(o / n, row / n, n) + row % n, o % n);
}

template <typename Layout>
std::vector<uint8_t> StateImage(const Layout& a, const DenseState& s) {
  const int n = a.n;
  std::vector<uint16_t> img(static_cast<size_t>((a.state_end - a.state_begin) * n), 0);
  for (size_t l = 0; l < a.param.size(); ++l) {
    const ParamRows& r = a.param[l];
    auto put = [&](int64_t base, const std::vector<float>& t) {
      EachValue(n, r, [&](size_t i, int64_t row, int lane) {
        PutFp32(&img, base - a.state_begin + 2 * row, n, lane, t[i]);
      });
    };
    put(r.w, s.w[l]);
    for (size_t k = 0; k < r.slot.size(); ++k) put(r.slot[k], s.slots[k][l]);
  }
  for (size_t k = 0; k < a.kept.size() && k < s.kept.size(); ++k)
    for (int v = 0; v < a.kept[k].values; ++v)
      PutFp32(&img, a.kept[k].RowOf(v, n) - a.state_begin, n, v % n,
              s.kept[k][static_cast<size_t>(v)]);
  return BytesOfHalves(img);
}

template <typename Layout>
void ReadStateImage(const Layout& a, const std::vector<uint8_t>& bytes, DenseState* s) {
  const std::vector<uint16_t> img = HalvesOfBytes(bytes);
  for (size_t l = 0; l < a.param.size(); ++l) {
    const ParamRows& r = a.param[l];
    auto get = [&](int64_t base, std::vector<float>* t) {
      t->assign(static_cast<size_t>(r.ins + 1) * r.outs, 0.0f);
      EachValue(a.n, r, [&](size_t i, int64_t row, int lane) {
        (*t)[i] = GetFp32(img, base - a.state_begin + 2 * row, a.n, lane);
      });
    };
    get(r.w, &s->w[l]);
    for (size_t k = 0; k < r.slot.size(); ++k) get(r.slot[k], &s->slots[k][l]);
  }
  s->kept.clear();
  for (const KeptRows& k : a.kept) {
    std::vector<float> t;
    for (int v = 0; v < k.values; ++v)
      t.push_back(GetFp32(img, k.RowOf(v, a.n) - a.state_begin, a.n, v % a.n));
    s->kept.push_back(std::move(t));
  }
}

// A batch as the host sends it: Adam's scalars of the step (4 rows), the images packed N
// pixels a row, the labels one-hot.
template <typename Layout>
std::vector<uint8_t> BatchImage(const Layout& a, const Optimizer& opt, const Batch& b,
                                int64_t step) {
  const int n = a.n;
  std::vector<uint16_t> img(static_cast<size_t>(a.BatchRows() * n), 0);
  const int64_t size = static_cast<int64_t>(b.x.size()) / a.b;
  for (int i = 0; i < a.b; ++i) {
    for (int64_t e = 0; e < size; ++e)
      img[static_cast<size_t>((4 + i * a.img_rows + e / n) * n + e % n)] =
          Bf16Of(b.x[static_cast<size_t>(i * size + e)]);
    const int label = b.labels[static_cast<size_t>(i)];
    img[static_cast<size_t>((4 + a.b * a.img_rows + label / n * a.b + i) * n + label % n)] =
        Bf16Of(1.0f);
  }
  PutStepScalars(&img, n, opt, step);
  return BytesOfHalves(img);
}

// One core's results: each image's loss, their mean, the logits.
template <typename Layout>
StepOut ReadOutImage(const Layout& a, const std::vector<uint8_t>& bytes) {
  const std::vector<uint16_t> img = HalvesOfBytes(bytes);
  StepOut o;
  for (int i = 0; i < a.b; ++i) o.loss.push_back(GetFp32(img, 2 * i, a.n, 0));
  o.mean = GetFp32(img, 2 * a.b, a.n, 0);
  const int classes = a.param.back().outs;
  for (int i = 0; i < a.b; ++i)
    for (int c = 0; c < classes; ++c)
      o.logits.push_back(FloatOfBf16Bits(
          img[static_cast<size_t>((2 * a.b + 2 + c / a.n * a.bp + i) * a.n + c % a.n)]));
  return o;
}

// The host side of a step's programs, for a layout.
template <typename Layout>
class Images : public StepImages {
 public:
  Images(const Layout& a, const Optimizer& opt) : a_(a), opt_(opt) {}
  // In HBM, the state's region holds each core's copy (StateInHbm); core 0's is read back.
  std::vector<uint8_t> StateBytes(const DenseState& s) const override {
    const std::vector<uint8_t> one = StateImage(a_, s);
    if (!a_.hbm_state) return one;
    std::vector<uint8_t> all;
    for (int c = 0; c < a_.cores; ++c) all.insert(all.end(), one.begin(), one.end());
    return all;
  }
  DenseState ReadState(const std::vector<uint8_t>& bytes) const override {
    DenseState s;
    s.w.resize(a_.param.size());
    s.slots.assign(static_cast<size_t>(opt_.Slots()), s.w);
    ReadStateImage(a_, bytes, &s);
    return s;
  }
  std::vector<uint8_t> BatchBytes(const Batch& b, int64_t step) const override {
    return BatchOfCores(a_.cores, a_.b, b,
                        [&](const Batch& share) { return BatchImage(a_, opt_, share, step); });
  }
  StepOut ReadOut(const std::vector<uint8_t>& bytes) const override {
    return OutOfCores(a_.cores, bytes,
                      [&](const std::vector<uint8_t>& core) { return ReadOutImage(a_, core); });
  }
  std::vector<std::vector<float>> ReadGrads(const std::vector<uint8_t>& bytes) const override {
    const std::vector<uint16_t> img = HalvesOfBytes(bytes);
    std::vector<std::vector<float>> g;
    int64_t at = 0;  // the layer's first row in img
    for (const ParamRows& r : a_.param) {
      std::vector<float> t(static_cast<size_t>(r.ins + 1) * r.outs);
      EachValue(a_.n, r, [&](size_t i, int64_t row, int lane) {
        t[i] = FloatOfBf16Bits(img[static_cast<size_t>((at + row) * a_.n + lane)]);
      });
      g.push_back(std::move(t));
      at += r.Values(a_.n);
    }
    return g;
  }

 private:
  Layout a_;
  Optimizer opt_;
};

// A step's program for a layout (its batch buffer's and core's), with or without the next
// batch read ahead, in parts where it is longer than a core's program region holds (each
// part's programs one after another); each part's instructions' passes into *pass_of, and
// the passes into *passes.
template <typename Layout>
using StepFn = std::function<std::vector<isa::Program>(
    const Layout& a, bool prefetch, std::vector<std::vector<int32_t>>* pass_of, PassLog* passes)>;

// The step programs of each batch buffer (`parity`: ForParity's) and core (ForCore), with
// and without the read ahead, and the fetch programs, named `name`-..., into *p.
template <typename Layout>
void StepExecutables(const Layout& a, const std::string& name,
                     const std::function<Layout(const Layout&, int parity)>& parity,
                     const StepFn<Layout>& step, DensePrograms* p) {
  const int n = a.n, cores = a.cores;
  const std::vector<engine::Region> infeed = {
      HostRows("batch0", a.h_batch, cores * a.BatchRows(), n),
      HostRows("batch1", a.h_batch_next, cores * a.BatchRows(), n),
      HostRows("out", a.h_out, cores * a.OutRows(), n)};
  PassLog passes;
  for (int b = 0; b < 2; ++b) {
    for (int core = 0; core < cores; ++core) {
      const Layout ap = ForCore(parity(a, b), core);
      // Core 0's passes are the step's (its counters are the rows').
      std::vector<std::vector<int32_t>> pass_of[2];
      PassLog core_passes;
      for (int prefetch = 0; prefetch < 2; ++prefetch) {
        std::vector<isa::Program> parts =
            step(ap, prefetch, &pass_of[prefetch], core == 0 ? &passes : &core_passes);
        const std::string step_name = name + (prefetch ? "-step" : "-step (no prefetch)");
        p->parts[b][prefetch].resize(parts.size() - 1);
        for (size_t k = 0; k < parts.size(); ++k) {
          engine::Executable& exe = k == 0 ? p->steps[b][prefetch] : p->parts[b][prefetch][k - 1];
          exe.name = k == 0 ? step_name : fmt::format("{} part {}", step_name, k + 1);
          exe.programs.push_back(std::move(parts[k]));
          exe.regions = infeed;
        }
        if (core != 0) continue;
        (prefetch ? p->pass_of : p->pass_of_last) = pass_of[prefetch].front();
        p->parts_pass_of[prefetch].assign(pass_of[prefetch].begin() + 1, pass_of[prefetch].end());
      }
      p->fetch[b].name = name + "-fetch";
      p->fetch[b].programs.push_back(FetchProgram(ap));
      p->fetch[b].regions = infeed;
    }
  }
  p->pass_names = passes.Names();
  p->pass_macs = passes.Macs();
  p->step = p->steps[0][1];
}

// The programs of a step compiled for layout `a` (MakeLayout's, batch buffer 0, core 0):
// init (its `start` zeroing, the constants with what `constants` writes), the steps and
// fetches (StepExecutables), save and grads; and their host side.
template <typename Layout>
CompiledStep Programs(const Layout& a, const Optimizer& opt, const std::string& name,
                      const std::function<Layout(const Layout&, int parity)>& parity,
                      const std::function<void(StepEmitter<Layout>&, const Layout&)>& start,
                      const std::function<void(std::vector<uint16_t>*)>& constants,
                      const StepFn<Layout>& step) {
  const int n = a.n;
  CompiledStep c;
  DensePrograms& p = c.programs;
  p.ub_rows = a.end;
  p.cores = a.cores;
  p.state_in_hbm = a.hbm_state;
  engine::Region consts = HostRows("constants", 0, a.h_batch, n);
  consts.initial = ConstantImage(a, opt, constants);
  const uint64_t state_bytes = static_cast<uint64_t>(StateRows(a)) * 2 * n;
  const engine::Region state = a.hbm_state ? engine::Region{"state",
                                                            engine::Memory::kWeight,
                                                            a.hbm_state_addr,
                                                            a.cores * state_bytes,
                                                            {}}
                                           : HostRows("state", a.state_begin, StateRows(a), n);
  // Every core starts from the same constants and state (init reads them from the same host
  // rows, or each core's copy in HBM is the same); core 0's state and gradients are the
  // step's (the cores' are equal).
  p.init = {
      name + "-init", std::vector<isa::Program>(a.cores, InitProgram(a, start)), {consts, state}};
  StepExecutables(a, name, parity, step, &p);
  p.save = {name + "-save", {SaveProgram(a)}, {state}};
  const uint64_t grad_bytes = static_cast<uint64_t>(a.GradRows()) * 2 * n;
  p.grads = {name + "-grads",
             {GradsProgram(a)},
             {a.hbm_state ? engine::Region{"grads",
                                           engine::Memory::kWeight,
                                           a.cores > 1 ? SumHbm(a, 0) : GradHbm(a, 0, 0),
                                           grad_bytes,
                                           {}}
                          : HostRows("grads", a.h_grads, a.GradRows(), n)}};
  c.images = std::make_shared<Images<Layout>>(a, opt);
  return c;
}

}  // namespace tpu::train::shell
