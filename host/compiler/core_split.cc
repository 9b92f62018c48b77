// Jobs of one core each combined into a job of a program per core (see core_split.h).
#include "host/compiler/core_split.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "contract/tpu_contract.h"
#include "host/engine/chip_engine.h"
#include "host/isa/isa.h"

namespace tpu::compiler {
namespace {

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

uint32_t Moved(uint64_t addr, uint64_t delta, const char* what) {
  const uint64_t v = addr + delta;
  if (v > 0xffffffffu) {
    throw std::invalid_argument(std::string(what) + " address " + std::to_string(v) +
                                " does not fit its 32-bit field");
  }
  return static_cast<uint32_t>(v);
}

// Places `part` at `base` in `image` (zeros between).
void Place(std::vector<uint8_t>* image, uint64_t base, const std::vector<uint8_t>& part) {
  image->resize(base, 0);
  image->insert(image->end(), part.begin(), part.end());
}

}  // namespace

isa::Program Relocate(const isa::Program& program, uint64_t host_delta, uint64_t weight_delta) {
  isa::Program out = program;
  for (isa::Word& w : out.words) {
    isa::Instruction in = isa::Decode(w);
    if (in.opcode == isa::Opcode::kReadHost) {
      in.src = Moved(in.src, host_delta, "read_host host");
    } else if (in.opcode == isa::Opcode::kWriteHost) {
      in.dst = Moved(in.dst, host_delta, "write_host host");
    } else if (in.opcode == isa::Opcode::kReadWeights || in.opcode == isa::Opcode::kReadHbm ||
               in.opcode == isa::Opcode::kWriteHbm) {
      // (the three keep their address bits 32-47 in the same aux bits: isa/assembler.cc;
      // write_hbm its bits 0-31 in dst)
      uint32_t& low = in.opcode == isa::Opcode::kWriteHbm ? in.dst : in.src;
      const uint64_t addr =
          (uint64_t{hw::kOpdReadWeightsAddrHi.Get(in.aux)} << 32 | low) + weight_delta;
      if (addr >> 32 > hw::kOpdReadWeightsAddrHi.Max()) {
        throw std::invalid_argument(std::string(isa::Mnemonic(in.opcode)) +
                                    " address beyond 48 bits");
      }
      low = static_cast<uint32_t>(addr);
      in.aux = (in.aux & ~hw::kOpdReadWeightsAddrHi.Put(hw::kOpdReadWeightsAddrHi.Max())) |
               hw::kOpdReadWeightsAddrHi.Put(addr >> 32);
    } else {
      continue;
    }
    w = isa::Encode(in);
  }
  return out;
}

CoreJobs CombineCoreJobs(std::vector<engine::ExecJob> jobs) {
  if (jobs.empty()) throw std::invalid_argument("CombineCoreJobs: no jobs");
  CoreJobs r;
  if (jobs.size() == 1 && jobs[0].other_programs.empty()) {  // one core: the job as it is
    r.job = std::move(jobs[0]);
    r.host_base = {0};
    r.weight_base = {r.job.weight_image_addr};
    r.out_addr = {r.job.host_out_addr};
    r.out_bytes = {r.job.host_out_bytes};
    return r;
  }
  engine::ExecJob& job = r.job;
  job.name = jobs[0].name;
  uint64_t out_end = 0, host_end = 0;  // host_end: past every window so far
  const std::vector<uint8_t>& weights0 = jobs[0].weight_image;
  for (size_t c = 0; c < jobs.size(); ++c) {
    engine::ExecJob& part = jobs[c];
    if (!part.other_programs.empty()) {
      throw std::invalid_argument("CombineCoreJobs: job " + std::to_string(c) +
                                  " already has programs for several cores");
    }
    // A core's window holds its image and the range it writes back.
    const uint64_t host = AlignUp(host_end, kCoreWindowAlign);
    host_end =
        host + std::max<uint64_t>(part.host_image.size(), part.host_out_addr + part.host_out_bytes);
    // The same weights at the same address are shared; others get their own window.
    const bool shared = c > 0 && part.weight_image == weights0 &&
                        part.weight_image_addr == jobs[0].weight_image_addr;
    const uint64_t weight_delta =
        c == 0 || shared
            ? 0
            : AlignUp(job.weight_image_addr + job.weight_image.size(), kCoreWindowAlign) -
                  part.weight_image_addr;
    r.host_base.push_back(host);
    r.weight_base.push_back(part.weight_image_addr + weight_delta);
    Place(&job.host_image, host, part.host_image);
    if (c == 0) {
      job.weight_image = part.weight_image;
      job.weight_image_addr = part.weight_image_addr;
    } else if (!shared) {
      Place(&job.weight_image, part.weight_image_addr + weight_delta - job.weight_image_addr,
            part.weight_image);
    }
    r.out_addr.push_back(part.host_out_addr + host);
    r.out_bytes.push_back(part.host_out_bytes);
    out_end = std::max(out_end, r.out_addr.back() + part.host_out_bytes);
    isa::Program p = Relocate(part.program, host, weight_delta);
    if (c == 0) {
      job.program = std::move(p);
    } else {
      job.other_programs.push_back(std::move(p));
    }
  }
  job.host_out_addr = r.out_addr[0];
  job.host_out_bytes = out_end - job.host_out_addr;
  return r;
}

std::vector<uint8_t> CoreJobs::HostOut(const std::vector<uint8_t>& out, size_t core) const {
  const uint64_t from = out_addr.at(core) - job.host_out_addr;
  if (out.size() < from + out_bytes[core]) {
    throw std::invalid_argument("CoreJobs::HostOut: the read-back is shorter than core " +
                                std::to_string(core) + "'s range");
  }
  return std::vector<uint8_t>(out.begin() + static_cast<std::ptrdiff_t>(from),
                              out.begin() + static_cast<std::ptrdiff_t>(from + out_bytes[core]));
}

std::string InputsRegion(size_t core, size_t cores) {
  return cores == 1 ? "inputs" : "inputs " + std::to_string(core);
}

engine::Executable TakeExecutable(CoreJobs* jobs, const std::vector<uint64_t>& input_bytes,
                                  const std::string& name) {
  engine::ExecJob& kept = jobs->job;
  engine::ExecJob taken;
  taken.name = name;
  taken.program = std::exchange(kept.program, {});
  taken.other_programs = std::exchange(kept.other_programs, {});
  taken.host_image = std::exchange(kept.host_image, {});
  taken.weight_image = std::exchange(kept.weight_image, {});
  taken.weight_image_addr = kept.weight_image_addr;
  taken.host_out_addr = kept.host_out_addr;
  taken.host_out_bytes = kept.host_out_bytes;
  engine::Executable exe = engine::ExecutableOf(std::move(taken));
  for (size_t c = 0; c < input_bytes.size(); ++c) {
    exe.regions.push_back({InputsRegion(c, input_bytes.size()),
                           engine::Memory::kHost,
                           jobs->host_base[c],
                           input_bytes[c],
                           {}});
  }
  return exe;
}

}  // namespace tpu::compiler
