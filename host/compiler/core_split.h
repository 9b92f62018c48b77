// Data parallelism across the cores of a chip (config `cores`; docs/compiler.md, "Several
// cores"): jobs compiled for one core each (a share of a batch, a block of a GEMM's rows)
// combined into one job of a program per core. Each core's host image and read-back range get
// their own window of host memory, and its program's host addresses move with it; weight images
// that are the same are kept once and shared (the cores read the same tiles), others get windows
// too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/engine/exec_job.h"
#include "host/engine/executable.h"

namespace tpu::compiler {

struct CoreJobs {
  engine::ExecJob job;                // core 0's program first; the read-back covers every core's
  std::vector<uint64_t> host_base;    // where each core's host image starts
  std::vector<uint64_t> weight_base;  // where each core's weight image starts
  std::vector<uint64_t> out_addr, out_bytes;  // each core's read-back range, moved
  // Core c's read-back bytes (its own job's host_out range) out of the job's result.
  std::vector<uint8_t> HostOut(const std::vector<uint8_t>& out, size_t core) const;
};

// The executable of the combined jobs, named `name` (host/engine/executable.h): their
// programs, and the regions `host image` and `weight image` (their images, written when it
// is loaded), `inputs` on one core or `inputs C` for core C (`input_bytes[C]` bytes from the
// start of core C's window, each batch's to write: InputsRegion) and `outputs` (the
// read-back range of every core: HostOut splits it). The programs and images move into it;
// `jobs` keeps the layout the runs use (the windows, the read-back ranges).
engine::Executable TakeExecutable(CoreJobs* jobs, const std::vector<uint64_t>& input_bytes,
                                  const std::string& name);
// The name of core `core`'s inputs region among `cores`.
std::string InputsRegion(size_t core, size_t cores);

// Host windows start on this boundary.
inline constexpr uint64_t kCoreWindowAlign = 4096;

// Combines one job per core (at most the chip's cores; each job's own program only). Throws
// std::invalid_argument when a job already holds programs for other cores.
CoreJobs CombineCoreJobs(std::vector<engine::ExecJob> jobs);

// The program with every host address (read_host's source, write_host's destination) moved
// up by host_delta and every weight address (read_weights, read_hbm) by weight_delta. Throws
// std::invalid_argument when an address no longer fits its field.
isa::Program Relocate(const isa::Program& program, uint64_t host_delta, uint64_t weight_delta);

}  // namespace tpu::compiler
