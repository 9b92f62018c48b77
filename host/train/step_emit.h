// Instruction sequences that the compiled training steps share (dense_step.h, conv_step.h):
// vector instructions and host transfers of any length, and the softmax cross-entropy loss
// with its gradient on the vector unit, whose arithmetic is chip::SoftmaxRow's
// (step_arith.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "host/config/tpu_config.h"
#include "host/isa/program_builder.h"
#include "host/train/dense_net.h"

namespace tpu::train {

// Throws UsageError for an int8 chip: training needs a bf16 chip's float32 sums and vector
// unit.
void CheckTrainingChip(const config::TpuConfig& config);

// Vector flags and `rows` rows of a vector operation (isa/program_builder.h).
using isa::EmitVector;
using isa::kA32;
using isa::kB32;
using isa::kBcast;
using isa::kO32;

// Host rows (2N bytes each: a buffer row) into buffer rows and back, in instructions of at
// most kMaxLength rows.
void EmitReadHost(isa::ProgramBuilder& p, int n, int64_t host_row, int64_t ub, int64_t rows);
void EmitWriteHost(isa::ProgramBuilder& p, int n, int64_t ub, int64_t host_row, int64_t rows);

// The cores of a step split across a chip's cores (each a share of the batch): at most
// two, every preset's (EmitGradientSum sums two).
inline constexpr int kMaxTrainingCores = 2;
// Throws UsageError for `cores` outside 1 to kMaxTrainingCores, or more than `config` has,
// or a batch that is not a multiple of them.
void CheckTrainingCores(const config::TpuConfig& config, int cores, int batch);
// The cores a run's steps take: `asked` (--cores), or 0 for the chip's own, at most
// kMaxTrainingCores.
int TrainingCores(const config::TpuConfig& config, int asked);

// The sum of the two cores' weight gradients (bfloat16 buffer rows [g, g + rows) of each),
// through HBM as examples/training/allreduce_core*.asm sums them: core `core` writes its
// rows into its slot of HBM (slot c from byte `hbm` + c rows 2N), waits at a barrier for the
// other to have written its own, reads the other's into rows [other, other + rows) and adds
// them into g on the vector unit (chip::CoreSum's arithmetic: both cores hold the same sum,
// bit for bit, and update the same weights the same way).
void EmitGradientSum(isa::ProgramBuilder& p, int n, int core, int64_t g, int64_t other,
                     int64_t rows, uint64_t hbm);

// A step's layout (any with fields core, h_batch, h_batch_next and h_out, and BatchRows()
// and OutRows()) for core `core`: its share's host areas, each core's after the one before.
template <typename Layout>
Layout ForCore(Layout a, int core) {
  a.core = core;
  a.h_batch += core * a.BatchRows();
  a.h_batch_next += core * a.BatchRows();
  a.h_out += core * a.OutRows();
  return a;
}

// The buffer rows of the loss: the logits (b bfloat16 rows), a float32 row of 0 in the
// classes' lanes and -infinity past them (pad), the labels one-hot (y, b rows), a zero row,
// a float32 row of 1 / batch; float32 scratch of 2b rows each (sm, mx, sum, recip, pick),
// the losses (2b rows) and their mean (2 rows); dL/dlogits goes to dz (b bfloat16 rows).
// More classes than N (a graph's): `blocks` blocks of N lanes, the logits' block k at
// logits + k logits_stride, the labels' at y + k y_stride, pad's at pad + 2k, dL/dlogits' at
// dz + k dz_stride, and sm's at sm + k sm_stride.
struct LossRows {
  int64_t logits = 0, pad = 0, y = 0, zero = 0, inv_batch = 0;
  int64_t sm = 0, mx = 0, sum = 0, recip = 0, pick = 0, loss = 0, mean = 0, dz = 0;
  int64_t blocks = 1, logits_stride = 0, y_stride = 0, dz_stride = 0, sm_stride = 0;
};

// The loss rows of a step's layout (any with the fields of these names), dL/dlogits into dz.
template <typename Layout>
LossRows LossRowsOf(const Layout& a, int64_t dz) {
  LossRows r;
  r.logits = a.logits;
  r.pad = a.pad;
  r.y = a.y;
  r.zero = a.zero;
  r.inv_batch = a.inv_batch;
  r.sm = a.sm;
  r.mx = a.mx;
  r.sum = a.sum;
  r.recip = a.recip;
  r.pick = a.pick;
  r.loss = a.loss;
  r.mean = a.mean;
  r.dz = dz;
  return r;
}

// The loss of each of `b` images, their mean (without `mean`: none), and dL/dlogits: 16
// vector instructions (with several blocks of classes, each block's lanes as one block's,
// the blocks' maxima and sums taken block after block: chip::SoftmaxRow).
void EmitSoftmaxLoss(isa::ProgramBuilder& p, const LossRows& r, int64_t b, bool mean = true);
// The mean of `b` losses from r.loss: their sum row after row, times 1 / the batch.
void EmitLossMean(isa::ProgramBuilder& p, const LossRows& r, int64_t b);

// The optimizer's update of a run of value rows (dense_reference.h's Update, bit for bit):
// the float32 weights w and optimizer state slot0 (and slot1: Adam's) from the bfloat16
// gradient g; the constants (UpdateConstants, float32 rows from consts, two rows each), the
// step's scalars (Adam's, float32 rows from scalars: c1, then c2) and two float32 scratch
// runs as long as the rows. SGD's 4 vector instructions or Adam's 15, each given to `vec`
// (operation, a, b, out, flags; over all the rows).
struct UpdateRows {
  int64_t w = 0, g = 0, slot0 = 0, slot1 = 0, consts = 0, tmp = 0, tmp2 = 0, scalars = 0;
};
// The update's rows of layer rows `r` (fields w, g, slot) from value row v0, in a step's
// layout `a` (fields consts, tmp, tmp2, scalars).
template <typename Layout, typename Rows>
UpdateRows UpdateRowsOf(const Layout& a, const Rows& r, const Optimizer& opt, int64_t v0) {
  UpdateRows u;
  u.w = r.w + 2 * v0;
  u.g = r.g + v0;
  u.slot0 = r.slot[0] + 2 * v0;
  u.slot1 = opt.Slots() > 1 ? r.slot[1] + 2 * v0 : 0;
  u.consts = a.consts;
  u.tmp = a.tmp;
  u.tmp2 = a.tmp2;
  u.scalars = a.scalars;
  return u;
}
// Adam's two float32 scalars of step `step` (ScalarsOfStep: c1, then c2) in every lane of
// rows 0-3 of a batch image of rows of n halves; nothing for SGD.
void PutStepScalars(std::vector<uint16_t>* img, int n, const Optimizer& opt, int64_t step);

using VecFn = std::function<void(hw::VectorOp, int64_t a, int64_t b, int64_t out, int flags)>;
void EmitUpdate(const Optimizer& opt, const UpdateRows& r, const VecFn& vec);

// Which pass of a step each instruction belongs to (the rows of its per-pass counters): the
// passes' names in their order, with their useful MACs, and the runs of instructions.
class PassLog {
 public:
  // Pass `name`'s index, given it the next one (with its useful MACs) where it has none yet;
  // its MACs where they were 0.
  int Name(const std::string& name, int64_t macs = 0);
  // The instructions from `at` on belong to pass `name` (Name's), up to the next Start.
  void Start(size_t at, const std::string& name, int64_t macs = 0) {
    runs_.push_back({at, Name(name, macs)});
  }
  // Instructions [start, end) belong to pass `pass` whatever run they fall in (a queued
  // instruction emitted between another pass's).
  void Fill(size_t start, int pass, size_t end) { filled_.push_back({start, pass, end}); }
  // Each of `instructions` instructions' pass (0 before the first run).
  std::vector<int32_t> PassOf(size_t instructions) const;
  const std::vector<std::string>& Names() const { return names_; }
  const std::vector<int64_t>& Macs() const { return macs_; }
  // The pass of the instructions emitted now (0 before the first run), and how many runs
  // have started (each Start, a new one, even of a pass seen before).
  int Current() const { return runs_.empty() ? 0 : runs_.back().pass; }
  size_t Runs() const { return runs_.size(); }
  // A log for the next part of a step (another program): the same passes, no runs yet.
  PassLog Continued() const {
    PassLog next;
    next.names_ = names_;
    next.macs_ = macs_;
    return next;
  }

 private:
  struct Run {
    size_t start;
    int32_t pass;
    size_t end = 0;  // a filled run's; a pass's runs to the next
  };
  std::vector<Run> runs_, filled_;
  std::vector<std::string> names_;
  std::vector<int64_t> macs_;
};

}  // namespace tpu::train
