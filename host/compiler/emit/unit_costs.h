// What spreading an operation over a core's matrix units costs (docs/compiler.md, "Which
// operations, over how many units"): the units it spreads over, and the cycles of the weight
// reads that bound them, from the chip's rates and each operation's bound (graph_bound.h).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "host/compiler/emit/emit_state.h"
#include "host/compiler/graph_bound.h"

namespace tpu::compiler::emit {

class UnitCosts {
 public:
  UnitCosts(const EmitState& s, std::vector<Bound> bounds) : s_(s), bounds_(std::move(bounds)) {}

  // The matrix units op i's passes spread over: the u (up to the core's M) whose estimate
  // is least, the fewest of equals (graph_bound.h's terms for the core, the array term A
  // over M; docs/compiler.md, "Which operations, over how many units"). One unit: max(M x A,
  // weights, vector, host). u units: the reads of the first f tiles, which their FIFOs take
  // before the group's first matmuls (LaneTiles; the one-unit schedule reads them while the
  // operation before streams), then max(M / u x A, the other tiles' reads, vector, host);
  // the reads RunTiles at a time, the u units' side by side (SideBySide).
  int SpreadUnits(int i) const;
  bool Spreads(int i) const;
  // Over how many units operation i, of fewer output tiles than it spreads over, shares
  // `rows` rows of a column (each unit its own images or rows, each reading every tile of
  // the column): the fewest that make a tile's time least. On u units that is u tile reads,
  // side by side on the units' weight DMAs (SideBySide), against a unit's rows through the
  // tile, at least N (a tile's shift hides behind N rows).
  int64_t RowUnits(int i, int64_t rows) const;
  // The cycles a read of one weight tile keeps the weight DMA busy (docs/timing.md).
  int64_t TileLoadCycles() const;
  // The cycles u units take to read a tile each, side by side on their own weight DMAs:
  // one read's (`per`), or the channel's for the u tiles where it binds.
  int64_t SideBySide(int64_t u, int64_t per) const;
  // The cycles the weight memory's channel takes to move `tiles` tiles' bytes, which the
  // core's weight DMAs share (docs/timing.md, "Chips of several cores").
  int64_t ChannelCycles(int64_t tiles) const;
  // The cycles a tile keeps the weight DMA busy where a spread unit reads two at a time
  // (RunTiles; PaceReads).
  int64_t TileReadCycles() const;
  // ... and a read of `tiles` tiles (the memory's latency once).
  int64_t ReadCycles(int64_t tiles) const;
  // The tiles a spread unit's read_weights takes where it can: kRunTiles, at most half the
  // FIFO.
  size_t RunTiles() const;

 private:
  const EmitState& s_;
  const std::vector<Bound> bounds_;  // each operation's, on a core of several units
};

}  // namespace tpu::compiler::emit
