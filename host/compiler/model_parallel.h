// Model parallel: one image on a chip of several cores (docs/compiler.md, "Model parallel").
//
// Where a batch has fewer images than the chip has cores, the batch split leaves cores idle.
// For a batch of one, an operation whose output tiles the cores can share runs split: core c
// computes output tiles [nt c / C, nt (c + 1) / C) with their weight tiles and parameter sets
// only, sends its tiles of the map to host memory, meets the other cores at a barrier and
// reads the whole map back (graph_emitter.h, CoreShare). Every other operation runs whole on
// every core, on the same inputs, so each core holds every map the next operation reads.
//
// Which operations split is decided from the bounds (graph_bound.h), never from a run:
//   one core  B1 = the operation's bound for one image on one core
//   split     Bs = the largest of the cores' bounds of their shares, plus the exchange X:
//             drain   the operation's last pass activated (its rows, at most half the
//                     accumulators, a row a cycle) and the array's N cycles of latency, which
//                     on one core the next operation's rows hide
//             writes  each core's P pixels, one write_host of its s tiles' rows each (s + 3
//                     cycles: the DMA's start), the cores at once; at least the map's R rows
//                     over the one link (cycles per row: HostRowCycles)
//             reads   the C cores' reads of the whole map, C x R rows over the link, and its
//                     latency once
//             (`tpusim exec` of the writes and reads alone for a 14 x 14 map of 2 tiles on
//             tpu-v3 with a link of 957 B/cycle: 1,645 cycles; writes and reads 1,638.)
// An operation splits where Bs + X < B1. Running on C cores costs the host link more: each
// core reads what the one-core program reads (the input, the parameter sets), so the split
// is taken only where the gains, summed, exceed (C - 1) x the one-core program's host-link
// cycles (its output's counted too, which only core 0 writes: a little more than needed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/compiler/graph_bound.h"
#include "host/compiler/graph_lowering.h"
#include "host/compiler/graph_plan.h"
#include "host/config/tpu_config.h"

namespace tpu::compiler {

struct ModelSplit {
  int cores = 1;
  std::vector<bool> split;  // per operation: its output tiles are shared out over the cores
  double one_core = 0;      // the bounds' cycles on one core, and split (B1 and Bs + X summed)
  double shared = 0;
  bool Any() const;
};

// The output tiles [first, first + count) of `nt` that core `core` of `cores` computes.
std::pair<int64_t, int64_t> CoreTiles(int64_t nt, int core, int cores);

// Core `core`'s graph: each split operation with only its share of the output columns (their
// terms, parameter sets and useful MACs), writing from output tile CoreTiles(...).first on.
LoweredGraph CoreGraph(const LoweredGraph& g, const std::vector<bool>& split, int core, int cores);

// The cycles the exchange of operation `op`'s output map takes (X above), for one image.
double ExchangeCycles(const LoweredGraph& g, int op, const config::TpuConfig& c);

// The operations to split for one image on the chip's cores (above); none on one core, or
// where the plan keeps tensors in host memory or runs in bands.
ModelSplit ChooseModelSplit(const LoweredGraph& g, const Plan& plan, const config::TpuConfig& c);

}  // namespace tpu::compiler
