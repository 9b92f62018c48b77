// The attainable bound of chip programs (docs/performance.md, "The attainable bound of a
// program"): the fewest cycles any run of them could take, from the instructions alone. Each
// resource's own time for the instructions that use it, at its rate when nothing waits
// (docs/timing.md), is a floor under the run; the bound is the largest, as if every unit
// overlapped every other perfectly. Never from a run:
//   issue           one instruction a cycle
//   host link       every row read_host and write_host move (a parameter set its rows), at
//                   the channel's cycles per row (bytes / bytes per cycle, at least 1); the
//                   cores share it, so their rows add up
//   host DMA        per core: the host link's time for its own rows, plus host_mem_latency
//                   for each read_host (the DMA is busy until its last row has arrived, that
//                   long after its bytes crossed, and takes one instruction at a time);
//                   each read_hbm's rows at the weight memory's cycles per row, plus
//                   weight_mem_latency
//   weight memory   every read_weights and read_hbm row at its cycles per row; shared by
//                   the cores
//   weight DMA      per matrix unit: read_weights as the weight memory's time plus its
//                   latency; load_weights T tiles: T x N + 1 cycles, with transpose T x (2N+1)
//   matrix unit     per matrix unit: each run of rows through one tile (a matmul with
//                   switch and the matmuls after it without) max(rows, N) cycles: rows enter
//                   one a cycle, and a tile's N rows shift in only after the tile before has
//                   switched in
//   activation unit per core: one accumulator row a cycle
//   vector unit     per core: ceil(rows / sublanes) + latency + 1 for each vector
//                   instruction, one at a time
// The per-core and per-unit terms are the busiest core's or unit's. A program that stops
// early (an error, a watchdog) has no bound: it did not run its instructions.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "host/config/tpu_config.h"
#include "host/isa/isa.h"

namespace tpu::report {

struct BoundTerm {
  std::string resource;  // "host link", "vector unit", ...
  double cycles = 0;
};

struct ProgramBound {
  std::vector<BoundTerm> terms;  // every resource, in the order of the list above
  double Cycles() const;         // the largest term
  std::string Binds() const;     // its resource
  // What the exec report prints: "14,023 cycles (host link binds); host link 14,023, ...".
  std::string Text() const;
  nlohmann::json ToJson() const;
};

// programs[c] runs on core c.
ProgramBound BoundPrograms(const std::vector<isa::Program>& programs,
                           const config::TpuConfig& config);

}  // namespace tpu::report
