// The program of one batch for a planned network (docs/compiler.md, "Whole networks: the
// schedule"): segment by segment, group by group, operation by operation, pass by pass.
//
// A pass streams the rows of one output tile of some images (or of a chunk of one image's
// rows) through the terms of that tile into one half of the accumulators; its activates
// wait until the next pass's first matmul has been emitted, so the VPU empties one half
// while the matrix unit fills the other. Instructions issue in order and the controller
// interlocks only see issued ones, so before any instruction that touches rows a waiting
// activate reads or writes (unified buffer, accumulators or parameter set), the waiting
// activates are emitted first.
#pragma once

#include <cstdint>
#include <vector>

#include "host/compiler/graph_lowering.h"
#include "host/compiler/graph_plan.h"
#include "host/config/tpu_config.h"
#include "host/isa/isa.h"

namespace tpu::compiler {

struct EmittedProgram {
  isa::Program program;
  std::vector<int32_t> op_of;  // per instruction, the operation it belongs to (-1: none)
  std::vector<int> op_units;   // per operation, the matrix units its passes went to (1: one)
};

// One core's part of a model-parallel program (docs/compiler.md, "Model parallel"): the
// operations whose output tiles the cores share out, each core's graph holding only its
// share of their columns (model_parallel.h).
struct CoreShare {
  int core = 0, cores = 1;
  std::vector<bool> split;        // per operation: its output tiles are shared out
  uint64_t exchange[2] = {0, 0};  // the host areas the maps go through, in turn
};

// `sharers`: the cores that run their programs at once over the chip's one host link (a
// batch's shares, docs/compiler.md, "Several cores"); the transfers for the next group are
// paced at the link's bandwidth divided among them. With `share`, after each operation it
// marks split the core sends its tiles of the map to host memory, meets the other cores at a
// barrier and reads the whole map back; only core 0 sends the model's output.
EmittedProgram EmitGraph(const LoweredGraph& graph, const Plan& plan,
                         const config::TpuConfig& config, int batch, int sharers = 1,
                         const CoreShare* share = nullptr);

}  // namespace tpu::compiler
