// See conv_step.h. Every product runs in chunks of at most the accumulator rows set aside
// for it, and every value goes through the unified buffer between the operations, in the
// order the reference computes it; the interlocks keep the order (docs/timing.md, "Issue").
#include "host/train/conv_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "arith/bf16.h"
#include "arith/fp32.h"
#include "host/common/errors.h"
#include "host/isa/program_builder.h"
#include "host/train/dense_reference.h"
#include "host/train/step_emit.h"
#include "host/train/step_image.h"
#include "host/train/step_shell.h"

namespace tpu::train {
// Its own namespace: the library's unity build puts this file beside dense_step.cc, whose
// helpers have the same names.
namespace conv_step {
namespace {

using hw::VectorOp;
using isa::ProgramBuilder;

using shell::ParamRows;
using shell::TilesOf;

// A convolution (valid, stride 1) with its ReLU and the 2 x 2 average pooling after it.
struct ConvRows {
  std::string pool;  // the pooling's name
  int in_h = 0, in_w = 0, cin = 0, kh = 0, kw = 0, oh = 0, ow = 0, cout = 0, ph = 0, pw = 0;
  int64_t pixels = 0, pf = 0;  // its output pixels, b oh ow; rounded up to whole chunks of N
  int64_t map = 0;             // its input (the first: the images, packed)
  int64_t f = 0;               // receptive fields: two images' of kb blocks (the forward's)
  int64_t h = 0;               // the ReLU's output, a pixel a row: two images' (the forward's)
  int64_t p = 0;               // pooled: b ph pw rows
  int64_t dp = 0, dz = 0;      // the pooled map's gradient; dL/dz (pf rows, or 0: below)
  // F and h are not kept for the whole batch: f and h (the layout's scratch) hold one
  // image's in the forward pass, and the backward pass forms them again a chunk of N pixel
  // rows at a time (fchunk, hchunk; EmitConvWeightGradient). dL/dz is kept (dz) where an
  // input gradient reads it, conv2's; conv1's is formed a chunk at a time too (dzchunk).
  int64_t fchunk = 0, hchunk = 0, dzchunk = 0;
  int64_t Taps() const { return int64_t{kh} * kw; }
  int64_t InPixels() const { return int64_t{in_h} * in_w; }
  int64_t OutPixels() const { return int64_t{oh} * ow; }
  int64_t Pooled() const { return int64_t{ph} * pw; }
};

struct FcRows {  // a dense layer: its input X (kb blocks of bp rows), its ReLU's mask, dz
  int64_t x = 0, mask = 0, dz = 0, ones = 0;
};

// Unified-buffer rows (bf16 rows of N lanes), host rows (2N bytes), accumulator rows.
struct Layout {
  int n = 0, b = 0;      // b: a core's images (its share of the batch)
  int cores = 1;         // the cores the batch is split across (each runs the step on its share)
  int core = 0;          // the core of this layout's host areas (ForCore)
  int64_t bp = 0;        // the batch rounded up to whole chunks of N
  int64_t img_rows = 0;  // an image's rows, its pixels packed N a row
  int64_t id = 0, zero = 0, quarters[2] = {0, 0}, pad = 0, inv_batch = 0, consts = 0;
  int64_t quarters3 = 0;  // conv2's pooling's gradient through a 3 x 3 window (EmitConvBackward)
  int64_t state_begin = 0, state_end = 0;  // the weights and the optimizer's state
  bool hbm_state = false;                  // always in the buffer (step_shell.h's StateRows)
  uint64_t hbm_state_addr = 0;
  uint64_t hbm_grad_addr = 0;
  int64_t stage = 0;
  std::vector<shell::KeptRows> kept;   // none: the CNN's layers keep nothing
  int64_t scalars = 0, x0 = 0, y = 0;  // the batch: Adam's scalars, images, labels
  // The other batch buffer (the infeed's: a step reads the next batch into it while it
  // runs on this one); ForParity swaps them in.
  int64_t scalars_next = 0, x0_next = 0, y_next = 0;
  bool pass_images = false;  // the whole batch in a buffer (step_shell.h's ReadBatch)
  std::string flatten;       // the flatten's name
  ConvRows conv[2];
  std::vector<ParamRows> param;  // conv1, conv2, the dense layers
  std::vector<FcRows> fc;
  int64_t loss = 0, mean = 0, logits = 0;  // the step's results: one write_host
  int64_t sm = 0, mx = 0, sum = 0, recip = 0, pick = 0;
  int64_t dzt = 0, scratch = 0, flipped = 0, tmp = 0, tmp2 = 0, end = 0;
  int64_t other = 0;        // with two cores: the other core's weight gradients (GradRows rows)
  int64_t mask_rows = 0;    // the scratch's rows: a ReLU's mask, a piece at a time
  int64_t update_rows = 0;  // value rows an update's instructions take at a time (tmp's)
  int64_t group_rows = 0;   // pixel rows a conv's weight gradient forms at a time
  int64_t acc_rows = 0, acc_t = 0, acc_g = 0;  // a product's chunk; a transpose's; dWᵀ's
  int64_t g_tiles = 0;  // the K-tiles dWᵀ's accumulators hold (every layer's)
  // Host rows: the image of buffer rows [0, state_end), the parameter sets, N zero rows, a
  // block of the bias lane's 1, the batch (each core's share in core order), the results
  // (each core's), the gradients.
  int64_t h_params = 0, h_zero = 0, h_bias = 0, h_batch = 0, h_batch_next = 0, h_out = 0,
          h_grads = 0;
  static constexpr int kSets = 4;  // parameter sets: below
  int64_t GradRows() const {
    int64_t rows = 0;
    for (const ParamRows& r : param) rows += r.Values(n);
    return rows;
  }
  int64_t BatchRows() const { return 4 + b * img_rows + b; }
  int64_t OutRows() const { return 3 * int64_t{b} + 2; }
  int Sets() const { return kSets; }
  // The lane parameter set s adds a 1 to (SetOfConv), or -1.
  int64_t BiasLane(int s) const { return s == 0 ? -1 : param[static_cast<size_t>(s - 1)].ins % n; }
};

using ConvEmitter = shell::StepEmitter<Layout>;

// The activation unit's parameter sets: 0 adds +0; 1 and 2 add the bias lane's 1 of
// conv1's and conv2's receptive fields, 3 that of the first dense layer's input.
int SetOfConv(int i) { return 1 + i; }
constexpr int kSetFlat = 3;

ConvRows ConvOf(const nn::Layer& conv, const nn::Shape3& in, int b, int n) {
  ConvRows c;
  c.in_h = in.h;
  c.in_w = in.w;
  c.cin = in.c;
  c.kh = conv.kernel_h;
  c.kw = conv.kernel_w;
  c.oh = in.h - conv.kernel_h + 1;
  c.ow = in.w - conv.kernel_w + 1;
  c.cout = conv.out.c;
  c.ph = c.oh / 2;
  c.pw = c.ow / 2;
  c.pixels = int64_t{b} * c.oh * c.ow;
  c.pf = TilesOf(c.pixels, n) * n;
  return c;
}

// The maps and the dense layers' rows, forward and backward.
void PlaceActivations(Layout* a, const std::function<int64_t(int64_t)>& take) {
  const int64_t b = a->b;
  int64_t f_rows = 0, h_rows = 0, kb = 0;
  for (int i = 0; i < 2; ++i) {
    const int64_t blocks = a->param[static_cast<size_t>(i)].kb;
    f_rows = std::max(f_rows, 2 * blocks * a->conv[i].OutPixels());  // two images' (forward)
    h_rows = std::max(h_rows, 2 * a->conv[i].OutPixels());
    kb = std::max(kb, blocks);
  }
  const int64_t g = a->group_rows;
  const int64_t f = take(f_rows), h = take(h_rows), fchunk = take(kb * g), hchunk = take(g),
                dzchunk = take(g);
  for (int i = 0; i < 2; ++i) {
    ConvRows& c = a->conv[i];
    c.map = i == 0 ? a->x0 : a->conv[0].p;
    c.f = f;
    c.h = h;
    c.fchunk = fchunk;
    c.hchunk = hchunk;
    c.dzchunk = dzchunk;
    c.p = take(b * c.Pooled());
    // conv1's pooled map is last read by conv2's weight gradient (its F formed again), before
    // conv2's input gradient writes conv1's pooled map's gradient: the same rows hold both.
    c.dp = i == 0 ? c.p : take(b * c.Pooled());
    c.dz = i == 1 ? take(c.pf) : 0;
  }
  for (size_t l = 0; l < a->fc.size(); ++l) {
    const ParamRows& r = a->param[2 + l];
    a->fc[l].x = take(r.kb * a->bp);
    a->fc[l].mask = take(r.mb * a->bp);
    a->fc[l].dz = take(r.mb * a->bp);
  }
}

Layout MakeLayout(const nn::Model& m, int batch, const Optimizer& opt, const config::TpuConfig& cfg,
                  int cores = 1) {
  Layout a;
  const int n = cfg.array_dim;
  shell::SetBatch(&a, n, batch, cores);
  a.conv[0] = ConvOf(m.layers[0], m.input, batch, n);
  a.conv[1] = ConvOf(m.layers[2], {a.conv[0].ph, a.conv[0].pw, a.conv[0].cout}, batch, n);
  a.conv[0].pool = m.layers[1].name;
  a.conv[1].pool = m.layers[3].name;
  a.flatten = m.layers[4].name;
  a.img_rows = TilesOf(m.input.Size(), n);
  int64_t at = 0;
  const std::function<int64_t(int64_t)> take = shell::RowsFrom(&at);
  a.id = take(n);
  a.zero = take(1);
  for (int64_t& q : a.quarters) q = take(n);
  a.quarters3 = take(TilesOf(9 * int64_t{a.conv[1].cout}, n) * n);
  a.pad = take(2);
  a.inv_batch = take(2);
  a.consts = take(2 * static_cast<int64_t>(UpdateConstants(opt).size()));
  for (size_t i = 0; i < m.layers.size(); ++i)
    if (m.layers[i].type == nn::LayerType::kDense) a.fc.push_back({0, 0, 0, take(1)});
  shell::PlaceParams(m, opt, &a, take);
  shell::PlaceBatchBuffers(&a, batch, batch, take);
  shell::PlaceAccumulators(&a, cfg.acc_depth_rows);
  a.group_rows = std::max<int64_t>(n, std::min<int64_t>(8 * n, a.acc_rows / n * n));
  PlaceActivations(&a, take);
  a.loss = take(2 * int64_t{batch});
  a.mean = take(2);
  a.logits = take(batch);
  for (int64_t* p : {&a.sm, &a.mx, &a.sum, &a.recip, &a.pick}) *p = take(2 * int64_t{batch});
  int64_t values = 0;
  for (ParamRows& r : a.param) {
    r.g = take(r.Values(n));
    values = std::max(values, r.Values(n));
  }
  for (ParamRows& r : a.param) r.gt = take(r.Values(n));
  a.dzt = take(a.group_rows);  // dZᵀ of a group's chunks (at most N rows each)
  a.scratch = take(a.mask_rows = std::min<int64_t>(a.conv[1].pixels, 8 * int64_t{n}));
  a.update_rows = std::min<int64_t>(values, 2 * int64_t{n});
  a.flipped = take(TilesOf(a.conv[1].Taps() * a.conv[1].cout, n) * n);
  a.tmp = take(2 * a.update_rows);
  a.tmp2 = take(2 * a.update_rows);
  if (cores > 1) a.other = take(a.GradRows());
  a.end = at;
  shell::PlaceHostRows(&a);
  return a;
}

// The layout whose batch buffer is buffer `parity` (0: MakeLayout's own, 1: the other).
Layout ForParity(Layout a, int parity) {
  if (parity == 0) return a;
  shell::SwapBatchBuffers(&a);
  a.conv[0].map = a.x0;
  return a;
}

isa::WindowGeometry MapWindow(int64_t in_h, int64_t in_w, int64_t channels) {
  isa::WindowGeometry g;
  g.in_h = static_cast<uint64_t>(in_h);
  g.in_w = static_cast<uint64_t>(in_w);
  g.channels = static_cast<uint64_t>(channels);
  return g;
}

// conv i's window: its receptive fields, over its input map (the images packed, or a
// pixel a row).
isa::WindowGeometry ConvWindow(const Layout& a, int i) {
  const ConvRows& c = a.conv[i];
  isa::WindowGeometry g = MapWindow(c.in_h, c.in_w, c.cin);
  g.pixel_bytes = i == 0 ? static_cast<uint64_t>(c.cin) : static_cast<uint64_t>(a.n);
  g.kh = static_cast<uint64_t>(c.kh);
  g.kw = static_cast<uint64_t>(c.kw);
  g.out_h = static_cast<uint64_t>(c.oh);
  g.out_w = static_cast<uint64_t>(c.ow);
  return g;
}

// conv i's pooling: kernel 2 x 2, stride 2.
isa::WindowGeometry PoolWindow(const Layout& a, int i) {
  const ConvRows& c = a.conv[i];
  isa::WindowGeometry g = MapWindow(c.oh, c.ow, c.cout);
  g.pixel_bytes = static_cast<uint64_t>(a.n);
  g.kh = g.kw = g.stride_y = g.stride_x = 2;
  g.out_h = static_cast<uint64_t>(c.ph);
  g.out_w = static_cast<uint64_t>(c.pw);
  return g;
}

// Its gradient: a dilated window of kernel 2 x 2, padding 1, over the pooled map's
// gradient; 2 ph x 2 pw pixels (an odd side's last row and column get none).
isa::WindowGeometry PoolGradWindow(const Layout& a, int i) {
  const ConvRows& c = a.conv[i];
  isa::WindowGeometry g = MapWindow(c.ph, c.pw, c.cout);
  g.pixel_bytes = static_cast<uint64_t>(a.n);
  g.kh = g.kw = 2;
  g.pad_top = g.pad_left = 1;
  g.dilated = true;
  g.out_h = static_cast<uint64_t>(2 * c.ph);
  g.out_w = static_cast<uint64_t>(2 * c.pw);
  return g;
}

// conv i's forward pass, an image at a time and three images in flight: at step t, image
// t's receptive fields F (one `matmul window` a K-tile through the identity, the bias
// lane's 1 from its parameter set), image t - 1's F W_b, image t - 2's pooling (a window of
// stride 2 through four identities times 1/4), each followed by the activate of what an
// earlier product of the step left, so that each activate waits for its product's drain
// while the array streams the next product. F and h go through two buffers of one image
// each (f, h), the sums through accumulator rows of their own (F's, two of h's, the
// pooling's: ForwardAccRows); only the pooled maps are kept.
void EmitConvForward(ConvEmitter& e, const Layout& a, int i) {
  const ConvRows& c = a.conv[i];
  const ParamRows& r = a.param[static_cast<size_t>(i)];
  const int n = a.n;
  e.Pass(r.name + " forward", c.pixels * (r.ins + 1) * r.outs);
  EmitVector(e.P(), VectorOp::kCopy, r.w, 0, r.wb, r.Values(n), kA32);
  const int64_t in_rows = i == 0 ? a.img_rows : c.InPixels(), per = c.OutPixels();
  const int64_t acc_f = 0, acc_h = r.kb * per, acc_p = acc_h + 2 * per;
  auto f = [&](int64_t t) { return c.f + (t % 2) * r.kb * per; };
  auto h = [&](int64_t t) { return c.h + (t % 2) * per; };
  for (int64_t t = 0; t < a.b + 2; ++t) {
    const bool fields = t < a.b, dense = t >= 1 && t <= a.b, pool = t >= 2;
    e.Pass(r.name + " forward");
    if (fields) {
      e.P().SetWindow(ConvWindow(a, i));
      for (int64_t k = 0; k < r.kb; ++k)
        e.P().MatmulWindow(e.U(c.map + t * in_rows), e.U(acc_f + k * per), e.U(per), 0, e.U(k),
                           e.Tile(a.id, false, true), isa::Acc::kOverwrite);
    }
    if (dense)
      for (int64_t k = 0; k < r.kb; ++k)
        e.P().Matmul(e.U(f(t - 1) + k * per), e.U(acc_h + (t % 2) * per), e.U(per),
                     e.Tile(r.wb + r.Block(0, k, n), false, r.kb == 1), isa::AddIf(k > 0));
    if (fields)
      for (int64_t k = 0; k < r.kb; ++k)
        e.P().Activate(e.U(acc_f + k * per), e.U(f(t) + k * per), e.U(per),
                       e.U(k == r.ins / n ? SetOfConv(i) : 0), false, isa::Pool::kNone);
    if (pool) {
      e.Pass(c.pool + " forward");
      e.P().SetWindow(PoolWindow(a, i));
      e.P().MatmulWindow(e.U(h(t - 2)), e.U(acc_p), e.U(c.Pooled()), 0, 0,
                         e.Tile(a.quarters[i], false, true), isa::Acc::kOverwrite);
    }
    if (dense) {
      e.Pass(r.name + " forward");
      e.P().Activate(e.U(acc_h + (t % 2) * per), e.U(h(t - 1)), e.U(per), 0, true,
                     isa::Pool::kNone);
    }
    if (pool) {
      e.Pass(c.pool + " forward");
      e.P().Activate(e.U(acc_p), e.U(c.p + (t - 2) * c.Pooled()), e.U(c.Pooled()), 0, false,
                     isa::Pool::kNone);
    }
  }
}

// The accumulator rows EmitConvForward takes for conv c of kb K-tiles.
int64_t ForwardAccRows(const ConvRows& c, int64_t kb) {
  return (kb + 2) * c.OutPixels() + c.Pooled();
}

// The first dense layer's input: the pooled maps flattened (y, x, c), one window over the
// maps stacked (a kernel of the whole map, one output pixel an image) through the
// identity, K-tile by K-tile; the bias lane's 1 from parameter set kSetFlat.
void EmitFlatten(ConvEmitter& e, const Layout& a) {
  const ConvRows& c = a.conv[1];
  const ParamRows& r = a.param[2];
  e.Pass(a.flatten + " forward");
  isa::WindowGeometry g = MapWindow(int64_t{c.ph} * a.b, c.pw, c.cout);
  g.pixel_bytes = static_cast<uint64_t>(a.n);
  g.kh = g.stride_y = static_cast<uint64_t>(c.ph);
  g.kw = static_cast<uint64_t>(c.pw);
  g.out_h = static_cast<uint64_t>(a.b);
  g.out_w = 1;
  e.P().SetWindow(g);
  for (int64_t k = 0; k * a.n < r.ins; ++k)  // a block of the bias lane alone: EmitStart's
    e.Window(c.p, a.b, a.id, k, 1, a.fc[0].x + k * a.bp, k == r.ins / a.n ? kSetFlat : 0);
}

// The dense layers: ReLU, its mask, the next layer's bias lane; the last's logits.
void EmitDenseForward(ConvEmitter& e, const Layout& a) {
  for (size_t l = 0; l < a.fc.size(); ++l) {
    const ParamRows& r = a.param[2 + l];
    const bool last = l + 1 == a.fc.size();
    e.Pass(r.name + " forward", int64_t{a.b} * (r.ins + 1) * r.outs);
    EmitVector(e.P(), VectorOp::kCopy, r.w, 0, r.wb, r.Values(a.n), kA32);
    for (int64_t j = 0; j < r.mb; ++j) {
      const int64_t out = last ? a.logits : a.fc[l + 1].x + j * a.bp;
      e.Dense(a.fc[l].x, a.bp, r, j, a.b, out, !last);
      if (!last)
        EmitVector(e.P(), VectorOp::kEqual, out, a.zero, a.fc[l].mask + j * a.bp, a.b, kBcast);
    }
    if (last || r.outs % a.n == 0) continue;  // a block of the bias lane alone: EmitStart's
    const int64_t blk = a.fc[l + 1].x + (r.outs / a.n) * a.bp;
    EmitVector(e.P(), VectorOp::kAdd, blk, a.fc[l + 1].ones, blk, a.b, kBcast);
  }
}

void EmitLossRows(ConvEmitter& e, const Layout& a) {
  e.Pass("loss");
  EmitSoftmaxLoss(e.P(), LossRowsOf(a, a.fc.back().dz), a.b);
}

// The dense layers' backward pass, the last first: dWᵀ, and dX = dz Wᵀ masked by the layer
// below's ReLU; the first dense layer's dX goes to the pooled map's gradient a pixel at a
// time (the transposed load of its tile's rows of that pixel: lanes its channels).
void EmitDenseBackward(ConvEmitter& e, const Layout& a) {
  const int n = a.n;
  for (size_t l = a.fc.size(); l-- > 0;) {
    const ParamRows& r = a.param[2 + l];
    e.Pass(r.name + " weight gradient", int64_t{a.b} * (r.ins + 1) * r.outs);
    e.WeightGradient(r, a.fc[l].dz, a.bp, a.fc[l].x, a.bp, a.bp / n);
    e.Pass(r.name + " input gradient", int64_t{a.b} * r.ins * r.outs);
    if (l == 0) break;
    const ParamRows& prev = a.param[1 + l];
    for (int64_t k = 0; k < prev.mb; ++k) {
      for (int64_t j = 0; j < r.mb; ++j) {
        e.Tile(r.wb + r.Block(j, k, n), true);
        e.P().Matmul(e.U(a.fc[l].dz + j * a.bp), 0, e.U(a.b), true, isa::AddIf(j > 0));
      }
      const int64_t dz = a.fc[l - 1].dz + k * a.bp;
      e.P().Activate(0, e.U(dz), e.U(a.b), 0, false, isa::Pool::kNone);
      EmitVector(e.P(), VectorOp::kSelect, a.fc[l - 1].mask + k * a.bp, a.zero, dz, a.b, kBcast);
    }
  }
  const ParamRows& r = a.param[2];
  const ConvRows& c = a.conv[1];
  for (int64_t px = 0; px < c.Pooled(); ++px) {
    for (int64_t j = 0; j < r.mb; ++j) {
      e.Tile(r.wb + r.Block(j, 0, n) + px * c.cout, true);
      e.P().Matmul(e.U(a.fc[0].dz + j * a.bp), 0, e.U(a.b), true, isa::AddIf(j > 0));
    }
    e.P().Activate(0, e.U(c.dp + px), e.U(a.b), 0, false, isa::Pool::kNone, e.U(c.Pooled()));
  }
}

// The pixel rows [p0, p0 + len) of conv c's output, image by image: fn(image,
// its first pixel there, pixels, their offset from p0).
template <typename Fn>
void EachSegment(const ConvRows& c, int64_t p0, int64_t len, Fn fn) {
  const int64_t per = c.OutPixels();
  for (int64_t q = p0; q < p0 + len;) {
    const int64_t img = q / per, local = q % per, count = std::min(per - local, p0 + len - q);
    fn(img, local, count, q - p0);
    q += count;
  }
}

// Window rows of pixels [p0, p0 + len) (across images: a window an image) through the tile
// at `tile`, K-tile k, into accumulator rows 0 .. len - 1.
void SegmentWindows(ConvEmitter& e, const ConvRows& c, int64_t p0, int64_t len, int64_t map,
                    int64_t map_rows, int64_t tile, int64_t k) {
  bool first = e.Tile(tile, false, true);
  EachSegment(c, p0, len, [&](int64_t img, int64_t local, int64_t count, int64_t off) {
    e.P().MatmulWindow(e.U(map + img * map_rows), e.U(off), e.U(count), e.U(local), e.U(k), first,
                       isa::Acc::kOverwrite);
    first = false;
  });
}

// conv i's weight gradient, a group of group_rows pixel rows (whole chunks of N, across the
// images) at a time: the group's F and ReLU output formed again (the windows and the product
// of the forward pass), its dL/dz the rows of dz where kept (masked in place) or else formed
// from the pooling's gradient (conv1's, an even map); then chunk by chunk of N pixels added
// into dWᵀ: the same values and the same sums as rows kept for the whole batch would give.
void EmitConvWeightGradient(ConvEmitter& e, const Layout& a, int i) {
  const ConvRows& c = a.conv[i];
  const ParamRows& r = a.param[static_cast<size_t>(i)];
  const int n = a.n;
  const int64_t in_rows = i == 0 ? a.img_rows : c.InPixels(), g = a.group_rows;
  for (int64_t q0 = 0; q0 < c.pixels; q0 += g) {
    const int64_t len = std::min(g, c.pixels - q0), chunks = TilesOf(len, n);
    e.Pass(r.name + " weight gradient", c.pixels * (r.ins + 1) * r.outs);
    e.P().SetWindow(ConvWindow(a, i));
    for (int64_t k = 0; k < r.kb; ++k) {
      SegmentWindows(e, c, q0, len, c.map, in_rows, a.id, k);
      e.P().Activate(0, e.U(c.fchunk + k * g), e.U(len), e.U(k == r.ins / n ? SetOfConv(i) : 0),
                     false, isa::Pool::kNone);
    }
    e.Dense(c.fchunk, g, r, 0, len, c.hchunk, true);
    int64_t dz = c.dz + q0;
    if (!c.dz) {
      e.Pass(c.pool + " gradient");
      e.P().SetWindow(PoolGradWindow(a, i));
      SegmentWindows(e, c, q0, len, c.dp, c.Pooled(), a.quarters[i], 0);
      e.P().Activate(0, e.U(c.dzchunk), e.U(len), 0, false, isa::Pool::kNone);
      if (len < chunks * n)  // the rows past the last pixel that its chunk's load reads
        EmitReadHost(e.P(), n, a.h_zero, c.dzchunk + len, chunks * n - len);
      dz = c.dzchunk;
    }
    e.Mask(c.hchunk, dz, len);
    // The chunks' dZᵀ: each its own transposed load, accumulator rows and rows of dzt, so
    // that the loads queue in the weight FIFO behind the products before them.
    e.Pass(r.name + " weight gradient");
    for (int64_t ch = 0; ch < chunks; ++ch) {
      e.Tile(dz + ch * n, true);
      e.P().Matmul(e.U(a.id), e.U(ch * n), e.U(r.outs), true, isa::Acc::kOverwrite);
    }
    for (int64_t ch = 0; ch < chunks; ++ch)
      e.P().Activate(e.U(ch * n), e.U(a.dzt + ch * r.outs), e.U(r.outs), 0, false,
                     isa::Pool::kNone);
    for (int64_t ch = 0; ch < chunks; ++ch)
      for (int64_t k = 0; k < r.kb; ++k) {
        e.Tile(c.fchunk + k * g + ch * n);
        e.P().Matmul(e.U(a.dzt + ch * r.outs), e.U(a.acc_g + k * n), e.U(r.outs), true,
                     isa::AddIf(q0 + ch > 0));
      }
  }
  e.FinishGradient(r, 0);
}

// conv2's backward pass from its pooled map's gradient: the pooling's gradient (a dilated
// window, kept whole in dz), the ReLU's mask and dWᵀ = dZᵀ F chunk by chunk, then its input
// gradient through the flipped kernel W'' into conv1's pooled map's gradient.
void EmitConvBackward(ConvEmitter& e, const Layout& a, int i) {
  const ConvRows& c = a.conv[i];
  const ParamRows& r = a.param[static_cast<size_t>(i)];
  const int n = a.n;
  e.Pass(c.pool + " gradient");
  // An odd side's last row and column get no gradient (the pooling left them out): a 2 x 2
  // window's outputs stop a row and a column short of the map, so the window is 3 x 3 with
  // padding 2 through a tile whose first row and column of taps are zeros (quarters3): the
  // same taps in the same order and zeros, over the whole map, the last row and column
  // reading only padding. Each output has one non-zero product, so both sums are exact.
  const bool whole = c.oh == 2 * c.ph && c.ow == 2 * c.pw;
  isa::WindowGeometry g = PoolGradWindow(a, i);
  if (!whole) {
    g.kh = g.kw = 3;
    g.pad_top = g.pad_left = 2;
    g.out_h = static_cast<uint64_t>(c.oh);
    g.out_w = static_cast<uint64_t>(c.ow);
  }
  e.P().SetWindow(g);
  for (int img = 0; img < a.b; ++img)
    e.Window(c.dp + img * c.Pooled(), c.OutPixels(), whole ? a.quarters[i] : a.quarters3, 0,
             whole ? 1 : TilesOf(9 * int64_t{c.cout}, n), c.dz + img * c.OutPixels(), 0);
  EmitConvWeightGradient(e, a, i);
  const ConvRows& below = a.conv[0];
  e.Pass(r.name + " input gradient", int64_t{a.b} * c.InPixels() * r.ins * r.outs);
  for (int64_t t = 0; t < c.Taps(); ++t)  // W'' tap (taps - 1 - t): tap t transposed
    e.Transpose(r.wb + t * c.cin, a.flipped + (c.Taps() - 1 - t) * c.cout, c.cout);
  g = MapWindow(c.oh, c.ow, c.cout);
  g.pixel_bytes = static_cast<uint64_t>(n);
  g.kh = static_cast<uint64_t>(c.kh);
  g.kw = static_cast<uint64_t>(c.kw);
  g.pad_top = static_cast<uint64_t>(c.kh - 1);
  g.pad_left = static_cast<uint64_t>(c.kw - 1);
  g.out_h = static_cast<uint64_t>(c.in_h);
  g.out_w = static_cast<uint64_t>(c.in_w);
  e.P().SetWindow(g);
  const int64_t kts = TilesOf(c.Taps() * c.cout, n);
  for (int img = 0; img < a.b; ++img)
    e.Window(c.dz + img * c.OutPixels(), c.InPixels(), a.flipped, 0, kts,
             below.dp + img * c.InPixels(), 0);
}

// The rows the step reads as zeros without writing them, zeroed (from the host's zero
// rows): past each tensor's rows up to whole chunks of N (a transposed load or a tile reads
// N rows), the rows of an odd map's last row and column of dL/dz (the pooling left them
// out), dWᵀ's rows past the outputs and W'''s past its taps; and each dense layer's block of
// the bias lane alone, where a layer has one.
void EmitStart(ConvEmitter& e, const Layout& a) {
  const int n = a.n;
  auto zero = [&](int64_t ub, int64_t rows) {
    for (int64_t r0 = 0; r0 < rows; r0 += n)
      EmitReadHost(e.P(), n, a.h_zero, ub + r0, std::min<int64_t>(n, rows - r0));
  };
  for (int i = 0; i < 2; ++i) {
    const ConvRows& c = a.conv[i];
    if (!c.dz) continue;  // conv1's chunk's rows past the last: EmitConvWeightGradient's
    const bool whole = c.oh == 2 * c.ph && c.ow == 2 * c.pw;
    zero(c.dz + (whole ? c.pixels : 0), whole ? c.pf - c.pixels : c.pf);
  }
  for (size_t l = 0; l < a.fc.size(); ++l) {
    const ParamRows& r = a.param[2 + l];
    for (int64_t k = 0; k < r.kb; ++k) zero(a.fc[l].x + k * a.bp + a.b, a.bp - a.b);
    for (int64_t j = 0; j < r.mb; ++j) zero(a.fc[l].dz + j * a.bp + a.b, a.bp - a.b);
    if (r.ins % n == 0) EmitReadHost(e.P(), n, a.h_bias, a.fc[l].x + (r.kb - 1) * a.bp, a.bp);
  }
  for (const ParamRows& r : a.param) zero(r.gt, r.Values(n));
  zero(a.flipped, a.tmp - a.flipped);
}

// The step on batch buffer `a`'s (ForParity); with `prefetch` it first reads the next
// batch into the other buffer, which runs behind the step (the infeed). Then the forward
// pass (each layer's bfloat16 tiles from its float32 weights first), the loss, the backward
// pass, the update, the results out. Its instructions' passes into *passes.
isa::Program StepProgram(const Layout& a, const Optimizer& opt, bool prefetch,
                         std::vector<int32_t>* pass_of, PassLog* passes) {
  ConvEmitter e(a);
  shell::StartStep(e, a, prefetch);
  EmitConvForward(e, a, 0);
  EmitConvForward(e, a, 1);
  EmitFlatten(e, a);
  EmitDenseForward(e, a);
  EmitLossRows(e, a);
  EmitDenseBackward(e, a);
  EmitConvBackward(e, a, 1);
  EmitConvWeightGradient(e, a, 0);
  return shell::FinishStep(e, a, opt, pass_of, passes);
}

void CheckFits(const nn::Model& model, const Layout& a, const Optimizer& opt,
               const config::TpuConfig& cfg) {
  const int n = cfg.array_dim;
  for (const ConvRows& c : a.conv) {
    if (4 * c.cout > n || c.cin > n) {
      throw UsageError(fmt::format(
          "model '{}' on config '{}': a pooling of {} channels needs a tile of 4 x {} rows, "
          "more than the array's N = {}; use a wider array (--set array_dim=...)",
          model.name, cfg.name, c.cout, c.cout, n));
    }
  }
  if (a.conv[0].oh % 2 || a.conv[0].ow % 2) {
    throw UsageError(
        fmt::format("model '{}': conv1's output of {} x {} pixels; the step takes "
                    "an even one (its pooling takes every row and column)",
                    model.name, a.conv[0].oh, a.conv[0].ow));
  }
  for (int i = 0; i < 2; ++i)
    if (a.param[static_cast<size_t>(i)].ins % n == 0) {
      throw UsageError(fmt::format(
          "model '{}' on config '{}': conv{}'s receptive field of {} values fills whole tiles of "
          "N = {}, leaving its bias lane a tile of its own, which the step does not form; use "
          "another array size",
          model.name, cfg.name, i + 1, a.param[static_cast<size_t>(i)].ins, n));
    }
  if (a.param.back().outs > n) {
    throw UsageError(fmt::format("model '{}': {} classes, more than the array's N = {}", model.name,
                                 a.param.back().outs, n));
  }
  for (int i = 0; i < 2; ++i) {
    // All of them: the weight gradients' rows (acc_g, acc_t) hold nothing then.
    const int64_t rows = ForwardAccRows(a.conv[i], a.param[static_cast<size_t>(i)].kb);
    if (rows > cfg.acc_depth_rows) {
      throw UsageError(
          fmt::format("config '{}': conv{}'s forward pass takes {} accumulator rows; it has "
                      "acc_depth_rows = {}: use a config with more",
                      cfg.name, i + 1, rows, cfg.acc_depth_rows));
    }
  }
  if (a.acc_rows < n) {
    throw UsageError(
        fmt::format("config '{}': acc_depth_rows = {} is too few for the CNN's "
                    "step (it sets aside {} rows for its transposes and sums)",
                    cfg.name, cfg.acc_depth_rows, cfg.acc_depth_rows - a.acc_rows));
  }
  if (a.end > cfg.ub_depth_rows) {
    int fits = 0;
    for (int b = a.b - 1; b >= 1 && fits == 0; --b)
      if (MakeLayout(model, b, opt, cfg, a.cores).end <= cfg.ub_depth_rows) fits = b * a.cores;
    throw UsageError(
        fmt::format("the CNN's step at batch {} needs {} unified-buffer rows; config '{}' has "
                    "ub_depth_rows = {}: {}or --set ub_depth_rows={}",
                    a.b * a.cores, a.end, cfg.name, cfg.ub_depth_rows,
                    fits ? fmt::format("a --batch of at most {}, ", fits) : "", a.end));
  }
}

// The CNN's constants of its own: the poolings' tiles, the dense layers' rows of a bias
// lane's 1.
void PutConstants(const Layout& a, std::vector<uint16_t>* img) {
  const int n = a.n;
  auto at = [n](int64_t row, int64_t lane) { return static_cast<size_t>(row * n + lane); };
  for (int q = 0; q < 2; ++q)
    for (int k = 0; k < 4; ++k)
      for (int ch = 0; ch < a.conv[q].cout; ++ch)
        (*img)[at(a.quarters[q] + k * a.conv[q].cout + ch, ch)] = Bf16Of(0.25f);
  for (int ky = 1; ky < 3; ++ky)  // taps (1, 1), (1, 2), (2, 1), (2, 2) of a 3 x 3 window
    for (int kx = 1; kx < 3; ++kx)
      for (int ch = 0; ch < a.conv[1].cout; ++ch)
        (*img)[at(a.quarters3 + (ky * 3 + kx) * a.conv[1].cout + ch, ch)] = Bf16Of(0.25f);
  for (size_t l = 1; l < a.fc.size(); ++l)
    (*img)[at(a.fc[l].ones, a.param[1 + l].outs % n)] = Bf16Of(1.0f);
}

}  // namespace

CompiledStep Compile(const nn::Model& model, int batch, const Optimizer& opt,
                     const config::TpuConfig& config, int cores) {
  CheckTrainingChip(config);
  CheckConvNetShape(model);
  if (batch < 1) throw UsageError("--batch must be at least 1");
  CheckTrainingCores(config, cores, batch);
  const Layout a = MakeLayout(model, batch / cores, opt, config, cores);
  CheckFits(model, a, opt, config);
  return shell::Programs<Layout>(
      a, opt, "cnn-train", ForParity, EmitStart,
      [&a](std::vector<uint16_t>* img) { PutConstants(a, img); },
      [&opt](const Layout& ap, bool prefetch, std::vector<std::vector<int32_t>>* pass_of,
             PassLog* passes) {
        pass_of->resize(1);
        return std::vector<isa::Program>{StepProgram(ap, opt, prefetch, &pass_of->front(), passes)};
      });
}

}  // namespace conv_step

CompiledStep CompileConvStep(const nn::Model& model, int batch, const Optimizer& opt,
                             const config::TpuConfig& config, int cores) {
  return conv_step::Compile(model, batch, opt, config, cores);
}

}  // namespace tpu::train
