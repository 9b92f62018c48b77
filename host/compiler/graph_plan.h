// Where a lowered network's tensors live and in which order its operations run, for a batch
// of B images on one chip (docs/compiler.md, "Whole networks: the plan").
//
// The operations are cut into segments. A segment runs its images in groups of g (g <= B):
// every operation of the segment for the first g images, then for the next g, so a group's
// tensors inside the segment stay in the unified buffer (g images each) while weights are
// read once per group. Large maps early in a network want small groups; the weight-heavy
// late layers want the whole batch. The cut is chosen by dynamic programming over where
// segments end and how large their groups are, minimizing an estimate of the cycles
// (each operation's rows streamed, or its weight tiles read once per group, whichever is
// more, plus the host traffic of spills).
//
// Tensors that cross a segment boundary are kept for the whole batch: in the unified buffer
// when they fit (mode "unified buffer"), else in host memory ("spilled": written by their
// producer group by group, read back by each reader). When not even one image of one
// operation fits, that operation runs in bands of output rows, its inputs and output
// staged through the unified buffer band by band.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/compiler/graph_lowering.h"
#include "host/config/tpu_config.h"

namespace tpu::compiler {

struct PlanSegment {
  int first = 0, end = 0;  // operations [first, end)
  int64_t group = 1;       // images per group
  bool banded = false;     // one operation, run in bands of `band` output rows per image
  int64_t band = 0;
};

struct TensorPlace {
  bool host = false;       // lives in host memory (spilled, or the model's input / output)
  int64_t ub = -1;         // the first unified-buffer row of its area (-1: none)
  int64_t images = 0;      // images its unified-buffer area holds (a group, or the batch)
  uint64_t host_addr = 0;  // host-memory byte address of image 0 (host tensors)
};

// Unified-buffer areas through which a segment moves host tensors (images of a group, or
// bands), two of each so that the next one loads while this one is used.
struct Staging {
  int tensor = -1;
  int64_t ub[2] = {-1, -1};
  int64_t rows = 0;  // rows each holds
};

// Which of the model's input and output stay in the unified buffer (not moved by the program).
struct MapsOnChip {
  bool input = false, output = false;
  bool Any() const { return input || output; }
};

// Where a network's weights reach the matrix units (docs/compiler.md, "Weights through
// vector memory"): read_weights from weight memory into each unit's FIFO, as TPU v1; or
// the Cloud TPU's path, read_hbm into staging rows of the unified buffer (its vector
// memory) and load_weights from there (emit/weight_staging.h).
enum class WeightPath { kFifo, kVectorMemory };
// Staging slots per matrix unit on that path, each of a FIFO's tiles: a unit's next tiles
// arrive in one while its load reads the other.
constexpr int kWeightSlots = 2;

struct Plan {
  std::vector<PlanSegment> segments;
  std::vector<TensorPlace> places;            // per tensor
  std::vector<std::vector<Staging>> staging;  // per segment
  bool spill = false;                         // crossing tensors live in host memory
  MapsOnChip maps;      // the input or output stays in the unified buffer (PlanGraph)
  int64_t ub_rows = 0;  // the unified-buffer rows it uses
  // A row of +0 lanes the vector unit's steps broadcast (kVector; the last row of the
  // unified buffer, which no tensor then takes), written by the program's first `vector`;
  // -1: none (no operation on the vector unit).
  int64_t zero_row = -1;
  // WeightPath::kVectorMemory: the first of the staging rows (below the zero row, at the
  // top of the buffer; emit::WeightStaging), -1: none.
  int64_t weight_stage = -1;
  uint64_t host_bytes = 0;                    // host memory it uses
  uint64_t params_addr = 0, output_addr = 0;  // host addresses of the parameter sets, output
  uint64_t weights_bytes = 0;
  std::string why_not;  // empty: it fits the chip
  // The model's output (one pixel of several N-lane tiles per image) lies tile by tile, in
  // host memory and in its unified-buffer area: every image's tile 0, then every image's
  // tile 1, ..., so the program sends each tile once its activate is done instead of all of
  // them after the last (docs/compiler.md, "The output tile by tile"). Else image by image.
  bool output_by_tile = false;
};

// Plans `graph` for batches of `batch` images on `config`. With maps on chip, the model's
// input starts in the unified buffer (the whole batch), or its output stays there, as a
// layer's would inside a network (`tpusim run --topology --maps chip`): the program does
// not move that tensor, and nothing is banded.
// With WeightPath::kVectorMemory, the staging rows are kept out of the tensors' rows.
Plan PlanGraph(const LoweredGraph& graph, const config::TpuConfig& config, int batch,
               MapsOnChip maps = {}, WeightPath weights = WeightPath::kFifo);
// The staging rows of the weights' path through vector memory on `config`: kWeightSlots
// slots of a FIFO's tiles per matrix unit.
int64_t WeightStageRows(const config::TpuConfig& config);

}  // namespace tpu::compiler
