// The parameter sets in the core's slots (graph_emitter.h): all of them read once at the
// start where they fit, else each loaded into the next slot in turn as a pass needs it, runs
// of them read ahead in one transfer.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "host/compiler/emit/activates.h"
#include "host/compiler/emit/emit_state.h"
#include "host/compiler/emit/unit_costs.h"

namespace tpu::compiler::emit {

class ParamSets {
 public:
  ParamSets(EmitState& s, Activates& acts, const UnitCosts& costs)
      : s_(s), acts_(acts), costs_(costs) {}

  // The parameter-set slot that holds set `set` (loaded now if it is not there).
  uint64_t Slot(int64_t set, int op);
  // Sets `sets` that are not in a slot, loaded with one read where they follow each other
  // and their slots in turn do too (else Slot loads each when it is used): each read_host
  // pays the host link's latency, and one emitted while the host DMA is busy holds back
  // every instruction behind it. Not into slots `keep` (sets still to be used).
  void Preload(const std::vector<int64_t>& sets, int op, const std::vector<uint64_t>& keep = {});
  // The parameter sets of op i's first pass (one a unit it spreads over; LoadNext).
  int64_t FirstSets(int i) const;
  // The parameter sets the first pass of the operation after op takes (one a unit it
  // spreads over), loaded now where they are not in a slot: before a host transfer, which
  // would hold back a read_host of them emitted behind it for all its rows.
  void LoadNext(int op);
  // Every set, read at the program's start where they fit the slots.
  void Begin();

 private:
  // Sets [first, first + n) into the next n slots in turn (which do not wrap).
  void Load(int64_t first, int64_t n, int op);

  EmitState& s_;
  Activates& acts_;
  const UnitCosts& costs_;
  bool all_params_ = true;
  std::map<int64_t, int64_t> slot_of_, set_in_;  // parameter set <-> slot (when streamed)
  int64_t next_slot_ = 0;
};

}  // namespace tpu::compiler::emit
