// Weights through the unified buffer (docs/compiler.md, "Weights through vector memory"):
// the Cloud TPU's path for a matrix unit's stationary operand, HBM -> vector memory -> MXU,
// made from a finished program that reads its weights straight into the FIFOs.
//
// Every `read_weights` of unit m becomes a `load_weights` of the same tiles from a staging
// slot of unit m, in the same place, and a `read_hbm` that brings them from weight memory
// into that slot, placed just after the unit's `load_weights` before it. A unit has `slots`
// slots of `slot_tiles` tiles, taken in turn; since a unit's weight DMA runs one load at a
// time, the load before the one that last used a slot has ended when the unit's next load
// issues, so a `read_hbm` never waits for its slot to be read (with two slots or more). A
// read of more tiles than a slot holds is cut into pieces of a slot each; piece k + 1's
// load goes just before the `matmul ... switch` that takes piece k's first tile, so the
// FIFO has room for it from the matmuls already issued (docs/compiler.md says why that
// cannot deadlock).
#pragma once

#include <cstdint>

#include "host/compiler/graph_emitter.h"
#include "host/compiler/graph_plan.h"

namespace tpu::compiler::emit {

struct WeightStaging {
  int64_t ub = -1;           // the first staging row (-1: weights go through the FIFO)
  int64_t slot_tiles = 0;    // tiles a slot holds
  int slots = kWeightSlots;  // slots per matrix unit
  int64_t Rows(int64_t n, int units) const { return slots * slot_tiles * n * units; }
};

// Rewrites `e` (a core's program, op_of kept per instruction) so that its weights come
// through the staging rows; n: the array's size, row: a row's bytes in weight memory.
void StageWeights(EmittedProgram* e, const WeightStaging& staging, int64_t n, int64_t row);

}  // namespace tpu::compiler::emit
