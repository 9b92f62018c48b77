// The fewest cycles the chip could take for each operation of a planned network, and for
// the network (docs/performance.md, "The attainable bound"): the operation's shape mapped
// onto the array, the batch, and each resource's rate, with perfect overlap. Derived from the
// hardware's rates and the operation's shape, never from a run:
//   array   every term of every output tile streams its rows (one per cycle); a tile takes
//           N cycles to shift in, hidden behind the previous tile's rows when they are at
//           least N: for each group of g images, max(terms x g x rows, N) cycles per run of
//           consecutive terms through one tile; on a core of M matrix units, that over M (the
//           units stream side by side)
//   weights each run's tile comes from weight memory once per group: N rows of
//           ceil(N / weight bytes per cycle) cycles
//   host    the host DMA: the model's input rows the operation reads and output rows it writes
//   (unless
//           the plan keeps them on chip), and its parameter sets, over the host link (rows of
//           N bytes at host bytes per cycle); the input of every group but the first of a
//           segment run in several goes while the group before computes, so it is the
//           network's (staged_host), not the operation's; with the weights through vector
//           memory, each run's tile too, N rows from weight memory (hbm_dma) at the weights'
//           rate
//   activation  the activation unit (TPU v1's vector unit): every accumulator row it
//           activates, one per cycle
//   vector unit a bf16 chip's float32 vector unit (kVector operations): each step reads
//           every row of the batch's output shape, vector_sublanes rows a cycle (the
//           latencies, which a program of fewer instructions would pay fewer times, are not in)
//   pipeline the array and the weights together, through a FIFO of F tiles: the runs in
//           program order, each tile loaded after the one before and no earlier than the
//           FIFO has room for it (WeightPipeline); each operation holds the cycles by which
//           it moves the pipeline's end (one array's recurrence: none on a core of several)
// The operation's bound is the largest of its own terms (the pipeline's share aside: the FIFO
// may prefetch its first tiles during the operation before); the network's is the largest of
// the sums, the pipeline's being the time the array and the weights together need. Spills
// are the plan's choice, not the shape's, and are not in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/compiler/graph_lowering.h"
#include "host/compiler/graph_plan.h"
#include "host/config/tpu_config.h"

namespace tpu::compiler {

struct Bound {
  double array = 0, weights = 0, host = 0, activation = 0, vector_unit = 0;
  double pipeline = 0;     // the operation's share of the array-and-weights pipeline
  double staged_host = 0;  // host cycles of its input read while the group before computes
  // Weights through vector memory (Plan::weight_stage): the host DMA's cycles of read_hbm,
  // its tiles' rows one a cycle (or as the core's share of the weight memory allows)
  double hbm_dma = 0;
  bool network = false;  // a network's sum: the pipeline and the staged input count
  // The host DMA's term: host, hbm_dma, and for a network staged_host
  double Host() const;
  double Cycles() const;
  // What binds: "array", "weights", "array+weights" (the pipeline: the FIFO too shallow to
  // hide the weights of one layer behind the array time of another), "host link" ("host
  // DMA" where it also brings the weights),
  // "activation unit" (TPU v1's vector unit) or "vector unit" (the float32 one).
  std::string Binds() const;
  Bound& operator+=(const Bound& o);
};

// One run of consecutive terms through one weight tile: the rows it streams.
struct TileRun {
  double rows = 0;
  int op = 0;  // the operation it belongs to
};

// The array and the weight memory as a pipeline, for runs in program order, each of whose
// tiles takes `load` cycles from weight memory into a FIFO of `fifo` tiles, N rows shifting
// into the array's shadow registers: with D_i the cycle run i's tile has arrived and S_i the
// cycle its first row enters,
//   D_i = max(D_{i-1} + load, S_{i-fifo-1})   the memory sends one tile at a time, and the
//                                             last row of tile i finds room in the FIFO only
//                                             once tile i-fifo has left it for the shadow
//                                             registers, which are free from S_{i-fifo-1}
//   S_i = max(D_i, S_{i-1} + max(R_{i-1}, N)) its tile is complete, the run before has
//                                             streamed its rows, and its own N rows have
//                                             shifted in since the shadow registers freed
// and the end is S_last + R_last. Every constraint is one the chip has, so no program of
// these runs ends sooner. Returns, per operation of `ops`, the cycles by which its runs move
// the end (their sum is the end).
std::vector<double> WeightPipeline(const std::vector<TileRun>& runs, size_t ops, double load,
                                   double n, int fifo);

// Per operation of `graph` for a batch of `batch` images planned as `plan`.
std::vector<Bound> BoundGraph(const LoweredGraph& graph, const Plan& plan,
                              const config::TpuConfig& config, int batch);

}  // namespace tpu::compiler
