// The activates that wait for the next pass's first matmul (graph_emitter.h): queued as each
// pass ends, emitted before any instruction that touches the rows they read or write, and
// the rows streamed since the last ones, which say when the vector unit is done with them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "host/compiler/emit/emit_state.h"

namespace tpu::compiler::emit {

class Activates {
 public:
  explicit Activates(EmitState& s) : s_(s) {}

  // Emits the waiting activates, in order, up to the last one that an instruction about to be
  // emitted touches (reads: unified-buffer rows it reads; writes: rows it writes; acc:
  // accumulator rows; set: a parameter set).
  void Touch(const Range& reads, const Range& writes, const Range& acc = {}, int64_t set = -1);
  // How many of the waiting activates Touch would emit.
  size_t Touched(const Range& reads, const Range& writes, const Range& acc = {},
                 int64_t set = -1) const;
  // Emits the first `upto` waiting activates (all by default), in order.
  void Flush(size_t upto = SIZE_MAX);
  // The pass's activate: accumulator rows to output tile j of the images' output rows.
  void QueueActivate(int i, int64_t j, int64_t i0, int64_t count, int64_t r0, int64_t rows,
                     uint64_t acc, uint64_t slot);
  // Marks the activate queued last as one of an image or run of an operation's last pass.
  void MarkSplit(bool split) { pending_.back().split = split; }
  // Whether the first waiting activate is such a one, and the rows it activates.
  bool FirstSplit() const { return !pending_.empty() && pending_.front().split; }
  uint64_t FirstRows() const { return pending_.front().rows; }
  // Emits the waiting activates up to the first split one (at least one): the pass before's.
  void FlushUnsplit();
  // Rows the matmuls stream after the activates emitted last (Streamed, reset by Flush
  // before the matmul's own rows count) and since (VpuStreamed). Done: the activates emitted
  // last have finished; VpuFree: an activate waits, and one emitted now would not wait for
  // the vector unit.
  void Streamed(int64_t rows) { after_acts_ += rows; }
  void VpuStreamed(int64_t rows) { vpu_since_ += rows; }
  bool Done() const { return after_acts_ >= vpu_due_; }
  bool VpuFree() const { return !pending_.empty() && vpu_since_ >= vpu_due_; }

 private:
  EmitState& s_;
  std::vector<Act> pending_;
  int64_t after_acts_ = 0;               // rows the matmuls emitted after the last activate stream
  int64_t vpu_due_ = 0, vpu_since_ = 0;  // rows of the activates emitted last; rows streamed since
};

}  // namespace tpu::compiler::emit
