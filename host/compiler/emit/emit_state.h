// The state the emitter's parts share (graph_emitter.h, docs/compiler.md "The emitter's
// parts"): the network, its plan and the chip; the program being written and, per
// instruction, the operation it belongs to; where the current group's tensors are; the
// current matrix unit, the tile in each unit's array and the window set last.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "contract/tpu_contract.h"
#include "host/compiler/graph_emitter.h"
#include "host/compiler/graph_lowering.h"
#include "host/compiler/graph_plan.h"
#include "host/config/tpu_config.h"
#include "host/engine/cycle_observer.h"
#include "host/isa/program_builder.h"

namespace tpu::compiler::emit {

constexpr int64_t kMaxRows = hw::kOpdMatmulFirst.Max();  // rows in one transfer (16 bits)
constexpr size_t kAll = SIZE_MAX;  // every matmul of a term (PassEmitter::Term)

struct Range {
  int64_t lo = 0, hi = 0;  // [lo, hi)
  bool Overlaps(const Range& o) const { return lo < o.hi && o.lo < hi && lo < hi && o.lo < o.hi; }
};

// An activate waiting for the next pass's first matmul, and what it touches.
struct Act {
  int op = -1;
  uint64_t acc = 0, ub = 0, rows = 0, set = 0, stride = 1;
  bool relu = false;
  isa::Fn fn = isa::Fn::kNone;
  isa::Pool pool = isa::Pool::kNone;
  std::optional<isa::Residual> residual;
  // Accumulator rows (those of unit u from u x acc_depth_rows on); unified-buffer rows
  // written and read.
  Range acc_rows, writes, reads;
  bool split = false;  // one image or run of an operation's last pass
  int mxu = 0;         // the matrix unit whose accumulators it reads
};

// A pass: output tile j of images [i0, i0 + count), rows [r0, r0 + rows) of each.
struct PassSpec {
  int64_t j = 0, i0 = 0, count = 0, r0 = 0, rows = 0;
};

// Where the rows of one tensor lie for the images the current group or band works on.
struct View {
  int64_t ub = -1;    // row of image `first`
  int64_t first = 0;  // the first image it holds
  int64_t pitch = 0;  // rows from one image to the next
  int64_t lines = 0;  // pixel rows of the map it holds (a band: fewer than the map's)
  int64_t line0 = 0;  // the map's pixel row it starts at
  // 0: image by image (an image's rows, then the next image's); else tile by tile, the
  // rows of one pixel's tile t of every image from ub + t x by_tile (Plan::output_by_tile)
  int64_t by_tile = 0;
  int64_t Row(int64_t image) const { return ub + (image - first) * pitch; }
  // The row of `image`'s one pixel's tile `tile`.
  int64_t At(int64_t image, int64_t tile) const {
    return by_tile > 0 ? ub + tile * by_tile + (image - first) : Row(image) + tile;
  }
};

struct EmitState {
  EmitState(const LoweredGraph& graph, const Plan& plan, const config::TpuConfig& config, int batch,
            const CoreShare* share);

  // Marks the instructions emitted since the last mark as operation op's (-1: none).
  void Rec(int op);
  // Tensor t, and its N-lane tiles per pixel.
  const GraphTensor& T(int t) const;
  int64_t Tiles(int t) const;
  // Where the current matrix unit's accumulator rows start in the one space of every unit's
  // rows that Touch compares.
  int64_t AccBase() const;
  // Where host tensor t's image `image` starts in host memory.
  uint64_t HostRow(int t, int64_t image) const;
  // Where tensor t's rows are for the current group: staged, or its own area.
  View ViewOf(int t) const;
  // The current matrix unit: the one the next read_weights, matmul and activate name, whose
  // accumulator regions and tile Region and the passes use.
  void Unit(size_t u);

  const LoweredGraph& g;
  const Plan& plan;
  const config::TpuConfig& c;
  const int64_t n;
  const int64_t row, set_bytes;  // a row's bytes (N, or 2N in bf16), a parameter set's
  const int64_t b, half;
  const CoreShare* share = nullptr;  // model parallel: this core's part
  isa::ProgramBuilder p;
  std::vector<int32_t> op_of;
  std::vector<int> op_units = std::vector<int>(g.ops.size(), 1);  // EmittedProgram::op_units
  std::map<int, View> views;  // staged tensors of the current group or band
  int64_t group0 = 0;         // the current group's first image
  int seg_end = 0;            // the current segment's end (operations)
  // The current matrix unit (docs/compiler.md, "Several matrix units"), and the weight tile
  // in each unit's array.
  int unit = 0;
  std::array<int, engine::kMaxMxus> active = [] {
    std::array<int, engine::kMaxMxus> a;
    a.fill(-1);
    return a;
  }();
  std::optional<isa::WindowGeometry> window;  // the window set last
};

}  // namespace tpu::compiler::emit
