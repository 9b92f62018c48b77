// What both engines report about every cycle of a run, for tools that follow a run cycle
// by cycle: the instruction timeline (timeline.h) and the per-layer attribution of the
// counters (cycle_attribution.h). The same program gives the same observations on either
// engine: the rtl engine reads them from the chip's outputs (issue_o, unit_busy_o, obs_o
// of rtl/tpu_top.sv), the fast engine computes them the same way.
#pragma once

#include <cstdint>
#include <string>

#include "host/isa/isa.h"

namespace tpu::engine {

struct CycleObs {
  uint8_t issue = 0;  // what the issue stage did (hw::Issue)
  uint8_t busy = 0;   // the units that had work (bits hw::kUnit*)
  // obs_o: what the matrix unit did (bits 2:0, hw::MxuCycle) and the stalls (hw::kObs*),
  // as the contract lays it out (contract/tpu_contract.toml, "observation port")
  uint8_t obs = 0;
};

class CycleObserver {
 public:
  virtual ~CycleObserver() = default;
  // A run starts; `label` names it (e.g. the layer).
  virtual void BeginRun(const isa::Program& program, const std::string& label) = 0;
  // Cycles [first, first + count) of the run, all alike.
  virtual void Cycles(uint64_t first, uint64_t count, const CycleObs& obs) = 0;
  // The run ended after `cycles` cycles.
  virtual void EndRun(uint64_t cycles) = 0;
};

}  // namespace tpu::engine
