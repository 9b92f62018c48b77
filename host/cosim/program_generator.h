// Random TPU programs for co-simulation: mostly valid ones with random shapes, addresses,
// flags, tiling, accumulate chains, pooling modes and DMA overlapping the matrix unit, and
// some that end in every way a run can end badly (each error status, a watchdog stop, no
// halt). Every program only reads on-chip state it wrote itself (a prologue fills the rows
// and parameter sets it uses, and switches a tile in first), so its result does not depend
// on what earlier runs left behind.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"

namespace tpu::cosim {

struct GeneratedProgram {
  engine::ExecJob job;  // program, images, and the host range to compare (all of it)
  // valid, or the way it is meant to end: invalid-opcode, watchdog, ...; on a chip of several
  // cores each core's, in core order ("valid, idle, watchdog")
  std::string kind;
};

class ProgramGenerator {
 public:
  ProgramGenerator(const config::TpuConfig& config, uint64_t seed);
  // The i-th program of the seed's sequence (the same i and seed give the same program); on
  // a chip of several cores (config `cores`), a program for each core, each in its own window
  // of host and weight memory, core 0's the one a chip of one core gets.
  GeneratedProgram Make(uint64_t index) const;

 private:
  config::TpuConfig config_;
  uint64_t seed_;
};

}  // namespace tpu::cosim
