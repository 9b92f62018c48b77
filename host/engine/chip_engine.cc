// Engine selection, the shared run messages and job checks (see chip_engine.h).
#include "host/engine/chip_engine.h"

#include <fmt/format.h>

#include "host/common/errors.h"

namespace tpu::engine {

EngineKind ParseEngineKind(const std::string& name) {
  if (name == "rtl") return EngineKind::kRtl;
  if (name == "fast") return EngineKind::kFast;
  throw UsageError("unknown engine '" + name +
                   "'; use rtl (the Verilated RTL, the reference) or fast (the C++ model, any "
                   "array size)");
}

const char* EngineKindName(EngineKind kind) { return kind == EngineKind::kRtl ? "rtl" : "fast"; }

std::string ErrorMessage(uint64_t pc, uint64_t status) {
  std::string m = fmt::format("the chip stopped at instruction {}: {}", pc,
                              status < hw::kStatusText.size() ? hw::kStatusText[status] : "?");
  if (status == static_cast<uint64_t>(hw::Status::kWrongFormat)) {
    m += "; a bf16 chip runs programs that start with set_format dtype=bf16 (without fn= "
         "tables or set_residual product), an int8 chip programs without it (docs/isa.md, "
         "\"Number format\")";
  }
  return m;
}

std::string NoHaltMessage(uint64_t instructions) {
  return fmt::format(
      "the program ended after {} instructions without HALT; the chip is idle, "
      "waiting for more",
      instructions);
}

std::string WatchdogMessage(const StallInfo& s) {
  std::string m =
      fmt::format("watchdog: no progress for {} cycles; instruction {}", s.quiet_cycles, s.pc);
  if (s.opcode >= 0 && static_cast<size_t>(s.opcode) < hw::kMnemonics.size()) {
    m += fmt::format(" ({})", hw::kMnemonics[static_cast<size_t>(s.opcode)]);
  }
  m += std::string(" is ") + (s.issue < hw::kIssueText.size() ? hw::kIssueText[s.issue] : "?");
  std::string busy;
  for (int u = 0; u < hw::kNumUnits; ++u) {
    if (!(s.busy & (1u << u))) continue;
    busy += (busy.empty() ? "" : ", ") + std::string(hw::kUnitText[static_cast<size_t>(u)]);
    if (u == hw::kUnitMatrix && s.wait_weights) {
      busy +=
          " (stuck: a matmul with 'switch' waits for a weight tile that no read_weights "
          "brings)";
    }
  }
  m += busy.empty() ? "; no unit is busy" : "; busy: " + busy;
  return m;
}

void CheckJobFits(const ExecJob& job, const config::TpuConfig& c) {
  const auto host = static_cast<uint64_t>(c.host_mem_bytes);
  const auto weights = static_cast<uint64_t>(c.weight_mem_bytes);
  if (job.host_image.size() > host) {
    throw UsageError(
        fmt::format("the host image ({} bytes) does not fit host memory ({} bytes, "
                    "host_mem_bytes)",
                    job.host_image.size(), host));
  }
  if (job.weight_image_addr > weights ||
      job.weight_image.size() > weights - job.weight_image_addr) {
    throw UsageError(
        fmt::format("the weight image ({} bytes at {}) does not fit weight memory ({} "
                    "bytes, weight_mem_bytes)",
                    job.weight_image.size(), job.weight_image_addr, weights));
  }
  if (job.program.words.size() > kMaxProgramWords) {
    throw UsageError(
        fmt::format("the program has {} instructions; the chip's program region "
                    "holds at most {}",
                    job.program.words.size(), kMaxProgramWords));
  }
  if (job.host_out_addr > host || job.host_out_bytes > host - job.host_out_addr) {
    throw UsageError(
        fmt::format("the host range to read back runs past the end of host memory "
                    "({} bytes)",
                    host));
  }
}

}  // namespace tpu::engine
