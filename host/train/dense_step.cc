// See dense_step.h. The layout follows examples/training/make_mlp_step.py's, for any widths:
// every tensor in blocks of N lanes, a float32 row in two buffer rows (the lanes' high
// halves, then their low halves), each activation block BP rows (the batch B rounded up to
// whole N-row chunks) of which the batch's are the first (the rest stay zero: a transposed
// load reads N rows).
#include "host/train/dense_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>

#include "arith/bf16.h"
#include "host/common/errors.h"
#include "host/isa/program_builder.h"
#include "host/train/dense_reference.h"
#include "host/train/step_emit.h"
#include "host/train/step_image.h"
#include "host/train/step_shell.h"

namespace tpu::train {
namespace {

using hw::VectorOp;
using isa::Acc;
using isa::ProgramBuilder;

int64_t Tiles(int64_t x, int n) { return (x + n - 1) / n; }

struct LayerRows {
  int64_t k = 0, m = 0;  // K tiles (the inputs and the bias lane), M tiles (the outputs)
  int64_t w = 0;         // the float32 weights: block j (M) has k N rows, two buffer rows each
  std::vector<int64_t> slot;
  int64_t wb = 0, g = 0;  // the bfloat16 weights and gradient, in the same order
  int64_t x = 0;          // the input's k blocks, x_stride rows apart (its first B rows each)
  int64_t x_stride = 0;   // BP; the first layer's: B (the batch contiguous, read at once)
  int64_t xt = 0;         // its transpose: block k's chunk c (N images) at N (k C + c) rows
  int64_t dz = 0;         // dL/d(output): m blocks of BP rows
  int64_t mask = 0;       // hidden layers: where the ReLU gave 0, m blocks of BP rows
  int64_t Values(int n) const { return k * m * n; }
};

// Unified-buffer rows (bf16 rows of N lanes) and host rows (of 2N bytes).
struct Layout {
  int n = 0, b = 0;  // b: a core's images (its share of the batch)
  int cores = 1;     // the cores the batch is split across (each runs the step on its share)
  int core = 0;      // the core of this layout's host areas (ForCore)
  int64_t bp = 0;    // B rounded up to whole chunks of N: an activation block's rows
  int64_t Chunks() const { return bp / n; }
  int64_t id = 0, pad = 0, zero = 0, ones = 0, consts = 0, inv_batch = 0, scalars = 0;
  int64_t state_begin = 0, state_end = 0;
  std::vector<LayerRows> layer;
  int64_t y = 0, logits = 0, sm = 0, mx = 0, sum = 0, recip = 0, pick = 0, loss = 0, mean = 0;
  int64_t tmp = 0, tmp2 = 0, end = 0;
  int64_t other = 0;  // with two cores: the other core's gradient of a layer
  int64_t h_zero = 0, h_bias = 0, h_params = 0, h_batch = 0, h_out = 0, h_grads = 0;
  // The other batch buffer (the infeed's: a step reads the next batch into it while it runs
  // on this one): its input blocks, labels, scalars and host area. ForParity swaps them in.
  int64_t x_next = 0, y_next = 0, scalars_next = 0, h_batch_next = 0;
  int64_t GradRows() const {
    int64_t rows = 0;
    for (const LayerRows& r : layer) rows += r.Values(n);
    return rows;
  }
  // A batch as the host sends it and a batch buffer holds it: Adam's 2 float32 scalars of
  // the step (4 rows), the images' k blocks of B rows, the labels (B rows one-hot); N zero
  // rows follow it in the buffer, so that a transposed load of the last block (N rows)
  // reads finite values past the batch (they meet the zero rows of dz: exact, see
  // EmitWeightGradient).
  int64_t BatchRows() const { return 4 + (layer[0].k + 1) * b; }
  int64_t OutRows() const { return 3 * int64_t{b} + 2; }
};

// Host memory: the image of rows [0, state_end), N zero rows, a bias block, parameter set
// 0 (5 rows), the two batch areas, the step's results (those of each core in core order),
// the gradients.
void PlaceInHost(Layout* a) {
  const int n = a->n;
  int64_t h = a->state_end;
  a->h_zero = h;
  a->h_bias = h += n;
  a->h_params = h += a->b;
  a->h_batch = h += 5;
  a->h_batch_next = h += a->cores * a->BatchRows();
  a->h_out = h += a->cores * a->BatchRows();
  a->h_grads = h += a->cores * a->OutRows();
}

Layout MakeLayout(const DenseNet& net, int batch, const Optimizer& opt, int n, int cores = 1) {
  Layout a;
  a.n = n;
  a.b = batch;
  a.cores = cores;
  a.bp = Tiles(batch, n) * n;
  int64_t at = 0;
  const std::function<int64_t(int64_t)> take = shell::RowsFrom(&at);
  a.id = take(n);
  a.pad = take(2);
  a.zero = take(1);
  a.ones = take(net.Layers());  // row l: a 1 in lane In(l) % N (the bias lane of layer l)
  a.inv_batch = take(2);
  a.consts = take(2 * static_cast<int64_t>(UpdateConstants(opt).size()));
  a.state_begin = at;
  a.layer.resize(static_cast<size_t>(net.Layers()));
  for (int l = 0; l < net.Layers(); ++l) {
    LayerRows& r = a.layer[static_cast<size_t>(l)];
    r.k = Tiles(net.In(l) + 1, n);
    r.m = Tiles(net.Out(l), n);
    r.w = take(2 * r.Values(n));
    for (int s = 0; s < opt.Slots(); ++s) r.slot.push_back(take(2 * r.Values(n)));
  }
  a.state_end = at;
  int64_t values = 0;
  for (LayerRows& r : a.layer) {
    r.wb = take(r.Values(n));
    r.g = take(r.Values(n));
    r.x_stride = a.bp;
    r.x = &r == &a.layer[0] ? 0 : take(r.k * a.bp);  // the first layer's: the batch buffer's
    r.xt = take(r.k * a.bp);
    r.dz = take(r.m * a.bp);
    r.mask = take(r.m * a.bp);
    values = std::max(values, r.Values(n));
  }
  for (int buffer = 0; buffer < 2; ++buffer) {  // the infeed's two batch buffers
    const int64_t base = take(a.BatchRows() + n);
    const int64_t k0 = a.layer[0].k;
    (buffer ? a.scalars_next : a.scalars) = base;
    (buffer ? a.x_next : a.layer[0].x) = base + 4;
    (buffer ? a.y_next : a.y) = base + 4 + k0 * batch;
  }
  a.layer[0].x_stride = batch;
  for (int64_t* p : {&a.sm, &a.mx, &a.sum, &a.recip, &a.pick}) *p = take(2 * batch);
  a.loss = take(2 * batch);  // the losses, their mean and the logits: one write_host
  a.mean = take(2);
  a.logits = take(batch);
  a.tmp = take(2 * values);
  a.tmp2 = take(2 * values);
  if (cores > 1) a.other = take(values);
  a.end = at;
  PlaceInHost(&a);
  return a;
}

// The layout whose batch buffer is buffer `parity` (0: MakeLayout's own, 1: the other).
Layout ForParity(Layout a, int parity) {
  if (parity == 0) return a;
  std::swap(a.layer[0].x, a.x_next);
  std::swap(a.y, a.y_next);
  std::swap(a.scalars, a.scalars_next);
  std::swap(a.h_batch, a.h_batch_next);
  return a;
}

// A program for one core, with the addresses of a Layout.
class Emitter {
 public:
  Emitter(const Layout& a, const config::TpuConfig& c) : a_(a), c_(c), p_() {
    p_.SetFormat(/*bf16=*/true);
  }
  ProgramBuilder& P() { return p_; }
  uint64_t Host(int64_t row) const { return static_cast<uint64_t>(row) * 2 * a_.n; }

  void Vec(VectorOp op, int64_t a, int64_t b, int64_t out, int64_t rows, int flags) {
    EmitVector(p_, op, a, b, out, rows, flags);
  }
  void ReadHost(int64_t host_row, int64_t ub, int64_t rows) {
    EmitReadHost(p_, a_.n, host_row, ub, rows);
  }
  void WriteHost(int64_t ub, int64_t host_row, int64_t rows) {
    EmitWriteHost(p_, a_.n, ub, host_row, rows);
  }
  // The next region of BP accumulator rows, in turn, for a new product (of the batch's rows;
  // a transpose's or a weight gradient's N rows, or a group of those). The activates of the
  // products before it are deferred (Later): the oldest is emitted once three products have come
  // after it, when its rows have drained (2N cycles after its last row entered the array,
  // which two more products of N rows take to stream), so that it neither waits at the head
  // of the queue nor lets its slot come round again.
  uint64_t NextAcc() {
    const int64_t slots = std::max<int64_t>(1, c_.acc_depth_rows / a_.bp);
    while (!pending_.empty() &&
           static_cast<int64_t>(pending_.size()) >= std::min<int64_t>(kLag, slots - 1))
      EmitOldest();
    return static_cast<uint64_t>((next_acc_++ % slots) * a_.bp);
  }
  // Activates accumulator rows [acc, acc + rows) into ub (ReLU with `relu`), then runs
  // `after` (vector instructions on the result), a few products later (NextAcc) or at a
  // Flush: an activate waits 2N cycles for its product to drain, and waiting at the head of
  // the queue it would hold back the next products' loads and matmuls (docs/timing.md,
  // "Issue").
  // Returns the activate's number, for Await.
  int64_t Later(uint64_t acc, int64_t ub, int64_t rows, bool relu,
                std::function<void()> after = nullptr) {
    pending_.push_back({acc, ub, rows, relu, std::move(after)});
    return later_++;
  }
  // Emits the deferred activates up to Later's number `id`: before what reads its rows.
  void Await(int64_t id) {
    while (emitted_ <= id) EmitOldest();
  }
  // Emits the deferred activates, in order: before anything reads what they write.
  void Flush() {
    while (!pending_.empty()) EmitOldest();
  }
  // out = in (N rows, N lanes) transposed through the array: a transposed load of N rows
  // times the identity; the result once its activate (the number returned) is out (Await).
  int64_t Transpose(int64_t in, int64_t out) {
    p_.LoadWeights(static_cast<uint64_t>(in), 1, /*transpose=*/true);
    const uint64_t acc = NextAcc();
    p_.Matmul(static_cast<uint64_t>(a_.id), acc, static_cast<uint64_t>(a_.n), true,
              Acc::kOverwrite);
    return Later(acc, out, a_.n, false);
  }
  // The instructions from here on belong to pass `name`, which does `macs` useful
  // multiply-accumulates (what is deferred goes first). A pass named before (Name) keeps
  // its place among the names.
  void Pass(const std::string& name, int64_t macs = 0) {
    Flush();
    passes_.Start(p_.program().words.size(), name, macs);
  }
  // Pass `name`'s index, given it the next one (with its useful MACs) where it has none yet.
  int Name(const std::string& name, int64_t macs = 0) { return passes_.Name(name, macs); }
  // Queues a vector instruction (`emit` emits it) of pass `pass`, which reads the rows of
  // Later's activate `after`: Fill emits it between later products, once kFillLag more
  // activates have gone after that one (its rows are in by then, so that it does not wait
  // at the head of the queue), or Drain does. Queued instructions keep their order.
  void Queue(int pass, int64_t after, std::function<void()> emit) {
    fill_.push_back({pass, after, std::move(emit)});
  }
  // Emits up to `n` queued instructions, in order, while the next is ready.
  void Fill(int n) {
    for (; n > 0 && !fill_.empty() && fill_.front().after + kFillLag < emitted_; --n) EmitFiller();
  }
  // Emits every queued instruction, each after the activate it reads.
  void Drain() {
    while (!fill_.empty()) {
      Await(fill_.front().after);
      EmitFiller();
    }
  }
  isa::Program Take() {
    Drain();
    Flush();
    p_.Halt();
    return p_.Take();
  }
  // Each instruction's pass (the first's for set_format, the last's for halt), after Take:
  // its run's, or the queued instruction's own.
  std::vector<int32_t> PassOf(size_t instructions) const { return passes_.PassOf(instructions); }
  const std::vector<std::string>& PassNames() const { return passes_.Names(); }
  const std::vector<int64_t>& PassMacs() const { return passes_.Macs(); }

 private:
  const Layout& a_;
  const config::TpuConfig& c_;
  static constexpr int64_t kLag = 3, kFillLag = 1;
  void EmitFiller() {
    Filler f = std::move(fill_.front());
    fill_.pop_front();
    const size_t start = p_.program().words.size();
    f.emit();
    passes_.Fill(start, f.pass, p_.program().words.size());
  }
  void EmitOldest() {
    const Pending q = std::move(pending_.front());
    pending_.erase(pending_.begin());
    ++emitted_;
    p_.Activate(q.acc, static_cast<uint64_t>(q.ub), static_cast<uint64_t>(q.rows), 0, q.relu,
                isa::Pool::kNone);
    if (q.after) q.after();
  }

  ProgramBuilder p_;
  int64_t next_acc_ = 0;
  int64_t later_ = 0, emitted_ = 0;  // activates deferred, and emitted, so far
  struct Pending {
    uint64_t acc;
    int64_t ub, rows;
    bool relu;
    std::function<void()> after;
  };
  std::vector<Pending> pending_;
  struct Filler {
    int pass;
    int64_t after;
    std::function<void()> emit;
  };
  std::deque<Filler> fill_;
  PassLog passes_;
};

// The queued vector instructions (an update's) that go after each product of the backward
// pass, where ready (Emitter::Fill): an update's instruction over two blocks takes about a
// quarter of a product's N rows on the chips here.
constexpr int kFillPerProduct = 4;

// z = X W of layer l, each output block's K tiles through the FIFO in loads it holds.
void EmitForward(Emitter& e, const Layout& a, const DenseNet& net, int l, int fifo) {
  const LayerRows& r = a.layer[static_cast<size_t>(l)];
  const bool last = l + 1 == net.Layers();
  for (int64_t j = 0; j < r.m; ++j) {
    const uint64_t acc = e.NextAcc();
    for (int64_t k0 = 0; k0 < r.k; k0 += fifo) {
      const int64_t tiles = std::min<int64_t>(fifo, r.k - k0);
      e.P().LoadWeights(static_cast<uint64_t>(r.wb + (j * r.k + k0) * a.n),
                        static_cast<uint64_t>(tiles), false);
      for (int64_t k = k0; k < k0 + tiles; ++k)
        e.P().Matmul(static_cast<uint64_t>(r.x + k * r.x_stride), acc, static_cast<uint64_t>(a.b),
                     true, isa::AddIf(k > 0));
    }
    if (last) {
      e.Later(acc, a.logits, a.b, false);
      continue;
    }
    const int64_t out = a.layer[static_cast<size_t>(l) + 1].x + j * a.bp;
    e.Later(acc, out, a.b, true, [&e, &a, &r, out, j] {
      e.Vec(VectorOp::kEqual, out, a.zero, r.mask + j * a.bp, a.b, kBcast);
    });
  }
  e.Flush();
  if (last) return;
  // The next layer's constant 1 (its bias lane), after the mask was taken; a bias lane that
  // opens a block of its own is that block's, set by init.
  const LayerRows& next = a.layer[static_cast<size_t>(l) + 1];
  if (net.Out(l) % a.n != 0) {
    const int64_t blk = next.x + (net.Out(l) / a.n) * a.bp;
    e.Vec(VectorOp::kAdd, blk, a.ones + l + 1, blk, a.b, kBcast);
  }
}

// The loss and dL/dlogits (into the last layer's dz).
void EmitLoss(Emitter& e, const Layout& a, const LayerRows& last) {
  EmitSoftmaxLoss(e.P(), LossRowsOf(a, last.dz), a.b);
}

// dW = X^T dz of layer l, the batch the sum's index in C chunks of N images: each chunk of
// X's blocks transposed, and each dz chunk stationary while the transposed chunks' rows
// stream, the chunks added in the accumulators (chunk 0 first, as the reference's tiles of
// K). A group of blocks at a time (with one chunk 256 lanes of X: two blocks on a 128 x 128
// array, eight on 32 x 32, where a block's products are short; with several, two; measured
// in docs/training.md): the array takes turns between transposes (each a product of its
// own) and the dz chunks, so a group's products follow the next group's transposes, whose
// rows drain into their accumulators (2N cycles) while the group's products stream; their
// activates, emitted just before the products that read them, do not wait at the head of
// the queue. A dz chunk is loaded once a group.
// A chunk's transposed load reads N rows from its first: past the B images of the first
// layer's contiguous blocks those are the next block's (or the labels, then zeros); past a
// hidden layer's, its block's zero rows: finite values that land in lanes of X^T's rows
// that meet dz's zero rows B..BP-1 in the array. Each such product is a zero, and a zero
// added to a column sum that started at +0 changes nothing (a sum of finite values is never
// -0 there), so dW is exactly the sum over the batch.
void EmitWeightGradient(Emitter& e, const Layout& a, const LayerRows& r,
                        const std::function<void(int64_t v0, int64_t rows, int64_t after)>& done) {
  const int64_t chunks = a.Chunks();
  // With several chunks a group's products share one region of BP = C N accumulator rows,
  // N rows a block, so at most C blocks; two, measured (docs/training.md).
  const int64_t group = chunks > 1 ? 2 : std::max<int64_t>(2, 256 / a.n);
  std::vector<int64_t> ready(static_cast<size_t>(r.k));
  auto xt = [&](int64_t k, int64_t c) { return r.xt + (k * chunks + c) * a.n; };
  auto transposes = [&](int64_t g) {  // group g's
    for (int64_t k = g * group; k < std::min(r.k, (g + 1) * group); ++k)
      for (int64_t c = 0; c < chunks; ++c) {
        ready[static_cast<size_t>(k)] = e.Transpose(r.x + k * r.x_stride + c * a.n, xt(k, c));
        e.Fill(kFillPerProduct);
      }
  };
  const int64_t groups = Tiles(r.k, static_cast<int>(group));
  transposes(0);
  for (int64_t g = 0; g < groups; ++g) {
    if (g + 1 < groups) transposes(g + 1);
    const int64_t k0 = g * group, k1 = std::min(r.k, k0 + group);
    for (int64_t j = 0; j < r.m; ++j) {
      // Each product's N accumulator rows: a region of its own, or with several chunks N rows
      // each of one region (BP >= 2N rows), which every chunk adds into.
      const uint64_t shared = chunks > 1 ? e.NextAcc() : 0;
      int64_t last = 0;
      for (int64_t c = 0; c < chunks; ++c) {
        e.P().LoadWeights(static_cast<uint64_t>(r.dz + j * a.bp + c * a.n), 1, false);
        if (j == 0 && c == 0) e.Await(ready[static_cast<size_t>(k1 - 1)]);  // X^T is in
        for (int64_t k = k0; k < k1; ++k) {
          const uint64_t acc =
              chunks > 1 ? shared + static_cast<uint64_t>((k - k0) * a.n) : e.NextAcc();
          e.P().Matmul(static_cast<uint64_t>(xt(k, c)), acc, static_cast<uint64_t>(a.n), k == k0,
                       isa::AddIf(c > 0));
          if (c + 1 == chunks) last = e.Later(acc, r.g + (j * r.k + k) * a.n, a.n, false);
          e.Fill(kFillPerProduct);
        }
      }
      done((j * r.k + k0) * a.n, (k1 - k0) * a.n, last);
    }
  }
}

// dX = dz W^T of layer l (l > 0), masked by the ReLU of layer l - 1: its dz.
void EmitInputGradient(Emitter& e, const Layout& a, const LayerRows& r, const LayerRows& prev) {
  for (int64_t k = 0; k < prev.m; ++k) {
    const uint64_t acc = e.NextAcc();
    for (int64_t j = 0; j < r.m; ++j) {
      e.P().LoadWeights(static_cast<uint64_t>(r.wb + (j * r.k + k) * a.n), 1, true);
      e.P().Matmul(static_cast<uint64_t>(r.dz + j * a.bp), acc, static_cast<uint64_t>(a.b), true,
                   isa::AddIf(j > 0));
      e.Fill(kFillPerProduct);
    }
    const int64_t dz = prev.dz + k * a.bp;
    e.Later(acc, dz, a.b, false, [&e, &a, &prev, dz, k] {
      e.Vec(VectorOp::kSelect, prev.mask + k * a.bp, a.zero, dz, a.b, kBcast);
    });
  }
}

// Queues the update of layer r's value rows [v0, v0 + rows) as pass `pass`, to follow
// activate `after` (the last block of their gradient): SGD's 4 vector instructions or
// Adam's 15, which go between the products that follow (Emitter::Queue). They share the
// scratch rows tmp and tmp2: the vector unit runs its instructions in order.
void QueueUpdate(Emitter& e, const Layout& a, const Optimizer& opt, const LayerRows& r, int64_t v0,
                 int64_t rows, int pass, int64_t after) {
  const UpdateRows u = UpdateRowsOf(a, r, opt, v0);
  EmitUpdate(opt, u,
             [&e, rows, pass, after](VectorOp op, int64_t x, int64_t y, int64_t out, int flags) {
               e.Queue(pass, after,
                       [&e, op, x, y, out, rows, flags] { e.Vec(op, x, y, out, rows, flags); });
             });
}

// A step split across two cores, once every weight gradient is in: each layer's summed with
// the other core's through HBM (EmitGradientSum; a layer's two slots after the layers'
// before it), then the results written back, then the updates, which run on the vector unit
// while the host DMA writes the results (the sums go through the host DMA too, after the
// next batch's read: one instruction at a time).
void EmitSummedUpdates(Emitter& e, const Layout& a, const DenseNet& net, const Optimizer& opt) {
  uint64_t hbm = 0;
  e.Pass("gradient sum");
  for (const LayerRows& r : a.layer) {
    EmitGradientSum(e.P(), a.n, a.core, r.g, a.other, r.Values(a.n), hbm);
    hbm += static_cast<uint64_t>(2 * r.Values(a.n)) * 2 * a.n;
  }
  e.Pass("results out");
  e.WriteHost(a.loss, a.h_out, a.OutRows());
  for (int l = 0; l < net.Layers(); ++l) {
    const LayerRows& r = a.layer[static_cast<size_t>(l)];
    e.Pass(fmt::format("layer {} update", l + 1));
    EmitUpdate(opt, UpdateRowsOf(a, r, opt, 0),
               [&e, &a, &r](VectorOp op, int64_t x, int64_t y, int64_t out, int flags) {
                 e.Vec(op, x, y, out, r.Values(a.n), flags);
               });
  }
}

// Reads the batch in host area `host` into the buffers at x, y and scalars.
// One read_host: a second would wait at issue for the host DMA, holding back the rest.
void ReadBatch(Emitter& e, const Layout& a, int64_t host, int64_t scalars) {
  e.ReadHost(host, scalars, a.BatchRows());
}

// The step program on batch buffer `a`'s (ForParity); with `prefetch`, it reads the next
// batch into the other buffer first, behind the whole step (the infeed). The results go
// back after the last products: the host DMA takes one instruction at a time, and one that
// waits for it holds back every instruction after it, so its instructions are one read at
// the start, when it is idle, and the writes at the end, when the read is done. Its
// instructions' passes into *pass_of, their names into *names.
isa::Program StepProgram(const Layout& a, const DenseNet& net, const Optimizer& opt,
                         const config::TpuConfig& c, bool prefetch, std::vector<int32_t>* pass_of,
                         std::vector<std::string>* names, std::vector<int64_t>* macs) {
  Emitter e(a, c);
  const int fifo = std::max(1, c.weight_fifo_tiles);
  // A layer's useful MACs a step: its weights and bias (the lane of ones) times the batch
  // (forward; the weight gradient), its weights times the batch (the input gradient).
  auto useful = [&](int l, bool bias) {
    return int64_t{a.b} * (net.In(l) + (bias ? 1 : 0)) * net.Out(l);
  };
  auto name = [](int l, const char* what) { return fmt::format("layer {} {}", l + 1, what); };
  // The passes' names in their order: the step's, but for the next batch's read, which
  // starts it (the host DMA is idle at a step's start, and its read runs behind the whole
  // step) and is named after the loss.
  for (int l = 0; l < net.Layers(); ++l) e.Name(name(l, "forward"), useful(l, true));
  e.Name("loss");
  e.Pass("batch in");
  if (prefetch) ReadBatch(e, a, a.h_batch_next, a.scalars_next);
  for (int l = 0; l < net.Layers(); ++l) {
    const LayerRows& r = a.layer[static_cast<size_t>(l)];
    e.Pass(name(l, "forward"));
    e.Vec(VectorOp::kCopy, r.w, 0, r.wb, r.Values(a.n), kA32);
    EmitForward(e, a, net, l, fifo);
  }
  e.Pass("loss");
  EmitLoss(e, a, a.layer.back());
  for (int l = net.Layers() - 1; l >= 0; --l) {  // the backward passes' names, in their order
    e.Name(name(l, "weight gradient"), useful(l, true));
    if (l > 0) e.Name(name(l, "input gradient"), useful(l, false));
    if (l == 0) e.Name("results out");
    e.Name(name(l, "update"));
  }
  // Each layer's update, a piece for each piece of its gradient, goes between the products
  // that follow that piece (its own weight gradient's, the layers' before it), the rest at
  // the end, behind the results.
  for (int l = net.Layers() - 1; l >= 0; --l) {
    const LayerRows& r = a.layer[static_cast<size_t>(l)];
    const int update = e.Name(name(l, "update"));
    e.Pass(name(l, "weight gradient"));
    EmitWeightGradient(e, a, r, [&](int64_t v0, int64_t rows, int64_t after) {
      if (a.cores == 1) QueueUpdate(e, a, opt, r, v0, rows, update, after);
    });
    if (l > 0) {
      e.Pass(name(l, "input gradient"));
      EmitInputGradient(e, a, r, a.layer[static_cast<size_t>(l) - 1]);
    }
  }
  if (a.cores > 1) {
    EmitSummedUpdates(e, a, net, opt);
  } else {
    e.Pass("results out");  // behind the last products (the prefetch is done by then)
    e.WriteHost(a.loss, a.h_out, a.OutRows());
  }
  isa::Program program = e.Take();
  *pass_of = e.PassOf(program.words.size());
  *names = e.PassNames();
  *macs = e.PassMacs();
  return program;
}

// Reads the batch in buffer `a`'s host area into its buffers (a step without one prefetched).
isa::Program FetchProgram(const Layout& a, const config::TpuConfig& c) {
  Emitter e(a, c);
  ReadBatch(e, a, a.h_batch, a.scalars);
  return e.Take();
}

isa::Program InitProgram(const Layout& a, const DenseNet& net, const config::TpuConfig& c) {
  Emitter e(a, c);
  e.P().ReadParams(e.Host(a.h_params), 0, 1);
  e.ReadHost(0, 0, a.state_end);
  for (size_t l = 0; l < a.layer.size(); ++l) {
    const LayerRows& r = a.layer[l];
    if (a.b < a.bp) {  // the rows past the batch, fewer than N (h_zero's)
      for (int64_t k = 0; k < r.k && l > 0; ++k)
        e.ReadHost(a.h_zero, r.x + k * a.bp + a.b, a.bp - a.b);
      for (int64_t j = 0; j < r.m; ++j) e.ReadHost(a.h_zero, r.dz + j * a.bp + a.b, a.bp - a.b);
    }
    if (l > 0 && net.In(static_cast<int>(l)) % a.n == 0)
      e.ReadHost(a.h_bias, r.x + (r.k - 1) * a.bp, a.b);  // a block that is only the bias lane
  }
  for (const int64_t y : {a.y, a.y_next})  // the zero rows after each batch buffer
    e.ReadHost(a.h_zero, y + a.b, a.n);
  return e.Take();
}

isa::Program SaveProgram(const Layout& a, const config::TpuConfig& c) {
  Emitter e(a, c);
  e.WriteHost(a.state_begin, a.state_begin, a.state_end - a.state_begin);
  return e.Take();
}

isa::Program GradsProgram(const Layout& a, const config::TpuConfig& c) {
  Emitter e(a, c);
  int64_t at = a.h_grads;
  for (const LayerRows& r : a.layer) {
    e.WriteHost(r.g, at, r.Values(a.n));
    at += r.Values(a.n);
  }
  return e.Take();
}

// The host image of buffer rows [0, state_begin) and what follows the state in host memory
// up to the batch: the constants, N zero rows, the bias block, parameter set 0.
std::vector<uint8_t> ConstantImage(const Layout& a, const DenseNet& net, const Optimizer& opt) {
  const int n = a.n;
  std::vector<uint16_t> img(static_cast<size_t>(a.state_begin * n), 0);
  for (int i = 0; i < n; ++i) img[static_cast<size_t>((a.id + i) * n + i)] = Bf16Of(1.0f);
  for (int j = 0; j < n; ++j)
    PutFp32(&img, a.pad, n, j, j < net.Classes() ? 0.0f : -std::numeric_limits<float>::infinity());
  for (int l = 0; l < net.Layers(); ++l)
    img[static_cast<size_t>((a.ones + l) * n + net.In(l) % n)] = Bf16Of(1.0f);
  const std::vector<float> consts = UpdateConstants(opt);
  for (int j = 0; j < n; ++j) {
    PutFp32(&img, a.inv_batch, n, j, InverseBatch(a.b * a.cores));  // the whole batch's
    for (size_t i = 0; i < consts.size(); ++i)
      PutFp32(&img, a.consts + 2 * static_cast<int64_t>(i), n, j, consts[i]);
  }
  std::vector<uint16_t> tail(static_cast<size_t>((a.h_batch - a.h_zero) * n), 0);
  for (int i = 0; i < a.b; ++i) tail[static_cast<size_t>((n + i) * n)] = Bf16Of(1.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (int j = 0; j < n; ++j) {  // set 0: bias +0, upper bound +infinity
    uint32_t u;
    std::memcpy(&u, &inf, 4);
    const size_t at =
        static_cast<size_t>((a.h_params - a.h_zero) * n) + 2 * static_cast<size_t>(n + j);
    tail[at] = static_cast<uint16_t>(u);
    tail[at + 1] = static_cast<uint16_t>(u >> 16);
  }
  std::vector<uint8_t> out = BytesOfHalves(img);
  std::vector<uint8_t> t = BytesOfHalves(tail);
  out.resize(static_cast<size_t>(a.state_end * 2 * n), 0);
  out.insert(out.end(), t.begin(), t.end());
  return out;
}

// The largest batch whose step fits the unified buffer (its rows grow with the batch), 0
// where none does.
int LargestBatch(const DenseNet& net, const Optimizer& opt, const config::TpuConfig& config,
                 int cores) {
  auto fits = [&](int b) {
    return MakeLayout(net, b, opt, config.array_dim, cores).end <= config.ub_depth_rows;
  };
  if (!fits(1)) return 0;
  int lo = 1, hi = std::max(1, config.acc_depth_rows);  // fits(lo); the accumulators bound it
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo * cores;
}

}  // namespace

DensePrograms CompileDense(const DenseNet& net, int batch, const Optimizer& opt,
                           const config::TpuConfig& config, int cores) {
  CheckTrainingChip(config);
  const int n = config.array_dim;
  CheckDense(net, batch, n);
  CheckTrainingCores(config, cores, batch);
  const Layout a = MakeLayout(net, batch / cores, opt, n, cores);
  if (config.acc_depth_rows < a.bp) {
    throw UsageError(fmt::format(
        "--batch {} on config '{}': a product of a core's batch rows needs {} accumulator rows "
        "(its share rounded up to N = {}); it has acc_depth_rows = {}: a --batch of at most {}",
        batch, config.name, a.bp, n, config.acc_depth_rows, config.acc_depth_rows / n * n * cores));
  }
  if (a.end > config.ub_depth_rows) {
    const int fits = LargestBatch(net, opt, config, cores);
    throw UsageError(fmt::format(
        "the training step needs {} unified-buffer rows for these widths and batch {}; config "
        "'{}' has ub_depth_rows = {}: {}narrower layers, or --set ub_depth_rows={}",
        a.end, batch, config.name, config.ub_depth_rows,
        fits > 0 ? fmt::format("a --batch of at most {}, ", fits) : "", a.end));
  }
  DensePrograms p;
  p.ub_rows = a.end;
  p.cores = cores;
  engine::Region consts = HostRows("constants", 0, a.h_batch, n);
  consts.initial = ConstantImage(a, net, opt);
  p.init.name = "train-init";
  // Every core starts from the same constants and state; core 0's state and gradients are
  // the step's (the cores' are equal).
  p.init.programs.assign(static_cast<size_t>(cores), InitProgram(a, net, config));
  p.init.regions = {consts, HostRows("state", a.state_begin, a.state_end - a.state_begin, n)};
  const std::vector<engine::Region> infeed = {
      HostRows("batch0", a.h_batch, cores * a.BatchRows(), n),
      HostRows("batch1", a.h_batch_next, cores * a.BatchRows(), n),
      HostRows("out", a.h_out, cores * a.OutRows(), n)};
  for (int parity = 0; parity < 2; ++parity) {
    for (int core = 0; core < cores; ++core) {
      const Layout ap = ForCore(ForParity(a, parity), core);
      for (int prefetch = 0; prefetch < 2; ++prefetch) {
        engine::Executable& exe = p.steps[parity][prefetch];
        exe.name = prefetch ? "train-step" : "train-step (no prefetch)";
        // Core 0's passes are the step's (its counters are the rows'); the others' the same.
        std::vector<int32_t> pass_of;
        std::vector<std::string> names;
        std::vector<int64_t> macs;
        exe.programs.push_back(
            StepProgram(ap, net, opt, config, prefetch, &pass_of, &names, &macs));
        exe.regions = infeed;
        if (core > 0) continue;
        (prefetch ? p.pass_of : p.pass_of_last) = std::move(pass_of);
        p.pass_names = std::move(names);
        p.pass_macs = std::move(macs);
      }
      p.fetch[parity].name = "train-fetch";
      p.fetch[parity].programs.push_back(FetchProgram(ap, config));
      p.fetch[parity].regions = infeed;
    }
  }
  p.step = p.steps[0][1];
  p.save.name = "train-save";
  p.save.programs.push_back(SaveProgram(a, config));
  p.save.regions = {HostRows("state", a.state_begin, a.state_end - a.state_begin, n)};
  p.grads.name = "train-grads";
  p.grads.programs.push_back(GradsProgram(a, config));
  p.grads.regions = {HostRows("grads", a.h_grads, a.GradRows(), n)};
  return p;
}

namespace {

std::vector<uint8_t> StateImage(const Layout& a, const DenseNet& net, const DenseState& s) {
  const int n = a.n;
  std::vector<uint16_t> img(static_cast<size_t>((a.state_end - a.state_begin) * n), 0);
  for (int l = 0; l < net.Layers(); ++l) {
    const LayerRows& r = a.layer[static_cast<size_t>(l)];
    auto put = [&](int64_t base, const std::vector<float>& t) {
      for (int row = 0; row <= net.In(l); ++row)
        for (int c = 0; c < net.Out(l); ++c)
          PutFp32(&img, base - a.state_begin + 2 * ((c / n) * r.k * n + row), n, c % n,
                  t[static_cast<size_t>(row) * net.Out(l) + c]);
    };
    put(r.w, s.w[static_cast<size_t>(l)]);
    for (size_t i = 0; i < r.slot.size(); ++i) put(r.slot[i], s.slots[i][static_cast<size_t>(l)]);
  }
  return BytesOfHalves(img);
}

void ReadStateImage(const Layout& a, const DenseNet& net, const std::vector<uint8_t>& bytes,
                    DenseState* s) {
  const std::vector<uint16_t> img = HalvesOfBytes(bytes);
  const int n = a.n;
  for (int l = 0; l < net.Layers(); ++l) {
    const LayerRows& r = a.layer[static_cast<size_t>(l)];
    auto get = [&](int64_t base, std::vector<float>* t) {
      t->assign(static_cast<size_t>(net.Params(l)), 0.0f);
      for (int row = 0; row <= net.In(l); ++row)
        for (int c = 0; c < net.Out(l); ++c)
          (*t)[static_cast<size_t>(row) * net.Out(l) + c] =
              GetFp32(img, base - a.state_begin + 2 * ((c / n) * r.k * n + row), n, c % n);
    };
    get(r.w, &s->w[static_cast<size_t>(l)]);
    for (size_t i = 0; i < r.slot.size(); ++i) get(r.slot[i], &s->slots[i][static_cast<size_t>(l)]);
  }
}

std::vector<uint8_t> BatchImage(const Layout& a, const DenseNet& net, const Optimizer& opt,
                                const Batch& b, int64_t step) {
  const int n = a.n, in = net.In(0);
  const int64_t k0 = a.layer[0].k;
  std::vector<uint16_t> img(static_cast<size_t>(a.BatchRows() * n), 0);
  for (int i = 0; i < a.b; ++i) {
    for (int j = 0; j <= in; ++j) {
      const float v = j < in ? b.x[static_cast<size_t>(i) * in + j] : 1.0f;
      img[static_cast<size_t>((4 + (j / n) * a.b + i) * n + j % n)] = Bf16Of(v);
    }
    const int64_t label_row = 4 + k0 * a.b + i;
    img[static_cast<size_t>(label_row * n + b.labels[static_cast<size_t>(i)])] = Bf16Of(1.0f);
  }
  PutStepScalars(&img, n, opt, step);
  return BytesOfHalves(img);
}

StepOut ReadOut(const Layout& a, const DenseNet& net, const std::vector<uint8_t>& bytes) {
  const std::vector<uint16_t> img = HalvesOfBytes(bytes);
  StepOut o;
  for (int i = 0; i < a.b; ++i) o.loss.push_back(GetFp32(img, 2 * i, a.n, 0));
  o.mean = GetFp32(img, 2 * a.b, a.n, 0);
  for (int i = 0; i < a.b; ++i)
    for (int c = 0; c < net.Classes(); ++c)
      o.logits.push_back(arith::FloatOfBits(
          arith::Fp32OfBf16(img[static_cast<size_t>((2 * a.b + 2 + i) * a.n + c)])));
  return o;
}

}  // namespace

namespace {

// The host side of CompileDense's programs, for a Layout.
class DenseImages : public StepImages {
 public:
  DenseImages(const DenseNet& net, int batch, const Optimizer& opt, int n, int cores)
      : net_(net), opt_(opt), a_(MakeLayout(net, batch / cores, opt, n, cores)) {}
  std::vector<uint8_t> StateBytes(const DenseState& s) const override {
    return StateImage(a_, net_, s);
  }
  DenseState ReadState(const std::vector<uint8_t>& bytes) const override {
    DenseState s;
    s.w.resize(static_cast<size_t>(net_.Layers()));
    s.slots.assign(static_cast<size_t>(opt_.Slots()), s.w);
    ReadStateImage(a_, net_, bytes, &s);
    return s;
  }
  std::vector<uint8_t> BatchBytes(const Batch& b, int64_t step) const override {
    return BatchOfCores(a_.cores, a_.b, b, [&](const Batch& share) {
      return BatchImage(a_, net_, opt_, share, step);
    });
  }
  StepOut ReadOut(const std::vector<uint8_t>& bytes) const override {
    return OutOfCores(a_.cores, bytes, [&](const std::vector<uint8_t>& core) {
      return train::ReadOut(a_, net_, core);
    });
  }
  std::vector<std::vector<float>> ReadGrads(const std::vector<uint8_t>& bytes) const override;

 private:
  DenseNet net_;
  Optimizer opt_;
  Layout a_;
};

std::vector<std::vector<float>> DenseImages::ReadGrads(const std::vector<uint8_t>& bytes) const {
  const std::vector<uint16_t> img = HalvesOfBytes(bytes);
  std::vector<std::vector<float>> g;
  int64_t at = 0;  // the layer's first row in img
  for (int l = 0; l < net_.Layers(); ++l) {
    const LayerRows& r = a_.layer[static_cast<size_t>(l)];
    std::vector<float> t(static_cast<size_t>(net_.Params(l)));
    for (int row = 0; row <= net_.In(l); ++row)
      for (int col = 0; col < net_.Out(l); ++col) {
        const int64_t ub_row = at + (col / a_.n) * r.k * a_.n + row;
        t[static_cast<size_t>(row) * net_.Out(l) + col] = arith::FloatOfBits(
            arith::Fp32OfBf16(img[static_cast<size_t>(ub_row * a_.n + col % a_.n)]));
      }
    g.push_back(std::move(t));
    at += r.Values(a_.n);
  }
  return g;
}

}  // namespace

CompiledStep CompileDenseStep(const DenseNet& net, int batch, const Optimizer& opt,
                              const config::TpuConfig& config, int cores) {
  CompiledStep c;
  c.programs = CompileDense(net, batch, opt, config, cores);
  c.images = std::make_shared<DenseImages>(net, batch, opt, config.array_dim, cores);
  return c;
}

ChipTrainer::ChipTrainer(engine::ChipEngine* engine, const DenseNet& net, int batch,
                         const Optimizer& opt)
    : ChipTrainer(engine, CompileDenseStep(net, batch, opt, engine->Config()), opt) {}

ChipTrainer::ChipTrainer(engine::ChipEngine* engine, CompiledStep step, const Optimizer& opt)
    : engine_(engine),
      opt_(opt),
      programs_(std::move(step.programs)),
      images_(std::move(step.images)),
      attribution_(FreshAttribution()) {}

engine::CycleAttribution ChipTrainer::FreshAttribution() const {
  const config::TpuConfig& c = engine_->Config();
  return engine::CycleAttribution(static_cast<int>(programs_.pass_names.size()), c.array_dim,
                                  /*element_bytes=*/2, c.vector_sublanes);
}

void ChipTrainer::ClearCounters() {
  attribution_ = FreshAttribution();
  steps_ = 0;
}

std::vector<isa::Program> DensePrograms::WholeStep() const {
  std::vector<isa::Program> whole = step.programs;
  for (const engine::Executable& part : parts[0][1])
    for (size_t c = 0; c < whole.size(); ++c)
      whole[c].words.insert(whole[c].words.end(), part.programs[c].words.begin(),
                            part.programs[c].words.end());
  return whole;
}

std::vector<int32_t> DensePrograms::WholePassOf() const {
  std::vector<int32_t> whole = pass_of;
  for (const std::vector<int32_t>& part : parts_pass_of[1])
    whole.insert(whole.end(), part.begin(), part.end());
  return whole;
}

namespace {

// Run `more` (a fetch, a later part) added into `r` (the step's): its cycles and counters.
void AddRun(const engine::ExecResult& more, engine::ExecResult* r) {
  r->cycles += more.cycles;
  r->counters += more.counters;
  for (size_t c = 0; c < r->cores.size() && c < more.cores.size(); ++c)
    r->cores[c].counters += more.cores[c].counters;
}

}  // namespace

engine::ExecResult ChipTrainer::RunObserved(const engine::Executable& exe,
                                            std::vector<int32_t> pass_of) {
  engine_->Load(exe);
  attribution_.SetRowOf(std::move(pass_of));
  engine_->SetObserver(&attribution_);
  engine::ExecResult r;
  try {
    r = RunLoaded(exe);
  } catch (...) {
    engine_->SetObserver(nullptr);
    throw;
  }
  engine_->SetObserver(nullptr);
  attribution_.Check(r.CountersOf(0));   // core 0 runs the step
  if (trace_ && step_ == trace_step_) {  // TraceStep's step: its passes on the layers track
    for (const auto& span : attribution_.Spans())
      trace_->LayerSlice(trace_names_.at(static_cast<size_t>(span.row)), span.start, span.end);
  }
  return r;
}

engine::ExecResult ChipTrainer::RunLoaded(const engine::Executable& exe) {
  engine::ExecResult r = engine_->Run();
  if (!r.ok) {
    throw RuntimeError(fmt::format("the chip stopped in {} (instruction {}): {}", exe.name,
                                   r.error_pc, r.message));
  }
  return r;
}

void ChipTrainer::Start(const DenseState& state) {
  engine_->Load(programs_.init);
  engine_->Write("state", images_->StateBytes(state));
  RunLoaded(programs_.init);
  step_ = state.step;
  prefetched_.reset();
}

StepOut ChipTrainer::Step(const Batch& b, const Batch* next) {
  const std::string area[2] = {"batch0", "batch1"};
  ++step_;
  struct Traced {  // TraceStep's timeline records this step's runs alone
    engine::ChipEngine* e;
    bool on;
    ~Traced() {
      if (on) e->SetTimeline(nullptr);
    }
  } traced{engine_, trace_ && step_ == trace_step_};
  if (traced.on) engine_->SetTimeline(trace_);
  engine::ExecResult fetch;
  if (prefetched_ && !(prefetched_->x == b.x && prefetched_->labels == b.labels))
    throw std::logic_error("ChipTrainer::Step: not the batch given as the next one");
  if (!prefetched_) {  // the batch is not in the chip yet: its own read first
    engine_->Load(programs_.fetch[parity_]);
    engine_->Write(area[parity_], images_->BatchBytes(b, step_));
    fetch = RunObserved(
        programs_.fetch[parity_],
        std::vector<int32_t>(programs_.fetch[parity_].programs[0].words.size(), BatchInPass()));
  }
  const engine::Executable& exe = programs_.steps[parity_][next ? 1 : 0];
  engine_->Load(exe);
  if (next) engine_->Write(area[1 - parity_], images_->BatchBytes(*next, step_ + 1));
  last_ = RunObserved(exe, next ? programs_.pass_of : programs_.pass_of_last);
  const std::vector<engine::Executable>& parts = programs_.parts[parity_][next ? 1 : 0];
  for (size_t k = 0; k < parts.size(); ++k)
    AddRun(RunObserved(parts[k], programs_.parts_pass_of[next ? 1 : 0][k]), &last_);
  StepOut out;
  if (engine_->ComputesValues()) out = images_->ReadOut(engine_->Read("out"));
  AddRun(fetch, &last_);  // the step's, with its batch's read where it had one
  ++steps_;
  parity_ = 1 - parity_;
  prefetched_.reset();
  if (next) prefetched_ = *next;
  return out;
}

int32_t ChipTrainer::BatchInPass() const {
  const auto& names = programs_.pass_names;
  return static_cast<int32_t>(std::find(names.begin(), names.end(), "batch in") - names.begin());
}

DenseState ChipTrainer::State() {
  engine_->Load(programs_.save);
  RunLoaded(programs_.save);
  DenseState s = images_->ReadState(engine_->Read("state"));
  s.step = step_;
  return s;
}

std::vector<std::vector<float>> ChipTrainer::Gradients() {
  engine_->Load(programs_.grads);
  RunLoaded(programs_.grads);
  return images_->ReadGrads(engine_->Read("grads"));
}

}  // namespace tpu::train
