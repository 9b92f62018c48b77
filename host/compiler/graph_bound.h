// The fewest cycles the chip could take for each operation of a planned network, and for
// the network (docs/performance.md, "The attainable bound"): the operation's shape mapped
// onto the array, the batch, and each resource's rate, with perfect overlap. Derived from the
// hardware's rates and the operation's shape, never from a run:
//   array   every term of every output tile streams its rows (one per cycle); a tile takes
//           N cycles to shift in, hidden behind the previous tile's rows when they are at
//           least N: for each group of g images, max(terms x g x rows, N) cycles per run of
//           consecutive terms through one tile
//   weights each run's tile comes from weight memory once per group: N rows of
//           ceil(N / weight bytes per cycle) cycles
//   host    the model's input rows the operation reads and output rows it writes (unless
//           the plan keeps them on chip), and its parameter sets, over the host link (rows of
//           N bytes at host bytes per cycle)
//   vector  every accumulator row it activates, one per cycle
// The operation's bound is the largest; the network's is the largest of the sums (every
// resource busy all the time). Spills are the plan's choice, not the shape's, and are not in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/compiler/graph_lowering.h"
#include "host/compiler/graph_plan.h"
#include "host/config/tpu_config.h"

namespace tpu::compiler {

struct Bound {
  double array = 0, weights = 0, host = 0, vector = 0;
  double Cycles() const;
  // What binds: "array", "weights", "host link" or "vector unit".
  std::string Binds() const;
  Bound& operator+=(const Bound& o);
};

// Per operation of `graph` for a batch of `batch` images planned as `plan`.
std::vector<Bound> BoundGraph(const LoweredGraph& graph, const Plan& plan,
                              const config::TpuConfig& config, int batch);

}  // namespace tpu::compiler
