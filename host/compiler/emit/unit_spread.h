// An operation's passes spread over a core's matrix units (graph_emitter.h, docs/compiler.md
// "Several matrix units"): groups of passes side by side, one a unit, their matmuls in turn
// over the units, each unit's tiles read ahead and paced on its own weight DMA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "host/compiler/emit/acc_regions.h"
#include "host/compiler/emit/activates.h"
#include "host/compiler/emit/emit_state.h"
#include "host/compiler/emit/param_sets.h"
#include "host/compiler/emit/pass_emitter.h"
#include "host/compiler/emit/pass_shapes.h"
#include "host/compiler/emit/unit_costs.h"

namespace tpu::compiler::emit {

class UnitSpread {
 public:
  UnitSpread(EmitState& s, const PassShapes& shapes, const UnitCosts& costs, Activates& acts,
             ParamSets& params, AccRegions& regions, PassEmitter& pass)
      : s_(s),
        shapes_(shapes),
        costs_(costs),
        acts_(acts),
        params_(params),
        regions_(regions),
        pass_(pass) {}

  // Op i's passes (passes_, column by column) over m = SpreadUnits(i) of the core's matrix
  // units, m at a time: an operation of at least m output tiles gives each unit a column of
  // its own (the units read the same rows, each only its own tiles); one of fewer gives each
  // unit its own images or rows (each reads the column's tiles).
  void Spread(int i, const std::vector<PassSpec>& passes);

 private:
  // Passes g as one group where their terms line up, else each alone.
  void Together(int i, const std::vector<PassSpec>& g, std::vector<std::vector<PassSpec>>* out);
  // Passes g at once, pass l on unit l: each unit its accumulator region and tiles, the
  // matmuls term by term in turn over the units (a matmul waits only for its own unit's
  // feeder, so the units stream side by side), each unit's tiles read up to the FIFO's depth
  // ahead of the matmul that switches them in (each read after the matmul that made its room,
  // so none waits for a matmul behind it; paced, PaceReads), the waiting activates once every
  // unit streams. `next`: the operation's next group, whose first tiles each unit reads as
  // this group's switches make room, or null.
  void Lanes(int i, const std::vector<PassSpec>& g, const std::vector<PassSpec>* next);
  // The activates of group g: each unit's pass in one, or (`split`) one per image run of
  // `runs`, in the order of the images, so that the next operation starts on the first.
  void LaneActivates(int i, const std::vector<PassSpec>& g, const std::vector<uint64_t>& acc,
                     const std::vector<uint64_t>& slot,
                     const std::vector<std::vector<int64_t>>& runs, bool split);
  // The tiles each unit of group g switches in (lane_reads_), and the first of them read,
  // up to the FIFO's depth each, in turn, RunTiles at a time where they follow each other in
  // weight memory (one read, the latency once); between them the first `before` waiting
  // activates (those the group's first matmuls touch): each after reads that take about as
  // long as the activate before it, so that the weight DMAs and the vector unit work side by
  // side.
  void LaneTiles(int i, const std::vector<PassSpec>& g, const std::vector<PassSpec>* next,
                 size_t before);
  // Unit l's next `n` tiles of lane_reads_ (one after another in weight memory), read now
  // in one read_weights.
  void ReadNext(size_t l, size_t n = 1);
  // How many of unit l's next tiles, at most `most`, lie one after another in weight memory.
  size_t Consecutive(size_t l, size_t most) const;
  // Unit l's read of as many of its waiting reads (each the room one switch made) as one
  // read_weights can take (Consecutive), which leave the queue.
  void ReadRun(size_t l, size_t most);
  // Whether unit l's waiting reads go now: it has room for a run of kRunTiles (or its last
  // tiles), or at most one tile read ahead of its next switch.
  bool RunReady(size_t l) const;
  // A unit's next tiles are read after the matmuls that made room for them, but not while
  // its weight DMA still reads: the chip issues in order, so a read_weights emitted while
  // its unit's DMA is busy holds back every matmul behind it. The reads wait in turn, and a
  // unit's goes once the units have streamed, since that unit's read before, as many rows as
  // that read takes cycles (each unit has its own DMA: docs/timing.md), and the weight
  // memory's channel has moved the bytes of the read before (ChannelCycles). A unit's reads go
  // kRunTiles at a time where its tiles follow each other in weight memory (one read pays
  // the memory's latency once), as long as it keeps more than one tile ahead of its switches.
  void PaceReads();
  // Unit l's waiting reads, all now (before a switch whose tile is not read yet).
  void ReadWaiting(size_t l);

  EmitState& s_;
  const PassShapes& shapes_;
  const UnitCosts& costs_;
  Activates& acts_;
  ParamSets& params_;
  AccRegions& regions_;
  PassEmitter& pass_;
  // The tiles of the group Lanes emits, per unit: this group's `own`, then the next group's
  // first, up to the FIFO's depth (read ahead as this group's switches make room); how many
  // are read (some ahead, by the group before) and how many switched in; the reads waiting
  // (PaceReads, each the room one switch made), the rows the units streamed (a clock) and
  // when each unit's weight DMA is free of its last read.
  struct LaneReads {
    std::vector<std::vector<int>> tiles;
    std::vector<size_t> own, read, used;
    std::deque<size_t> waiting;
    int64_t clock = 0, channel = 0;  // ... and when the channel is free of the last read
    std::vector<int64_t> free;
    int op = -1;
  } lane_reads_;
  std::array<size_t, engine::kMaxMxus> ahead_read_ = {};  // per unit, the next group's tiles read
};

}  // namespace tpu::compiler::emit
