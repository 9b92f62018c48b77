// The report's rows of a model or topology run: one per operation of a whole-network program
// (or per layer job, or per topology layer), built here from what each run of the loaded
// programs gives (each core's share of the batch, its program's bounds, the counters
// attributed to the operations cycle by cycle), so that the runner only binds, runs, reads
// and checks (host/run/tpu_runner.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/compiler/graph_bound.h"
#include "host/compiler/network_compiler.h"
#include "host/config/tpu_config.h"
#include "host/engine/cycle_attribution.h"

namespace tpu::report {

// What a row's name holds where its operation's output channels are shared out over the
// cores (model parallel, or a topology layer), followed by how many.
inline constexpr const char* kOutputChannelsSplit = "output channels over";

struct LayerStats {
  std::string name;
  int64_t macs = 0;  // useful MACs (the layer's arithmetic, no padding)
  int64_t jobs = 0;
  hw::ChipCounters counters;  // summed over the batches
  // Whole-network and topology rows: the attainable bound (graph_bound.h), summed over the
  // batches, and the layer as a GEMM: m rows (output pixels of every image), k, n (0: not a
  // convolution or dense layer).
  compiler::Bound bound;
  int64_t m = 0, k = 0, n = 0;
  // On a chip of several cores, each core's part of the row (its share of every batch, or in
  // a topology run where the name holds kOutputChannelsSplit its share of the output
  // channels: its MACs and the counters attributed on it); they add up to the row. Empty on
  // one core.
  struct CoreShare {
    int64_t macs = 0;
    hw::ChipCounters counters;
  };
  std::vector<CoreShare> cores;
  // On a core of several matrix units, the cycles each had work on the row's matmuls, over
  // every core (host/engine/cycle_attribution.h: whole-network programs). Empty otherwise.
  std::vector<uint64_t> mxu_busy;
  // There, the most matrix units the row's operation went to in a program (the compiler's
  // choice, docs/compiler.md "Several matrix units"); 0 where not recorded.
  int mxus = 0;
};

// A row per operation of the whole network's program; with `split` (one image over
// `cores` cores) an operation split by output channels says so in its name.
std::vector<LayerStats> OperationRows(const compiler::NetworkCompiler& network, int cores,
                                      bool split);

// Core `core`'s share of a batch (`images` of them) in the operations' rows: their MACs (the
// row's and, on several cores, the core's), bounds (its program's), GEMM rows and shapes, one
// more job each.
void AddShare(const compiler::NetworkCompiler& network, int images, int core, int cores,
              const std::vector<compiler::Bound>& bounds, std::vector<LayerStats>* rows);

// Core `core`'s part of one image split over the cores (model parallel, docs/compiler.md):
// its MACs (its share of a split operation's, a whole one's on core 0 only: the other cores
// repeat it), its bounds (its program's), the GEMM rows and shapes once.
void AddSplitShare(const compiler::NetworkCompiler& network, int core, int cores,
                   const std::vector<compiler::Bound>& bounds, std::vector<LayerStats>* rows);

// The rows' counters (summed over the cores, and each core's), matrix units and their busy
// cycles from the attributions (core c's, of the program `jobs[c]`), which hold every
// batch's.
void CollectRows(const std::vector<compiler::LayerJob>& jobs, const config::TpuConfig& config,
                 const std::vector<engine::CycleAttribution>& attributions,
                 std::vector<LayerStats>* rows);

// One more job of a row (layer jobs, topology layers), run on core `core` of the `sharers`
// the row's work is shared out over: its counters and `macs` added to the row and, where
// sharers > 1, to the core's part (1: one core runs all of it, no parts).
void AddJob(const hw::ChipCounters& counters, int64_t macs, int core, int sharers, LayerStats* row);

}  // namespace tpu::report
