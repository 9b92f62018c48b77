// Each unit's work beside the others' (docs/transformers.md, "Each unit's work beside the
// others'"). A program issues in order, one instruction at a time, each waiting for its unit
// and for the rows that instructions still running write or read (docs/timing.md, "Issue").
// As emitted, a program computes on the vector unit what the products before it wrote (a
// GELU after its linear layer, a softmax after the scores), and gives a matrix unit several
// products in a row: the vector unit waits through the products, the matrix units through
// the vector work, and a second matrix unit through the first's products.
// ScheduleUnits reorders the program as a list schedule: at each step the first
// instruction not placed may go, or the first not placed of another unit where it issues
// sooner by an estimate of each unit's time and nothing not placed before it writes what it
// reads or reads or writes what it writes (the footprints the controller's interlocks use,
// fast/decode.h). Each unit's instructions keep their order (a matrix unit's with its weight
// DMA's: its FIFO takes tiles in order; the host DMA's, whose host memory no footprint
// covers), but for the vector unit's, where the next 128 after its first may go before it
// (the next layer's staging beside a softmax); nothing passes a sync, halt, barrier or
// set_format, and a set_window or set_residual keeps its order with the instructions that
// read it (matmuls, activates), but not with the DMAs' or the vector unit's. What each
// instruction computes is unchanged, so the program's results are too; only the order, and
// so the cycles, change. The training steps of graphs are scheduled so too
// (host/train/graph_step.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "host/config/tpu_config.h"
#include "host/isa/isa.h"

namespace tpu::compiler {

// The program reordered so that, by an estimate of each unit's time (the attainable bound's
// rates, report/program_bound.h), each unit's instructions issue as soon as what they
// depend on allows. `op_of` (one entry per instruction, or empty) is reordered with it. A
// program with an instruction the controller refuses is returned as it is. `link_cores`:
// how many cores run programs at once, sharing the host link (the estimate gives each that
// share of it).
isa::Program ScheduleUnits(const isa::Program& program, std::vector<int32_t>* op_of,
                           const config::TpuConfig& config, int link_cores = 1);

}  // namespace tpu::compiler
