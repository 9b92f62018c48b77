// The operations that run on a bf16 chip's float32 vector unit (graph_lowering.h, kVector):
// their steps as `vector` instructions over the rows of the current group's or band's
// tensors, and the plan's row of zeros they broadcast (docs/compiler.md, "Adds on the
// vector unit").
#pragma once

#include <cstdint>

#include "host/compiler/emit/activates.h"
#include "host/compiler/emit/emit_state.h"

namespace tpu::compiler::emit {

// Writes +0 into every lane of the plan's zero row, where it has one: `vector op=less` of
// the row with itself, false (+0) whatever the row held, NaN included.
void ZeroRow(EmitState& s);

// Operation i's steps over rows [row0, row0 + rows) of each of images [i0, i0 + count) in
// its tensors' views: per step one `vector` for the images together where their rows lie
// one after another in every operand (at most a length field's rows each), else one per
// image (per row where the output lies tile by tile). The waiting activates that write what
// a step reads, or read or write what it writes, go first.
void VectorSteps(EmitState& s, Activates& acts, int i, int64_t i0, int64_t count, int64_t row0,
                 int64_t rows);

}  // namespace tpu::compiler::emit
