// What an engine loads once and runs many times (data only): each core's program and a
// memory map of named regions. A run writes regions, runs, and reads regions, over memories
// that keep what they hold between runs (docs/architecture.md, "The engine seam").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/isa/isa.h"

namespace tpu::engine {

// The chip's memories that a region can name.
enum class Memory : uint8_t { kHost, kWeight };
inline const char* Name(Memory m) { return m == Memory::kHost ? "host" : "weight"; }

// A named range of one memory: a model's inputs, outputs, weights, parameters, state...
struct Region {
  std::string name;
  Memory memory = Memory::kHost;
  uint64_t addr = 0;
  uint64_t bytes = 0;
  // What Load writes into it from its first byte (weights, parameters); empty: nothing, the
  // region keeps what the memory holds.
  std::vector<uint8_t> initial;
};

struct Executable {
  std::string name;  // for people and timelines: the program file, the model, ...
  // Core c's program is programs[c]; a core without one (or with an empty one) does not
  // start. At least core 0's.
  std::vector<isa::Program> programs;
  std::vector<Region> regions;

  // The region named `name`; throws UsageError naming the regions there are.
  const Region& At(const std::string& name) const;
};

}  // namespace tpu::engine
