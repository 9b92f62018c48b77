// Where a run that stopped making progress was stuck: what the watchdog reports. Both
// engines fill it (sim/system/tpu_system.cc for the RTL, fast/fast_chip.cc), and the host turns
// it into one message (host/engine/chip_engine.h, WatchdogMessage).
#pragma once

#include <cstdint>

namespace tpu::sim {

struct StallInfo {
  uint64_t quiet_cycles = 0;  // cycles without progress
  uint64_t pc = 0;            // the instruction at the head of the queue (instructions retired)
  int opcode = -1;            // its opcode; -1 when it was never handed to the chip
  uint8_t issue = 0;          // hw::Issue of the last cycle
  uint8_t busy = 0;           // units with work, bits hw::kUnit*
  bool wait_weights = false;  // a matmul with switch waits for its weight tile
  int core = 0;               // the core (on a chip of several)
};

}  // namespace tpu::sim
