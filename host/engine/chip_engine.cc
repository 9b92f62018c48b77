// Engine selection, the shared run messages and job checks (see chip_engine.h).
#include "host/engine/chip_engine.h"

#include <fmt/format.h>

#include <iterator>
#include <stdexcept>
#include <utility>

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

void ChipEngine::SetObserver(CycleObserver* observer, int core) {
  if (core < 0) throw std::invalid_argument("SetObserver: a core is 0 or more");
  if (static_cast<size_t>(core) >= observers_.size()) observers_.resize(core + 1u, nullptr);
  observers_[static_cast<size_t>(core)] = observer;
}

void ChipEngine::SetTimeline(Timeline* timeline, int core) {
  if (core < 0) throw std::invalid_argument("SetTimeline: a core is 0 or more");
  if (static_cast<size_t>(core) >= timelines_.size()) timelines_.resize(core + 1u, nullptr);
  timelines_[static_cast<size_t>(core)] = timeline;
}

std::vector<CycleObserver*> ChipEngine::Observers(int core) const {
  std::vector<CycleObserver*> v;
  if (Timeline* t = GetTimeline(core)) v.push_back(t);
  if (static_cast<size_t>(core) < observers_.size() && observers_[static_cast<size_t>(core)]) {
    v.push_back(observers_[static_cast<size_t>(core)]);
  }
  return v;
}

CoreObservers::CoreObservers(const ChipEngine& engine, const ExecJob& job, int cores) {
  for (int c = 0; c < cores; ++c) {
    by_core_.push_back(engine.Observers(c));
    for (CycleObserver* o : by_core_.back()) o->BeginRun(job.ProgramOf(c), job.name);
    empty_ = empty_ && by_core_.back().empty();
  }
}

void CoreObservers::EndRun(const ExecResult& r) const {
  // The run's cycles for every core: runs laid end to end stay aligned across the cores.
  for (const auto& observers : by_core_)
    for (CycleObserver* o : observers) o->EndRun(r.cycles);
}

void SummarizeCores(ExecResult* r, RunEnd state, uint64_t cycles,
                    const std::vector<std::string>& messages) {
  r->state = state;
  r->ok = r->state == RunEnd::kHalted;
  r->counters = hw::ChipCounters();
  for (const CoreResult& c : r->cores) r->counters += c.counters;
  r->counters.cycles = r->cycles = cycles;
  for (size_t i = 0; i < r->cores.size(); ++i) {
    const CoreResult& c = r->cores[i];
    if (c.state != r->state) continue;
    r->chip_status = c.chip_status;
    r->error_pc = c.error_pc;
    r->message =
        r->ok || r->cores.size() == 1 ? messages[i] : fmt::format("core {}: {}", i, messages[i]);
    break;
  }
  if (r->cores.size() == 1) r->cores.clear();
}

void CheckJobFits(const ExecJob& job, const config::TpuConfig& c) {
  if (job.other_programs.size() + 1 > static_cast<size_t>(c.cores)) {
    throw UsageError(fmt::format(
        "the job has programs for {} cores; config '{}' has {} (cores); run it with --set "
        "cores={}",
        job.other_programs.size() + 1, c.name, c.cores, job.other_programs.size() + 1));
  }
  for (size_t i = 0; i < job.other_programs.size(); ++i) {
    if (job.other_programs[i].words.size() > kMaxProgramWords) {
      throw UsageError(fmt::format(
          "core {}'s program has {} instructions; a core's program region holds at most {}", i + 1,
          job.other_programs[i].words.size(), kMaxProgramWords));
    }
  }
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

void CheckRegionFits(const Region& r, const config::TpuConfig& c) {
  const auto size =
      static_cast<uint64_t>(r.memory == Memory::kHost ? c.host_mem_bytes : c.weight_mem_bytes);
  if (r.addr > size || r.bytes > size - r.addr) {
    throw UsageError(fmt::format(
        "region '{}' ({} bytes at {}) runs past the end of {} memory ({} bytes, {}_mem_bytes)",
        r.name, r.bytes, r.addr, Name(r.memory), size, Name(r.memory)));
  }
}

const Region& Executable::At(const std::string& region) const {
  for (const Region& r : regions)
    if (r.name == region) return r;
  std::string names;
  for (const Region& r : regions) names += (names.empty() ? "" : ", ") + r.name;
  throw UsageError("executable '" + name + "' has no region '" + region +
                   "' (it has: " + (names.empty() ? "none" : names) + ")");
}

void ChipEngine::Load(Executable exe) {
  if (exe.programs.empty()) throw UsageError("executable '" + exe.name + "' has no program");
  ExecJob job;
  job.name = exe.name;
  job.program = std::move(exe.programs[0]);
  job.other_programs.assign(std::make_move_iterator(exe.programs.begin() + 1),
                            std::make_move_iterator(exe.programs.end()));
  exe.programs.clear();
  CheckJobFits(job, Config());
  for (const Region& r : exe.regions) {
    CheckRegionFits(r, Config());
    if (r.initial.size() > r.bytes) {
      throw UsageError(fmt::format("region '{}' of executable '{}' has {} bytes, {} initial ones",
                                   r.name, exe.name, r.bytes, r.initial.size()));
    }
  }
  loaded_ = std::move(exe);
  programs_ = std::move(job);
  has_loaded_ = true;
  for (Region& r : loaded_.regions) {
    if (!r.initial.empty()) WriteMemory(r.memory, r.addr, r.initial);
    r.initial = {};  // written: the loaded map keeps no second copy
  }
}

const Executable& ChipEngine::Loaded() const {
  if (!has_loaded_) throw UsageError("no executable is loaded; Load one first");
  return loaded_;
}

void ChipEngine::Write(const std::string& region, const std::vector<uint8_t>& bytes) {
  const Region& r = Loaded().At(region);
  if (bytes.size() > r.bytes) {
    throw UsageError(fmt::format("{} bytes do not fit region '{}' of executable '{}' ({} bytes)",
                                 bytes.size(), r.name, loaded_.name, r.bytes));
  }
  if (!bytes.empty()) WriteMemory(r.memory, r.addr, bytes);
}

std::vector<uint8_t> ChipEngine::Read(const std::string& region) {
  const Region& r = Loaded().At(region);
  return ReadMemory(r.memory, r.addr, r.bytes);
}

ExecResult ChipEngine::Run() {
  Loaded();
  return RunPrograms(programs_);
}

ExecResult ChipEngine::Run(const ExecJob& job) {
  CheckJobFits(job, Config());  // first: its messages name the job's images
  Load(ExecutableOf(job));
  ExecResult r = Run();
  if (job.host_out_bytes > 0 && ComputesValues()) r.host_out = Read("outputs");
  return r;
}

Executable ExecutableOf(ExecJob job) {
  Executable exe;
  exe.name = std::move(job.name);
  exe.programs.push_back(std::move(job.program));
  for (isa::Program& p : job.other_programs) exe.programs.push_back(std::move(p));
  const uint64_t host_bytes = job.host_image.size(), weight_bytes = job.weight_image.size();
  exe.regions = {{"host image", Memory::kHost, 0, host_bytes, std::move(job.host_image)},
                 {"weight image", Memory::kWeight, job.weight_image_addr, weight_bytes,
                  std::move(job.weight_image)},
                 {"outputs", Memory::kHost, job.host_out_addr, job.host_out_bytes, {}}};
  return exe;
}

}  // namespace tpu::engine
