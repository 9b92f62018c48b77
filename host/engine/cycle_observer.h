// What both engines report about every cycle of a run, for tools that follow a run cycle
// by cycle: the instruction timeline (timeline.h) and the per-layer attribution of the
// counters (cycle_attribution.h). The same program gives the same observations on either
// engine: the rtl engine reads them from the chip's outputs (issue_o, unit_busy_o, obs_o
// and mxu_busy_o of rtl/tpu_top.sv), the fast engine computes them the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "contract/tpu_contract.h"
#include "host/isa/isa.h"

namespace tpu::engine {

// The most matrix units a core has: as many as mxu= names.
inline constexpr int kMaxMxus = static_cast<int>(hw::kOpdMatmulMxu.Max()) + 1;

// Each instruction's opcode and the matrix unit it names (mxu=; 0 where it names none).
inline void OpcodesAndUnits(const isa::Program& program, std::vector<uint8_t>* opcodes,
                            std::vector<uint8_t>* units) {
  opcodes->clear();
  units->clear();
  for (const isa::Word& w : program.words) {
    opcodes->push_back(w[hw::kOpcodeOffset]);
    units->push_back(static_cast<uint8_t>(hw::kOpdMatmulMxu.Get(w[hw::kFlagsOffset])));
  }
}

struct CycleObs {
  uint8_t issue = 0;  // what the issue stage did (hw::Issue)
  uint8_t busy = 0;   // the units that had work (bits hw::kUnit*)
  // obs_o: what the matrix unit did (bits 2:0, hw::MxuCycle) and the stalls (hw::kObs*),
  // as the contract lays it out (contract/tpu_contract.toml, "observation port")
  uint8_t obs = 0;
  uint8_t mxus = 0;  // the matrix units that had work (mxu_busy_o, bit m: unit m)
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
