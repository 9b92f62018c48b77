// The vector unit's work moved beside the matrix units' (docs/transformers.md, "The vector
// unit beside the products"). A program issues in order, one instruction at a time, each
// waiting for its unit and for the rows that instructions still running write or read
// (docs/timing.md, "Issue"). Where a program computes on the vector unit what the products
// before it wrote (a GELU after its linear layer, a softmax after the scores), the vector
// unit waits through the products and the matrix units through the vector work.
// HoistVectorWork moves each vector instruction earlier, into a moment where the issue
// would otherwise wait for a busy unit, and the other units' instructions earlier past
// vector work they do not depend on, wherever nothing passed writes what the moved one
// reads or reads or writes what it writes (the footprints the controller's interlocks use,
// fast/decode.h). The other units' instructions keep their order (a unit's weight FIFO takes
// tiles in it); a vector instruction passes another only where their rows are not the same;
// nothing passes a sync, halt or barrier. What each instruction computes is unchanged, so
// the program's results are too; only the order, and so the cycles, change.
#pragma once

#include <cstdint>
#include <vector>

#include "host/config/tpu_config.h"
#include "host/isa/isa.h"

namespace tpu::compiler {

// The program with instructions moved before others where, by an estimate of each unit's
// time (the attainable bound's rates, report/program_bound.h), they issue without holding
// back the instruction they go before: vector instructions before the other units', those
// before vector instructions. `op_of` (one entry per instruction, or
// empty) is reordered with it. A program with an instruction the controller refuses is
// returned as it is.
isa::Program HoistVectorWork(const isa::Program& program, std::vector<int32_t>* op_of,
                             const config::TpuConfig& config);

}  // namespace tpu::compiler
