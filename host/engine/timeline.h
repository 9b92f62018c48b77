// An instruction timeline of chip runs in the Chrome trace-event format, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open: one track for the controller's issue stage
// (every instruction's issue, and why it waited: its unit busy, a hazard, a drain) and
// one per unit (host DMA, weight DMA, matrix unit, activation unit, and on a bf16 chip the
// vector unit; on a core of several matrix units one per matrix unit) with a slice per instruction
// from the cycle the unit starts it to the cycle it is done (for a matrix unit: until its next
// matmul starts or its last row has reached its accumulators).
//
// Both engines feed it the same observations, cycle by cycle: what the issue stage did
// and which units had work (ChipEngine's timeline option), so the same program gives the
// same timeline on either. Several runs (the jobs of `tpusim run`) are laid end to end.
// Times are microseconds at the config's clock; every event also carries its cycles.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "host/engine/cycle_observer.h"
#include "host/isa/isa.h"

namespace tpu::engine {

class Timeline : public CycleObserver {
 public:
  // mxus: the core's matrix units (config mxus_per_core), each a track of its own;
  // vector_unit: whether the chip has one (a bf16 chip), and so a track for it.
  explicit Timeline(double clock_mhz, int mxus = 1, bool vector_unit = false)
      : clock_mhz_(clock_mhz), mxus_(mxus), vector_unit_(vector_unit) {}

  void BeginRun(const isa::Program& program, const std::string& label) override;
  // Uses the issue state and the busy units.
  void Cycles(uint64_t first, uint64_t count, const CycleObs& obs) override;
  void EndRun(uint64_t cycles) override;

  // A slice on the layers track: cycles [start, end) of the last run that ended belong to
  // `layer` (host/engine/cycle_attribution.h).
  void LayerSlice(const std::string& layer, uint64_t start, uint64_t end);
  // The layers track's name (a training step's: its passes).
  void NameLayerTrack(std::string name) { layer_track_ = std::move(name); }

  // Adds `key` to the file's metadata (otherData): the engine, the config, ...
  void Note(const std::string& key, nlohmann::json value) { notes_[key] = std::move(value); }

  // The trace events, without anything that differs between engines.
  const nlohmann::json& Events() const { return events_; }
  // The whole file: events plus metadata (track names, clock, runs). On a chip of several
  // cores this is core 0's timeline and `other_cores` the others': core c is process c + 1.
  nlohmann::json ToJson(const std::vector<const Timeline*>& other_cores = {}) const;
  // Writes ToJson() atomically. Throws RuntimeError when it cannot.
  void Write(const std::string& path, const std::vector<const Timeline*>& other_cores = {}) const;

 private:
  struct Open {
    bool open = false;
    uint64_t pc = 0, start = 0;
  };
  void Slice(int track, const std::string& name, uint64_t start, uint64_t end, nlohmann::json args);
  void CloseUnit(int unit, uint64_t end);
  void CloseMxu(int mxu, uint64_t end);
  void CloseSlice(Open* o, int track, uint64_t end);
  std::vector<std::string> TrackNames() const;
  void CloseIssueRun(uint64_t end);

  double clock_mhz_;
  int mxus_;
  bool vector_unit_;
  nlohmann::json events_ = nlohmann::json::array();
  nlohmann::json runs_ = nlohmann::json::array();
  nlohmann::json notes_ = nlohmann::json::object();
  uint64_t base_ = 0;              // the first cycle of the current run on the common time axis
  uint64_t last_base_ = 0;         // ... of the last run that ended
  std::vector<std::string> text_;  // the current run's instructions, disassembled
  std::vector<uint8_t> opcodes_, units_of_;  // each instruction's opcode, its matrix unit
  uint64_t fired_ = 0;                       // instructions issued so far in this run
  std::vector<Open> units_, mxu_;            // by unit (hw::kUnit*; the matrix units' in mxu_)
  int issue_state_ = -1;                     // the controller's current run of one state
  uint64_t issue_start_ = 0;
  std::string layer_track_ = "layers (whole-network programs)";
};

}  // namespace tpu::engine
